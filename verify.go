package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/internal/humanize"
	"github.com/lakedata/lake/wire/lakepb"
)

// errMismatch: some object does not match its rows (exit status 1).
var errMismatch = errors.New("do not match their rows")

// verifyOptions are the flags of `lake verify`.
type verifyOptions struct {
	endpointOptions
	table      string
	all        bool
	json       bool
	noProgress bool

	// Where progress goes (stderr) and whether it is a terminal; set by
	// the command, nil in tests that do not want it.
	progressOut io.Writer
	progressTTY bool
}

func (o *verifyOptions) addFlags(cmd *cobra.Command) {
	o.endpointOptions.addFlags(cmd)
	f := cmd.Flags()
	f.StringVarP(&o.table, "table", "t", "", "table whose objects to check (required)")
	f.BoolVar(&o.all, "all", false, "check the rows of every retained version, not only the current one")
	f.BoolVar(&o.json, "json", false, "print the report as one JSON object")
	f.BoolVar(&o.noProgress, "no-progress", false, "do not report progress on standard error")
	_ = cmd.MarkFlagRequired("table")
}

func newVerifyCommand(g *globalOptions) *cobra.Command {
	o := &verifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify --table T [--all]",
		Short: "Check a table's objects against the size and SHA-256 of their rows",
		Long: `Read every object the table's rows point to and check that it has the size
and SHA-256 its row claims. A FILE value's sha256 is what the client said
when it committed the row; this is where it is checked. The metadata
service reads the objects, each once however many rows name it, and always
reads them again: nothing is taken from earlier runs.

Each mismatch is listed with its row (the row's name, or its number when
the table has no name column), its key and what is wrong: the size
differs, the sha256 differs, the object is missing, something other than
a regular file is at its key, or the stage fails to read it. The exit
status is 1 if anything does
not match; otherwise one line says how many objects and bytes were checked
and how long it took. A long run reports its progress on standard error.

--all checks every retained version's rows, not only the current
version's: also rows deleted since, as long as a version that has them is
not expired.` + endpointHelp,
		Example: `  lake verify --table videos
  lake verify --table videos --all --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.connect(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer c.Close()
			if !o.noProgress {
				o.progressOut, o.progressTTY = cmd.ErrOrStderr(), isTerminal(os.Stderr)
			}
			return runVerify(cmd.Context(), c, o, cmd.OutOrStdout())
		},
	}
	o.addFlags(cmd)
	return cmd
}

func runVerify(ctx context.Context, c *client.Client, o *verifyOptions, stdout io.Writer) error {
	vo := client.VerifyOptions{AllVersions: o.all}
	if o.progressOut != nil {
		bar := newProgress(o.progressOut, o.progressTTY, "verify "+o.table)
		defer bar.finish()
		vo.Progress = func(p *lakepb.VerifyProgress) {
			// Plain lines only for a run that lasts: a short one stays quiet.
			if !o.progressTTY && time.Since(bar.start) < bar.every {
				return
			}
			bar.update(p.GetBytesDone(), p.GetBytes(), 0)
		}
	}
	rep, err := c.Verify(ctx, o.table, vo)
	if err != nil {
		return err
	}
	if o.json {
		if err := writeVerifyJSON(stdout, rep); err != nil {
			return err
		}
	} else if rep.OK() {
		fmt.Fprintf(stdout, "%s version %d: %d objects, %s, all match their rows (%s)\n",
			rep.Table, rep.Version, rep.Objects, humanize.Bytes(rep.BytesRead), rep.Elapsed.Round(time.Millisecond))
	} else {
		writeMismatches(stdout, rep.Mismatches)
	}
	if !rep.OK() {
		return fmt.Errorf("verify %s (version %d): %d of %d objects %w", rep.Table, rep.Version, distinctKeys(rep.Mismatches), rep.Objects, errMismatch)
	}
	return nil
}

func distinctKeys(ms []*lakepb.VerifyMismatch) int {
	seen := map[string]bool{}
	for _, m := range ms {
		seen[m.GetKey()] = true
	}
	return len(seen)
}

// rowLabel is how a mismatch names its row: by name, else by number.
func rowLabel(m *lakepb.VerifyMismatch) string {
	if m.Name != nil {
		return m.GetName()
	}
	return "row " + strconv.FormatInt(m.GetRow(), 10)
}

// problemText says what is wrong, for people.
func problemText(m *lakepb.VerifyMismatch) string {
	switch m.GetProblem() {
	case lakepb.VerifyProblem_VERIFY_PROBLEM_SIZE_DIFFERS:
		return fmt.Sprintf("size differs: the row says %d bytes, the object has %d", m.GetClaimedSize(), m.GetActualSize())
	case lakepb.VerifyProblem_VERIFY_PROBLEM_SHA256_DIFFERS:
		return fmt.Sprintf("sha256 differs: the row says %s, the object has %s", m.GetClaimedSha256(), m.GetActualSha256())
	case lakepb.VerifyProblem_VERIFY_PROBLEM_OBJECT_MISSING:
		return "object missing"
	case lakepb.VerifyProblem_VERIFY_PROBLEM_NOT_REGULAR_FILE:
		return "not a regular file"
	case lakepb.VerifyProblem_VERIFY_PROBLEM_UNREADABLE:
		return "unreadable: " + m.GetDetail()
	}
	return problemName(m.GetProblem())
}

// problemName is the problem's stable name in JSON: "size_differs", …
func problemName(p lakepb.VerifyProblem) string {
	return strings.ToLower(strings.TrimPrefix(p.String(), "VERIFY_PROBLEM_"))
}

func writeMismatches(w io.Writer, ms []*lakepb.VerifyMismatch) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROW\tKEY\tPROBLEM")
	for _, m := range ms {
		label := rowLabel(m)
		if m.GetColumn() != "file" {
			label += " (" + m.GetColumn() + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", label, m.GetKey(), problemText(m))
	}
	tw.Flush()
}

type verifyMismatchJSON struct {
	Key            string  `json:"key"`
	Problem        string  `json:"problem"`
	Column         string  `json:"column"`
	Row            int64   `json:"row"`
	Name           *string `json:"name,omitempty"`
	AddedInVersion int64   `json:"added_in_version"`
	ClaimedSize    int64   `json:"claimed_size"`
	ClaimedSHA256  string  `json:"claimed_sha256"`
	ActualSize     *int64  `json:"actual_size,omitempty"`
	ActualSHA256   string  `json:"actual_sha256,omitempty"`
	Detail         string  `json:"detail,omitempty"`
}

type verifyReportJSON struct {
	Table       string               `json:"table"`
	Version     int64                `json:"version"`
	AllVersions bool                 `json:"all_versions"`
	Objects     int64                `json:"objects"`
	BytesRead   int64                `json:"bytes_read"`
	Seconds     float64              `json:"seconds"`
	OK          bool                 `json:"ok"`
	Mismatches  []verifyMismatchJSON `json:"mismatches"`
}

func writeVerifyJSON(w io.Writer, rep *client.VerifyReport) error {
	out := verifyReportJSON{
		Table: rep.Table, Version: rep.Version, AllVersions: rep.AllVersions, Objects: rep.Objects,
		BytesRead: rep.BytesRead, Seconds: math.Round(rep.Elapsed.Seconds()*1000) / 1000, OK: rep.OK(),
		Mismatches: []verifyMismatchJSON{},
	}
	for _, m := range rep.Mismatches {
		j := verifyMismatchJSON{
			Key: m.GetKey(), Problem: problemName(m.GetProblem()), Column: m.GetColumn(), Row: m.GetRow(),
			Name: m.Name, AddedInVersion: m.GetAddedInVersion(), ClaimedSize: m.GetClaimedSize(),
			ClaimedSHA256: m.GetClaimedSha256(), ActualSHA256: m.GetActualSha256(), Detail: m.GetDetail(),
		}
		switch m.GetProblem() {
		case lakepb.VerifyProblem_VERIFY_PROBLEM_SIZE_DIFFERS, lakepb.VerifyProblem_VERIFY_PROBLEM_SHA256_DIFFERS:
			size := m.GetActualSize()
			j.ActualSize = &size
		}
		out.Mismatches = append(out.Mismatches, j)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// byteRate is a --verify-rate value: bytes per second, written as a
// number with an optional unit (B, KB, MB, GB, TB in powers of 1000; KiB,
// MiB, GiB, TiB in powers of 1024) and an optional "/s".
type byteRate int64

var byteUnits = []struct {
	suffix string
	scale  int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
}

// parseByteRate parses a byteRate.
func parseByteRate(s string) (byteRate, error) {
	num := strings.TrimSuffix(strings.TrimSpace(s), "/s")
	scale := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(num, u.suffix) {
			num, scale = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.scale
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" || strings.ContainsAny(num, "eExXpP_") {
		return 0, fmt.Errorf("%q is not a rate like 64MiB or 0", s)
	}
	if v < 0 || math.IsNaN(v) || v*float64(scale) > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return byteRate(math.Round(v * float64(scale))), nil
}

func (r *byteRate) Set(s string) error {
	v, err := parseByteRate(s)
	if err != nil {
		return err
	}
	*r = v
	return nil
}

func (r *byteRate) Type() string { return "rate" }

// String writes the rate back in the largest binary unit that divides it.
func (r *byteRate) String() string {
	v := int64(*r)
	for i := 3; i >= 0; i-- {
		if u := byteUnits[i]; v != 0 && v%u.scale == 0 {
			return strconv.FormatInt(v/u.scale, 10) + u.suffix
		}
	}
	return strconv.FormatInt(v, 10)
}
