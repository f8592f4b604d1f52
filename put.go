package main

import (
	"context"
	"encoding/json"
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
	// StringArray, not StringSlice: a value may contain commas.
	f.StringArrayVar(&o.set, "set", nil, "fill column COL with VALUE, as COL=VALUE (repeatable)")
	f.StringVar(&o.name, "name", "", "name of the file (default: its base name; required for -)")
	f.StringVar(&o.contentType, "content-type", "", "MIME type (default: from the name's extension)")
	f.BoolVar(&o.json, "json", false, "print one JSON object per file instead of a table")
	_ = cmd.MarkFlagRequired("table")
}

func newPutCommand(g *globalOptions) *cobra.Command {
	o := &putOptions{}
	cmd := &cobra.Command{
		Use:   "put PATH... --table T",
		Short: "Upload files to the stage and add a row for each",
		Long: `Upload each file straight to the managed stage, then add one row for it to
the table, each as its own table version.

The row's first FILE column gets the file's location, size and SHA-256; a
"name" column gets the file's base name (or --name), a "created_at"
timestamp column the current time, and --set COL=VALUE fills any other
column. Values are parsed as the column's type: integers, floats, bool
(true/false), timestamps as RFC 3339 or unix microseconds, dates as
YYYY-MM-DD. A bad --set fails before anything is uploaded.

PATH "-" reads standard input and needs --name. Output: per file, its key,
size, SHA-256 and the table version holding its row; with --json one JSON
object per line.` + endpointHelp,
		Example: `  lake put clip.mp4 --table videos
  lake put *.mp4 --table videos --set camera=north --set shot=2024-05-01
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
	stdin := 0
	for _, p := range paths {
		if p == "-" {
			stdin++
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%w: %s is not a regular file", errUsage, p)
		}
	}
	switch {
	case stdin > 1:
		return nil, fmt.Errorf("%w: - (standard input) can be given once", errUsage)
	case stdin == 1 && o.name == "":
		return nil, fmt.Errorf("%w: - (standard input) needs --name", errUsage)
	case o.name != "" && len(paths) > 1:
		return nil, fmt.Errorf("%w: --name names one file; %d given", errUsage, len(paths))
	}
	return set, nil
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
			})
		}
		_, err := fmt.Fprintf(tw, "%s\t%d\t%s\t%d\n", v.Key, v.Size, v.SHA256, res.Version)
		return err
	}
	put := func() error {
		for _, p := range paths {
			po := client.PutOptions{Name: o.name, Set: set, ContentType: o.contentType}
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
