package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakedata/lake/client"
)

// BenchmarkTimeTravel compares, through Flight SQL between this process
// and a `lake serve`, one aggregate over a table of 200 versions (one row
// each) read as it is now, read AT the head's version (the same rows
// through a version view), at an old version, and at a time. It runs
// twice: with background compaction (the default), where an old version
// predates compactions and so has more, smaller files than the head (36
// against 11 here), and without, where every version's files are a
// prefix of the head's and the ratio is the cost of time travel itself.
//
//	go test -tags duckdb_arrow,failpoints -run '^$' -bench BenchmarkTimeTravel -benchtime 300x ./e2e
func BenchmarkTimeTravel(b *testing.B) {
	for _, compaction := range []struct{ name, minFiles string }{{"compaction", "64"}, {"no-compaction", "0"}} {
		b.Run(compaction.name, func(b *testing.B) { benchmarkTimeTravel(b, compaction.minFiles) })
	}
}

func benchmarkTimeTravel(b *testing.B, compactMinFiles string) {
	dir := b.TempDir()
	p := startLake(b, "serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "lake"),
		"--compact-min-files", compactMinFiles)
	ctx := withTimeout(b, 10*time.Minute)
	c, err := client.Connect(ctx, "grpc://"+p.Addr())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTable(ctx, "clips", nil, false); err != nil {
		b.Fatal(err)
	}
	const versions = 200
	for i := range versions {
		if _, err := c.PutReader(ctx, "clips", fmt.Sprintf("clip-%04d.mp4", i), strings.NewReader("x"), client.PutOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	h, err := c.History(ctx, "clips", 1)
	if err != nil {
		b.Fatal(err)
	}
	head := h.Versions[0]
	const agg = "SELECT count(*), max(name), sum((file).size) FROM clips"
	for _, bc := range []struct{ name, sql string }{
		{"current", agg},
		{"at-head-version", agg + fmt.Sprintf(" AT (VERSION => %d)", head.Version)},
		{"at-old-version", agg + fmt.Sprintf(" AT (VERSION => %d)", head.Version/2)},
		{"at-timestamp", agg + " AT (TIMESTAMP => " + sqlTimestamp(head.CommittedAtUnixMicros) + ")"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if n, err := queryCount(ctx, c, bc.sql); err != nil || n != 1 {
					b.Fatalf("%s: %d rows, %v", bc.sql, n, err)
				}
			}
		})
	}
}
