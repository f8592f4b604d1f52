package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/internal/wiretest"
)

// BenchmarkCountBeforeAfterCompaction: `lake serve` (meta and query in
// one process) with background compaction off; a table of 2,000 one-row
// commits (one data file each), then SELECT count(*) through Flight SQL
// before and after `lake table compact`. p50-ms is the median of one
// query. LAKE_BENCH_COMMITS sets the number of commits (say 10000).
func BenchmarkCountBeforeAfterCompaction(b *testing.B) {
	commits := 2000
	if s := os.Getenv("LAKE_BENCH_COMMITS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 2 {
			b.Fatalf("LAKE_BENCH_COMMITS=%q", s)
		}
		commits = n
	}
	dir := b.TempDir()
	p := startLake(b, "serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0",
		"--data-dir", filepath.Join(dir, "data"), "--stage", "file://"+filepath.Join(dir, "stage"), "--compact-min-files", "0")
	endpoint := "grpc://" + p.Addr()
	ctx := withTimeout(b, 30*time.Minute)
	seed := seedTable(b, ctx, endpoint)
	c, err := client.Connect(ctx, endpoint)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for i := 1; i < commits; i++ { // the seed put was the first
		rec := wiretest.FileRow(fmt.Sprintf("r%05d", i), seed)
		_, err := c.Append(ctx, "clips", rec, client.AppendOptions{})
		rec.Release()
		if err != nil {
			b.Fatal(err)
		}
	}
	count := func(b *testing.B) {
		var lat []time.Duration
		for b.Loop() {
			t0 := time.Now()
			n, _ := countRows(b, ctx, c)
			lat = append(lat, time.Since(t0))
			if n != int64(commits) {
				b.Fatalf("count(*) = %d, want %d", n, commits)
			}
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(0, "ns/op")
	}
	files := func() int64 {
		info, err := c.Describe(ctx, "clips")
		if err != nil {
			b.Fatal(err)
		}
		return info.GetDataFiles()
	}
	b.Run(fmt.Sprintf("files=%d", files()), count)
	res, err := c.Compact(ctx, "clips")
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("compacted %d files into %d", res.GetFilesBefore(), res.GetFilesAfter())
	b.Run(fmt.Sprintf("compacted/files=%d", files()), count)
}
