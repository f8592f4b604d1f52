package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/internal/wiretest"
)

// BenchmarkCountByCommits: the measurement of issue 11 after the fix. A
// split meta and query pair (separate processes, local stage, every flag
// at its default, so background compaction and checkpoints run), two
// tables built by sequential single-row commits: one of 100 and one of
// 10,000. Then SELECT count(*) of each through Flight SQL, alternating,
// so both are measured under the same load; p50-ms per table and the
// ratio big÷small.
func BenchmarkCountByCommits(b *testing.B) {
	dir := b.TempDir()
	m := startLake(b, "serve", "--role=meta", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "meta"),
		"--stage", "file://"+filepath.Join(dir, "stage"))
	q := startLake(b, "serve", "--role=query", "--listen", "127.0.0.1:0", "--meta", m.Addr(), "--data-dir", filepath.Join(dir, "query"))
	endpoint := "grpc://" + q.Addr()
	ctx := withTimeout(b, 30*time.Minute)
	c, err := client.Connect(ctx, endpoint)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	sizes := map[string]int{"small": 100, "big": 10000}
	for table, commits := range sizes {
		if _, err := c.CreateTable(ctx, table, nil, false); err != nil {
			b.Fatal(err)
		}
		put, err := c.PutReader(ctx, table, "seed", strings.NewReader("seed object"), client.PutOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for i := 1; i < commits; i++ {
			rec := wiretest.FileRow(fmt.Sprintf("r%05d", i), put.File)
			_, err := c.Append(ctx, table, rec, client.AppendOptions{})
			rec.Release()
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	time.Sleep(2 * time.Second) // the background compaction of the last commits settles
	for table := range sizes {
		info, err := c.Describe(ctx, table)
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("%s: version %d, %d rows in %d data files", table, info.GetVersion(), info.GetRows(), info.GetDataFiles())
	}
	lat := map[string][]time.Duration{}
	for b.Loop() {
		for _, table := range []string{"small", "big"} {
			t0 := time.Now()
			if n := countTable(b, ctx, c, table); n != int64(sizes[table]) {
				b.Fatalf("count(*) of %s = %d, want %d", table, n, sizes[table])
			}
			lat[table] = append(lat[table], time.Since(t0))
		}
	}
	p50 := func(table string) float64 {
		l := lat[table]
		slices.Sort(l)
		return float64(l[len(l)/2].Microseconds()) / 1000
	}
	b.ReportMetric(p50("small"), "p50-ms-100")
	b.ReportMetric(p50("big"), "p50-ms-10000")
	b.ReportMetric(p50("big")/p50("small"), "ratio")
	b.ReportMetric(0, "ns/op")
}
