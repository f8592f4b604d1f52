package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/objects"
)

// putOptions are the flags of `lake put`.
type putOptions struct {
	endpointOptions
	table       string
	set         []string
	name        string
	contentType string
	json        bool
	noProgress  bool
	noDedup     bool
	recursive   bool
	jobs        int
	batchRows   int
	batchWait   time.Duration

	// Where progress goes (stderr) and whether it is a terminal; set by
	// the command, nil in tests that do not want it.
	progressOut io.Writer
	progressTTY bool
}

func (o *putOptions) addFlags(cmd *cobra.Command) {
	o.endpointOptions.addFlags(cmd)
	f := cmd.Flags()
	f.StringVarP(&o.table, "table", "t", "", "table to add the rows to (required)")
	f.BoolVar(&o.noProgress, "no-progress", false, "do not report upload progress on standard error")
	f.BoolVar(&o.noDedup, "no-dedup", false, "upload every file even when the stage holds its content already")
	// StringArray, not StringSlice: a value may contain commas.
	f.StringArrayVar(&o.set, "set", nil, "fill column COL with VALUE, as COL=VALUE (repeatable)")
	f.StringVar(&o.name, "name", "", "name of the file (default: its base name; required for -)")
	f.StringVar(&o.contentType, "content-type", "", "MIME type (default: from the name's extension)")
	f.BoolVar(&o.json, "json", false, "print one JSON object per file instead of a table")
	f.BoolVarP(&o.recursive, "recursive", "r", false, "put every regular file under each directory PATH")
	f.IntVar(&o.jobs, "jobs", client.DefaultJobs, "files uploaded at once, when putting many")
	f.IntVar(&o.batchRows, "batch-rows", client.DefaultBatchRows, "most rows committed as one table version, when putting many")
	f.DurationVar(&o.batchWait, "batch-wait", client.DefaultBatchWait, "longest an uploaded file waits for its rows' commit, when putting many")
	_ = cmd.MarkFlagRequired("table")
}

func newPutCommand(g *globalOptions) *cobra.Command {
	o := &putOptions{}
	cmd := &cobra.Command{
		Use:   "put PATH... --table T",
		Short: "Upload files to the stage and add a row for each",
		Long: `Upload each file straight to the managed stage, then add one row for it to
the table.

On an S3 stage the metadata service grants each upload: it picks the key
and signs the part URLs, and this command needs no AWS credentials, only
a token with the write scope. Content the stage already holds (in any
table) is not sent again: the row points at the existing object
(--no-dedup sends it anyway). An interrupted put of a large file resumes
when run again, sending only the parts the stage lacks.

One file is one table version. Many files (several PATHs, or directories
with -r) upload --jobs at a time and commit in batches, one table version
per batch: a batch is sent when it holds --batch-rows rows or its first
file has waited --batch-wait. The defaults (8 jobs, 256 rows, 1s) keep a
disk's fsyncs or an S3 stage's round trips overlapped without crowding a
small machine, and add at most about one table version a second: bigger
batches mean fewer versions and round trips, the wait bounds how long an
uploaded file stays out of the table. A run of many files keeps a run
checkpoint next to the upload
checkpoints: killed or failed, the same command run again commits each
file exactly once — it skips files already committed, resends the batch
that was in flight with the same commit id, and puts the rest. A file
that vanishes or cannot be read during the run is reported, the others go
on, and lake exits with status 1. Inside a directory, symbolic links and
special files are skipped.

The row's first FILE column gets the file's location, size and SHA-256; a
"name" column gets the file's base name (or --name), a "created_at"
timestamp column the current time, and --set COL=VALUE fills any other
column. Values are parsed as the column's type: integers, floats, bool
(true/false), timestamps as RFC 3339 or unix microseconds, dates as
YYYY-MM-DD. A bad --set fails before anything is uploaded.

PATH "-" reads standard input and needs --name. Output: per file, its key,
size, SHA-256 and the table version holding its row; with --json one JSON
object per line. A run of many files prints its rows as their batches
commit, reports a failed file on standard error (and with --json as
{"path": …, "error": …}; a file an earlier run committed as {"path": …,
"skipped": true}), and ends with a summary line on standard error.` + endpointHelp,
		Example: `  lake put clip.mp4 --table videos
  lake put *.mp4 --table videos --set camera=north --set shot=2024-05-01
  lake put -r ./frames --table frames --jobs 16
  curl -s https://example.com/w.bin | lake put - --name w.bin --table weights --json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			set, err := o.check(args)
			if err != nil {
				return err
			}
			c, err := o.connect(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer c.Close()
			if !o.noProgress {
				o.progressOut, o.progressTTY = cmd.ErrOrStderr(), isTerminal(os.Stderr)
			}
			if o.many(args) {
				return runPutFiles(cmd.Context(), c, o, set, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			return runPut(cmd.Context(), c, o, set, args, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	o.addFlags(cmd)
	return cmd
}

// check validates the command line before anything is uploaded and
// returns the --set values.
func (o *putOptions) check(paths []string) (map[string]string, error) {
	set := make(map[string]string, len(o.set))
	for _, kv := range o.set {
		col, val, ok := strings.Cut(kv, "=")
		col = strings.TrimSpace(col)
		if !ok || col == "" {
			return nil, fmt.Errorf("%w: --set %q: want COL=VALUE", errUsage, kv)
		}
		if _, dup := set[col]; dup {
			return nil, fmt.Errorf("%w: --set %s given twice", errUsage, col)
		}
		set[col] = val
	}
	switch {
	case o.jobs < 1:
		return nil, fmt.Errorf("%w: --jobs %d: want at least 1", errUsage, o.jobs)
	case o.batchRows < 1:
		return nil, fmt.Errorf("%w: --batch-rows %d: want at least 1", errUsage, o.batchRows)
	case o.batchWait <= 0:
		return nil, fmt.Errorf("%w: --batch-wait %s: want a positive duration", errUsage, o.batchWait)
	}
	stdin, dirs := 0, 0
	for _, p := range paths {
		if p == "-" {
			stdin++
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errUsage, err)
		}
		switch {
		case fi.IsDir() && !o.recursive:
			return nil, fmt.Errorf("%w: %s is a directory: add -r to put the files under it", errUsage, p)
		case fi.IsDir():
			dirs++
		case !fi.Mode().IsRegular():
			return nil, fmt.Errorf("%w: %s is not a regular file", errUsage, p)
		}
	}
	switch {
	case stdin > 1:
		return nil, fmt.Errorf("%w: - (standard input) can be given once", errUsage)
	case stdin == 1 && o.name == "":
		return nil, fmt.Errorf("%w: - (standard input) needs --name", errUsage)
	case stdin == 1 && o.many(paths):
		return nil, fmt.Errorf("%w: - (standard input) is put alone, without other paths or -r", errUsage)
	case o.name != "" && len(paths) > 1:
		return nil, fmt.Errorf("%w: --name names one file; %d given", errUsage, len(paths))
	case o.name != "" && dirs > 0:
		return nil, fmt.Errorf("%w: --name names one file, not the files of a directory", errUsage)
	}
	return set, nil
}

// many reports whether the command puts many files (batched, through a
// run checkpoint) rather than one.
func (o *putOptions) many(paths []string) bool {
	return len(paths) > 1 || o.recursive
}

// putLine is the --json output for one file.
type putLine struct {
	Path        string    `json:"path"`
	Table       string    `json:"table"`
	Key         string    `json:"key"`
	Size        int64     `json:"size"`
	SHA256      string    `json:"sha256"`
	ContentType string    `json:"content_type,omitempty"`
	ETag        string    `json:"etag,omitempty"`
	UploadedAt  time.Time `json:"uploaded_at"`
	Version     int64     `json:"version"`
	Duplicate   bool      `json:"duplicate"`
	// Deduplicated: the stage held the content already; the row names
	// that object and nothing was uploaded.
	Deduplicated bool  `json:"deduplicated"`
	BytesSent    int64 `json:"bytes_sent"`
}

// putFailedLine is the --json output for a file that failed, or that an
// earlier run of the same command committed (skipped).
type putFailedLine struct {
	Path    string `json:"path"`
	Table   string `json:"table"`
	Error   string `json:"error,omitempty"`
	Skipped bool   `json:"skipped,omitempty"`
}

// runPut puts the files one after another and stops at the first error;
// the files before it stay committed and are printed.
func runPut(ctx context.Context, c *client.Client, o *putOptions, set map[string]string, paths []string, stdin io.Reader, w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	enc := json.NewEncoder(w)
	show := func(p string, res *client.PutResult) error {
		v := res.File
		if o.json {
			return enc.Encode(putLine{
				Path: p, Table: res.Table, Key: v.Key, Size: v.Size, SHA256: v.SHA256, ContentType: v.ContentType,
				ETag: v.ETag, UploadedAt: v.UploadedAt.UTC(), Version: res.Version, Duplicate: res.Duplicate,
				Deduplicated: res.Deduplicated, BytesSent: res.BytesSent,
			})
		}
		_, err := fmt.Fprintf(tw, "%s\t%d\t%s\t%d\n", v.Key, v.Size, v.SHA256, res.Version)
		return err
	}
	put := func() error {
		for _, p := range paths {
			po := client.PutOptions{Name: o.name, Set: set, ContentType: o.contentType, NoDedup: o.noDedup}
			var bar *progress
			if o.progressOut != nil {
				name := o.name
				if name == "" {
					name = filepath.Base(p)
				}
				bar = newProgress(o.progressOut, o.progressTTY, name)
				po.Progress = func(pr objects.Progress) { bar.update(pr.Done, pr.Total, pr.ResumedParts) }
			}
			var res *client.PutResult
			var err error
			if p == "-" {
				res, err = c.PutReader(ctx, o.table, o.name, stdin, po)
			} else {
				res, err = c.PutFile(ctx, o.table, p, po)
			}
			if bar != nil {
				bar.finish()
			}
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if err := show(p, res); err != nil {
				return err
			}
		}
		return nil
	}
	if o.json {
		return put()
	}
	fmt.Fprintln(tw, "KEY\tSIZE\tSHA256\tVERSION")
	err := put()
	// Flushed whatever happened, so the files that did commit are listed.
	if ferr := tw.Flush(); err == nil {
		err = ferr
	}
	return err
}

// runPutFiles puts many files as one run (client.PutFiles): each row is
// printed as its batch commits, each failure reported on stderr (and in
// --json output) as it happens, and a summary ends on stderr.
func runPutFiles(ctx context.Context, c *client.Client, o *putOptions, set map[string]string, paths []string, w, errw io.Writer) error {
	// Buffered: tabwriter writes every cell on its own, a write(2) each on
	// a real stdout, thousands per run. JSON lines go out at least every
	// flushEvery, so a reader sees the run advance.
	const flushEvery = 200 * time.Millisecond
	out := bufio.NewWriterSize(w, 64<<10)
	lastFlush := time.Now()
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	enc := json.NewEncoder(out)
	var bar *progress
	var outErr error
	po := client.PutFilesOptions{
		Set: set, ContentType: o.contentType, Recursive: o.recursive, NoDedup: o.noDedup,
		Jobs: o.jobs, BatchRows: o.batchRows, BatchWait: o.batchWait,
	}
	if o.progressOut != nil {
		bar = newProgress(o.progressOut, o.progressTTY, "put")
		po.Progress = bar.updateFiles
	}
	po.OnFile = func(r client.FileResult) {
		var err error
		switch {
		case r.Err != nil:
			if bar != nil {
				bar.finish() // the bar's line is not to be mixed with the report
			}
			fmt.Fprintf(errw, "lake: %s: %v\n", r.Path, r.Err)
			if o.json {
				err = enc.Encode(putFailedLine{Path: r.Path, Table: o.table, Error: r.Err.Error()})
			}
		case r.Skipped:
			if o.json {
				err = enc.Encode(putFailedLine{Path: r.Path, Table: o.table, Skipped: true})
			}
		case o.json:
			v := r.File
			err = enc.Encode(putLine{
				Path: r.Path, Table: o.table, Key: v.Key, Size: v.Size, SHA256: v.SHA256, ContentType: v.ContentType,
				ETag: v.ETag, UploadedAt: v.UploadedAt.UTC(), Version: r.Version, Duplicate: r.Duplicate,
				Deduplicated: r.Deduplicated, BytesSent: r.BytesSent,
			})
		default:
			_, err = fmt.Fprintf(tw, "%s\t%d\t%s\t%d\n", r.File.Key, r.File.Size, r.File.SHA256, r.Version)
		}
		if o.json && err == nil && time.Since(lastFlush) >= flushEvery {
			err, lastFlush = out.Flush(), time.Now()
		}
		if err != nil && outErr == nil {
			outErr = err
		}
	}
	if !o.json {
		fmt.Fprintln(tw, "KEY\tSIZE\tSHA256\tVERSION")
	}
	start := time.Now()
	res, err := c.PutFiles(ctx, o.table, paths, po)
	if bar != nil {
		bar.finish()
	}
	if ferr := errors.Join(tw.Flush(), out.Flush()); outErr == nil {
		outErr = ferr
	}
	if res != nil {
		elapsed := time.Since(start)
		fmt.Fprintf(errw, "put %s into %s in %s, %s (%.0f files/s)", plural(res.Committed, "file"), o.table, plural(res.Batches, "version"),
			elapsed.Round(time.Millisecond), float64(res.Committed)/max(elapsed.Seconds(), 1e-9))
		if res.Skipped > 0 {
			fmt.Fprintf(errw, "; %d skipped, committed by an earlier run of this command", res.Skipped)
		}
		if res.Failed > 0 {
			fmt.Fprintf(errw, "; %d failed", res.Failed)
		}
		fmt.Fprintln(errw)
	}
	if err != nil {
		return err
	}
	return outErr
}

// plural is n and the noun, with an s unless n is 1.
func plural[N int | int64](n N, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
