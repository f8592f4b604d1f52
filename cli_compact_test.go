package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/lakedata/lake/wire"
)

// `lake table compact` merges the files of a table's puts into one new
// version that adds no rows; a second run finds nothing to merge.
func TestCLITableCompact(t *testing.T) {
	f := newCLIFixture(t)
	f.mustRun("table", "create", "videos")
	for _, name := range []string{"a.txt", "b.txt", "c.txt"} {
		f.mustRun("put", writeTemp(t, name, name), "--table", "videos")
	}
	if out := f.mustRun("table", "compact", "videos"); out != "videos: version 4, 3 data files → 1\n" {
		t.Errorf("compact: %q", out)
	}
	if out := f.mustRun("table", "compact", "videos"); out != "videos: nothing to compact at version 4 (data files: 1)\n" {
		t.Errorf("compact again: %q", out)
	}
	hist := lines(f.mustRun("table", "history", "videos", "--limit", "1"))
	if w := strings.Fields(hist[1]); len(hist) != 2 || w[0] != "4" || w[1] != "compact" || w[3] != "+0" || w[4] != "+1/-3" {
		t.Errorf("history of the compaction (version 4, compact, 0 rows, 1 file for 3):\n%s", strings.Join(hist, "\n"))
	}
	if _, err := f.run("", "table", "compact", "nope"); !errors.Is(err, wire.ErrTableNotFound) {
		t.Errorf("compact an unknown table: %v", err)
	}
}

// The compaction flags of `lake serve` reach the server's Config, sizes
// with their units.
func TestServeCompactFlags(t *testing.T) {
	o := &serveOptions{}
	cmd := &cobra.Command{Use: "serve"}
	o.addFlags(cmd)
	if cfg := o.config(nil); cfg.CompactMinFiles != 64 || cfg.CompactTargetSize != 128<<20 {
		t.Fatalf("defaults: %d files, %d bytes; want 64 and 128 MiB", cfg.CompactMinFiles, cfg.CompactTargetSize)
	}
	if err := cmd.ParseFlags([]string{"--compact-min-files", "0", "--compact-target-size", "8MiB"}); err != nil {
		t.Fatal(err)
	}
	if cfg := o.config(nil); cfg.CompactMinFiles != 0 || cfg.CompactTargetSize != 8<<20 {
		t.Fatalf("flags: %d files, %d bytes; want 0 and 8 MiB", cfg.CompactMinFiles, cfg.CompactTargetSize)
	}
}
