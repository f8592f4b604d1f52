package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/roles/meta"
)

// TestCompactionBoundsFilesOverManyAppends: `lake serve` with the default
// compaction flags, on a local stage and on versitygw, takes 10,000
// one-row appends (2,000 on versitygw unless LAKE_BENCH_BIG=1) from 16
// clients; the meta role group-commits them. Once the background
// compactor has caught up the current version has at most
// --compact-min-files (64) data files, the compactions rewrote each row at
// most ⌊log_8 n⌋ times (their versions in the history say how many rows
// they wrote), and after one `lake table compact` the table still holds
// every row once in at most that many files. The test asserts counts of
// files and rows, never a time; the wait for the compactor is only
// bounded.
func TestCompactionBoundsFilesOverManyAppends(t *testing.T) {
	for _, st := range compactStages {
		appends := 10_000
		if st.name == "s3" && os.Getenv("LAKE_BENCH_BIG") != "1" {
			appends = 2_000 // 10,000 take ~50 s on versitygw here
		}
		t.Run(st.name, func(t *testing.T) { compactionBoundsFiles(t, st.make(t), appends) })
	}
}

func compactionBoundsFiles(t *testing.T, stage compactStage, appends int) {
	const clients, bound, fanIn = 16, meta.DefaultCompactMinFiles, meta.DefaultCompactMinFiles / 8
	p := startLake(t, append([]string{"serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0",
		"--data-dir", filepath.Join(t.TempDir(), "data")}, stage.flags...)...)
	endpoint := "grpc://" + p.Addr()
	ctx := withTimeout(t, 5*time.Minute)
	seed := seedTable(t, ctx, endpoint) // version 1, the first row
	appendRows(t, ctx, endpoint, "clips", seed, clients, appends/clients)
	if t.Failed() {
		return
	}
	rows := int64(appends + 1)
	admin, err := client.Connect(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()

	// The compactor runs after the last commit; give it a minute.
	var files int64
	for range 600 {
		info, err := admin.Describe(ctx, "clips")
		if err != nil {
			t.Fatal(err)
		}
		if files = info.GetDataFiles(); files <= bound {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if files > bound {
		t.Fatalf("%d data files a minute after %d appends, bound %d", files, appends, bound)
	}
	h, err := admin.History(ctx, "clips", 0)
	if err != nil {
		t.Fatal(err)
	}
	var compactions, written int64
	for _, v := range h.GetVersions() {
		if v.GetVersion() > 0 && v.GetRows() == 0 {
			compactions++
			for _, df := range v.GetFiles() {
				written += df.GetRows()
			}
		}
	}
	if compactions == 0 {
		t.Fatal("no background compaction ran: the bound on rewrites below would hold for nothing")
	}
	if perRow := floorLog(rows, fanIn); written > rows*perRow {
		t.Errorf("the compactions wrote %d rows for %d, more than %d times each", written, rows, perRow)
	}
	t.Logf("%d appends in %d versions; %d background compactions wrote %d rows (%.1f a row); %d data files",
		appends, len(h.GetVersions())-1-int(compactions), compactions, written, float64(written)/float64(rows), files)

	out := runLake(t, endpoint, "table", "compact", "clips")
	info, err := admin.Describe(ctx, "clips")
	if err != nil {
		t.Fatal(err)
	}
	if info.GetDataFiles() > bound || info.GetRows() != rows {
		t.Errorf("after lake table compact (%q): %d rows in %d data files, want %d rows in at most %d", out, info.GetRows(), info.GetDataFiles(), rows, bound)
	}
	if count, distinct := countRows(t, ctx, admin); count != rows || distinct != rows {
		t.Errorf("SQL count %d (%d distinct), want %d", count, distinct, rows)
	}
}

// floorLog is ⌊log_base n⌋.
func floorLog(n, base int64) int64 {
	var l int64
	for ; n >= base; n /= base {
		l++
	}
	return l
}
