package meta

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lakedata/lake/internal/etcdtest"
	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/objects/layout"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// newTunedFixture is newFixture with changes to the default config.
func newTunedFixture(t *testing.T, tune func(*Config)) *fixture {
	t.Helper()
	base := newFixture(t) // for its stage only
	base.stop()
	f := &fixture{t: t, dataDir: filepath.Join(t.TempDir(), "data"), stage: base.stage, tune: tune}
	f.start()
	t.Cleanup(f.stop)
	return f
}

func (f *fixture) compact(table string) (*lakepb.CompactResult, error) {
	var res lakepb.CompactResult
	err := flightrpc.Action(context.Background(), f.fc, wire.ActionCompact, &lakepb.CompactRequest{Table: table}, &res)
	return &res, err
}

// appendN appends n one-row versions named from nameN(first).
func (f *fixture) appendN(table string, first, n int) {
	f.t.Helper()
	for i := first; i < first+n; i++ {
		if _, err := f.appendOne(table, nameN(i), fmt.Sprintf("c-%d", i)); err != nil {
			f.t.Fatalf("append %d: %v", i, err)
		}
	}
}

// checkOnce fails unless names holds each of want exactly once.
func checkOnce(t *testing.T, names, want []string) {
	t.Helper()
	count := make(map[string]int, len(names))
	for _, n := range names {
		count[n]++
	}
	for _, w := range want {
		if count[w] != 1 {
			t.Errorf("row %s is there %d times, want once", w, count[w])
		}
		delete(count, w)
	}
	for n, c := range count {
		t.Errorf("row %s is there %d times, want none", n, c)
	}
}

func names(first, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = nameN(first + i)
	}
	return out
}

// After many one-row appends, lake.table.compact leaves one data file
// with every row once, as a version of its own that adds no rows; the
// versions before it keep their files.
func TestCompactMergesSmallFiles(t *testing.T) {
	const n = 2000
	f := newTunedFixture(t, func(c *Config) { c.CompactMinFiles = 0 })
	f.createTable("clips")
	f.appendN("clips", 0, n)
	if got := len(f.snapshot("clips", nil).Files); got != n {
		t.Fatalf("%d data files before compaction, want %d", got, n)
	}

	res, err := f.compact("clips")
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != n+1 || res.FilesBefore != n || res.FilesAfter != 1 || res.Table != "clips" {
		t.Fatalf("compact: %v, want version %d, %d files → 1", res, n+1, n)
	}
	snap := f.snapshot("clips", nil)
	if snap.Version != n+1 || len(snap.Files) != 1 || snap.Files[0].Rows != n {
		t.Fatalf("snapshot after compaction: version %d, files %v", snap.Version, snap.Files)
	}
	checkOnce(t, f.readNames(snap), names(0, n))
	info, err := f.describe("clips", nil)
	if err != nil || info.Rows != n || info.DataFiles != 1 {
		t.Fatalf("describe: %v %v, want %d rows in 1 file", info, err, n)
	}
	h, err := f.svc.History(context.Background(), "clips", 1)
	if err != nil || h.Versions[0].Version != n+1 || h.Versions[0].Rows != 0 || len(h.Versions[0].Files) != 1 {
		t.Fatalf("history of the compaction: %v %v, want version %d adding 0 rows in 1 file", h, err, n+1)
	}
	// Time travel: the version before has its small files still.
	old := f.snapshot("clips", ptr(int64(n)))
	if len(old.Files) != n {
		t.Fatalf("version %d has %d files after compaction, want %d", n, len(old.Files), n)
	}
	checkOnce(t, f.readNames(old), names(0, n))

	// Nothing left to merge: no new version.
	again, err := f.compact("clips")
	if err != nil || again.Version != n+1 || again.FilesBefore != 1 || again.FilesAfter != 1 {
		t.Fatalf("second compact: %v %v, want version %d unchanged", again, err, n+1)
	}
	// Appends after it go next to the large file.
	f.appendN("clips", n, 3)
	snap = f.snapshot("clips", nil)
	if len(snap.Files) != 4 {
		t.Fatalf("%d files after 3 more appends, want 4", len(snap.Files))
	}
	checkOnce(t, f.readNames(snap), names(0, n+3))
}

// The target size splits the merge: no merged file holds more than the
// target's worth of small files.
func TestCompactTargetSize(t *testing.T) {
	f := newTunedFixture(t, func(c *Config) { c.CompactMinFiles = 0 })
	f.createTable("clips")
	f.appendN("clips", 0, 40)
	size := f.snapshot("clips", nil).Files[0].Size
	f.stop()
	f.tune = func(c *Config) { c.CompactMinFiles, c.CompactTargetSize = 0, 10*size+size/2 }
	f.start()
	res, err := f.compact("clips")
	if err != nil {
		t.Fatal(err)
	}
	if res.FilesAfter != 4 {
		t.Fatalf("compact with a target of 10 files: %v, want 40 → 4 files", res)
	}
	checkOnce(t, f.readNames(f.snapshot("clips", nil)), names(0, 40))
}

// With the background trigger on, a table never carries more than
// CompactMinFiles small files once the leader has caught up, and the
// compactions, counted through the history, rewrote each row at most
// ⌊log_F n⌋ times (tiers, planCompaction), where merging every small file
// at each trigger would rewrite it about n/(2·CompactMinFiles) times.
func TestCompactInBackground(t *testing.T) {
	const n, minFiles = 2000, 16
	f := newTunedFixture(t, func(c *Config) { c.CompactMinFiles = minFiles })
	f.createTable("clips")
	f.appendN("clips", 0, n)
	waitFor(t, "the background compaction", func() bool {
		return len(f.snapshot("clips", nil).Files) <= minFiles
	})
	snap := f.snapshot("clips", nil)
	checkOnce(t, f.readNames(snap), names(0, n))
	h, err := f.svc.History(context.Background(), "clips", 0)
	if err != nil {
		t.Fatal(err)
	}
	compactions := 0
	var rowsWritten, bytesWritten, oneRow int64
	for _, v := range h.Versions {
		switch {
		case v.Version == 0:
		case v.Rows == 0:
			compactions++
			for _, df := range v.Files {
				rowsWritten += df.Rows
				bytesWritten += df.Size
			}
		default:
			oneRow = max(oneRow, v.Files[0].Size)
		}
	}
	if compactions < n/(minFiles+1)/2 {
		t.Fatalf("%d compactions over %d appends with a trigger of %d files", compactions, n, minFiles)
	}
	perRow := int64(compactTier(n, compactFanIn(minFiles)))
	if rowsWritten > n*perRow {
		t.Errorf("the compactions wrote %d rows for %d, more than %d times each", rowsWritten, n, perRow)
	}
	// In bytes: every row that often in a file the size of all of them,
	// and a footer (at most a one-row file) for every file written.
	res, err := f.compact("clips")
	if err != nil || res.FilesAfter != 1 {
		t.Fatalf("compact: %v %v", res, err)
	}
	all := f.snapshot("clips", nil).Files[0].Size
	if limit := perRow*all + int64(compactions)*perRow*oneRow; bytesWritten > limit {
		t.Errorf("the compactions wrote %d bytes, more than %d (all %d rows take %d bytes, one %d)", bytesWritten, limit, n, all, oneRow)
	}
	t.Logf("%d compactions wrote %d rows (%.1f a row), %d bytes (%.1f× the %d bytes of all rows in one file)",
		compactions, rowsWritten, float64(rowsWritten)/n, bytesWritten, float64(bytesWritten)/float64(all), all)
}

// Eight writers append while compaction runs again and again: every
// acknowledged row is there exactly once, the versions have no gap, and
// the rows of the log add up to the rows of the head.
func TestCompactRacesAppends(t *testing.T) {
	const writers, each = 8, 150
	f := newTunedFixture(t, func(c *Config) { c.CompactMinFiles = 0 })
	f.createTable("clips")
	ctx, stop := context.WithCancel(context.Background())
	var compactions int
	var cerr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			res, err := f.svc.Compact(ctx, "clips")
			if err != nil && ctx.Err() == nil {
				cerr = err
				return
			}
			if err == nil && res.FilesAfter < res.FilesBefore {
				compactions++
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w * each; i < (w+1)*each; i++ {
				if _, err := f.appendOne("clips", nameN(i), fmt.Sprintf("c-%d", i)); err != nil {
					errs <- fmt.Errorf("append %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	stop()
	<-done
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if cerr != nil {
		t.Fatalf("compaction: %v", cerr)
	}
	if compactions < 3 {
		t.Fatalf("only %d compactions ran beside the appends", compactions)
	}
	if _, err := f.compact("clips"); err != nil {
		t.Fatal(err)
	}
	snap := f.snapshot("clips", nil)
	checkOnce(t, f.readNames(snap), names(0, writers*each))
	h, err := f.svc.History(context.Background(), "clips", 0)
	if err != nil {
		t.Fatal(err)
	}
	var rows int64
	for i, v := range h.Versions {
		if want := snap.Version - int64(i); v.Version != want {
			t.Fatalf("history position %d is version %d, want %d", i, v.Version, want)
		}
		rows += v.Rows
	}
	if rows != writers*each || h.Versions[len(h.Versions)-1].Version != 0 {
		t.Fatalf("the log adds %d rows over versions %d..0, want %d", rows, snap.Version, writers*each)
	}
	t.Logf("%d compactions beside %d appends, %d versions", compactions, writers*each, snap.Version)
}

// A follower, and an index rebuilt from the stage, see the same files as
// the leader after a compaction, and the same files at the version
// before it.
func TestCompactSeenByFollowerAndRebuild(t *testing.T) {
	etcd := etcdtest.Start(t)
	leader := newMember(t, etcd.Endpoint, nil)
	waitFor(t, "the first node to lead", func() bool { return leader.svc.canCommit() })
	follower := newMember(t, etcd.Endpoint, leader)
	waitFor(t, "the follower to learn the leader", func() bool { return follower.svc.cluster.Leader() == leader.listen })
	leader.createTable("clips")
	leader.appendN("clips", 0, 30)
	// Through the follower: it forwards the mutation to the leader.
	res, err := follower.compact("clips")
	if err != nil || res.FilesBefore != 30 || res.FilesAfter != 1 {
		t.Fatalf("compact through the follower: %v %v", res, err)
	}
	leader.appendN("clips", 30, 2)
	want := leader.snapshot("clips", nil)
	waitFor(t, "the follower to catch up", func() bool {
		info, err := follower.describe("clips", nil)
		return err == nil && info.Version == want.Version
	})
	keys := func(s *lakepb.Snapshot) []string {
		var out []string
		for _, f := range s.Files {
			out = append(out, fmt.Sprintf("%s/%d/%d", f.Key, f.Rows, f.Size))
		}
		return out
	}
	if got := follower.snapshot("clips", nil); !slices.Equal(keys(got), keys(want)) {
		t.Fatalf("follower files %v, leader files %v", keys(got), keys(want))
	}
	if len(want.Files) != 3 {
		t.Fatalf("leader has %d files, want 1 merged + 2 appended", len(want.Files))
	}
	before := leader.snapshot("clips", ptr(res.Version-1))

	// Rebuild the leader's index from the stage alone.
	leader.stop()
	if err := os.Remove(filepath.Join(leader.dataDir, "meta.db")); err != nil {
		t.Fatal(err)
	}
	leader.start()
	waitFor(t, "a leader", func() bool { return leader.svc.canCommit() || follower.svc.canCommit() })
	for _, node := range []*fixture{leader, follower} {
		if got := node.snapshot("clips", nil); !slices.Equal(keys(got), keys(want)) {
			t.Fatalf("files after the rebuild %v, before %v", keys(got), keys(want))
		}
		if got := node.snapshot("clips", ptr(res.Version-1)); !slices.Equal(keys(got), keys(before)) {
			t.Fatalf("files of the version before the compaction %v, want %v", keys(got), keys(before))
		}
	}
	checkOnce(t, leader.readNames(leader.snapshot("clips", nil)), names(0, 32))
}

// A log record of the previous format (no kind, no removes) still decodes
// and a stage made of them opens; a record that removes files under that
// format is refused rather than read wrongly.
func TestCompactRecordFormats(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef"
	old := []byte(`{"format":1,"table_id":"` + id + `","version":3,"committed_at":"2026-11-01T10:00:00Z",` +
		`"files":[{"key":"_lake/tables/` + id + `/data/a.parquet","rows":2,"size":900}],"commits":[{"id":"c","rows":2}],"rows":2}`)
	rec, err := decodeRecord(old, id, 3)
	if err != nil {
		t.Fatalf("a record of the previous format: %v", err)
	}
	if rec.Kind != "" || len(rec.Removes) != 0 || len(rec.Files) != 1 || rec.Rows != 2 {
		t.Fatalf("decoded %+v", rec)
	}
	files := rec.applyFiles([]*lakepb.DataFile{{Key: "x"}})
	if len(files) != 2 || files[0].Key != "x" || files[1].Rows != 2 {
		t.Fatalf("an old record applied: %v", files)
	}
	bad := []byte(`{"format":1,"table_id":"` + id + `","version":3,"committed_at":"2026-11-01T10:00:00Z","removes":["x"],"rows":0}`)
	if _, err := decodeRecord(bad, id, 3); err == nil {
		t.Fatal("a format-1 record that removes files decoded")
	}
	cp := &logRecord{Format: removesFormat, TableID: id, Version: 4, Kind: kindCompact,
		Files: []dataFile{{Key: "m", Rows: 3}}, Removes: []string{"a", "c"}}
	got := cp.applyFiles([]*lakepb.DataFile{{Key: "a"}, {Key: "b"}, {Key: "c"}, {Key: "d"}})
	var ks []string
	for _, f := range got {
		ks = append(ks, f.Key)
	}
	if !slices.Equal(ks, []string{"m", "b", "d"}) {
		t.Fatalf("compaction applied: %v, want [m b d]", ks)
	}
}

// A stage written without compaction records (appends of format 1 only)
// opens under this release, and compacting it appends a format-2 record
// while the appends before it stay format 1.
func TestCompactOpensAStageOfThePreviousFormat(t *testing.T) {
	f := newTunedFixture(t, func(c *Config) { c.CompactMinFiles = 0 })
	info := f.createTable("clips")
	f.appendN("clips", 0, 5)
	f.stop()
	for v := int64(1); v <= 5; v++ {
		raw, rec, err := f.svc0stage().readRecord(context.Background(), info.Id, v)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Format != recordFormat || strings.Contains(string(raw), `"removes"`) || strings.Contains(string(raw), `"kind"`) {
			t.Fatalf("append record %d: %s, want the previous format", v, raw)
		}
	}
	if err := os.Remove(filepath.Join(f.dataDir, "meta.db")); err != nil {
		t.Fatal(err)
	}
	f.start()
	res, err := f.compact("clips")
	if err != nil || res.FilesAfter != 1 {
		t.Fatalf("compact: %v %v", res, err)
	}
	_, rec, err := f.svc0stage().readRecord(context.Background(), info.Id, res.Version)
	if err != nil || rec.Format != removesFormat || rec.Kind != kindCompact || len(rec.Removes) != 5 || rec.Rows != 0 {
		t.Fatalf("compaction record %+v %v", rec, err)
	}
	if _, err := f.stage.Stat(context.Background(), layout.LogKey(info.Id, res.Version)); err != nil {
		t.Fatal(err)
	}
	checkOnce(t, f.readNames(f.snapshot("clips", nil)), names(0, 5))
}

func (f *fixture) svc0stage() stageLog { return stageLog{store: f.stage} }

// sizedFiles makes data files of the given rows, named f0, f1, … in table
// order, whose sizes grow with their rows the way small Parquet files do:
// a footer of fileOverhead bytes and rowBytes a row.
func sizedFiles(rows ...int64) []*lakepb.DataFile {
	out := make([]*lakepb.DataFile, len(rows))
	for i, r := range rows {
		out[i] = &lakepb.DataFile{Key: fmt.Sprintf("f%d", i), Rows: r, Size: parquetSize(r)}
	}
	return out
}

const fileOverhead, rowBytes = 1500, 100

func parquetSize(rows int64) int64 { return fileOverhead + rowBytes*rows }

func repeatRows(rows int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = rows
	}
	return out
}

func runKeys(runs [][]*lakepb.DataFile) [][]string {
	var out [][]string
	for _, r := range runs {
		var ks []string
		for _, f := range r {
			ks = append(ks, f.Key)
		}
		out = append(out, ks)
	}
	return out
}

func keyRange(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("f%d", i))
	}
	return out
}

// planCompaction merges by tiers of rows: a tier with F files or more, a
// tier that a run lifts to F, and nothing else; files at or past half the
// target neither count nor move; too many tiers fold the smallest.
func TestPlanCompactionTiers(t *testing.T) {
	const target = 128 << 20
	concat := func(parts ...[]int64) []int64 { return slices.Concat(parts...) }
	for _, tc := range []struct {
		name     string
		rows     []int64
		files    []*lakepb.DataFile // instead of rows
		maxSmall int
		want     [][]string
	}{
		{name: "at the bound nothing merges", rows: repeatRows(1, 64), maxSmall: 64},
		{name: "past the bound one-row files merge", rows: repeatRows(1, 65), maxSmall: 64,
			want: [][]string{keyRange(0, 65)}},
		// F = 8: seven files of 64 rows (tier 2) and six of 8 (tier 1)
		// stay; the 52 one-row files become one file of tier 1, which
		// then holds 7.
		{name: "larger tiers stay", rows: concat(repeatRows(64, 7), repeatRows(8, 6), repeatRows(1, 52)), maxSmall: 64,
			want: [][]string{keyRange(13, 65)}},
		// With seven files of 8 rows, the merged one-row files make the
		// eighth of tier 1, which lifts it to tier 2, the eighth there:
		// all merge, and in table order.
		{name: "a full tier lifts the next", rows: concat(repeatRows(64, 7), repeatRows(8, 7), repeatRows(1, 51)), maxSmall: 64,
			want: [][]string{keyRange(0, 65)}},
		{name: "tiers need not be adjacent in the table", rows: concat(repeatRows(1, 30), repeatRows(512, 3), repeatRows(1, 35)), maxSmall: 64,
			want: [][]string{slices.Concat(keyRange(0, 30), keyRange(33, 68))}},
		// 17 tiers of one file each for a bound of 16 (F = 2): no tier is
		// full, so the ten smallest fold into one and 8 files are left.
		{name: "too many tiers fold the smallest", rows: []int64{1 << 16, 1 << 15, 1 << 14, 1 << 13, 1 << 12, 1 << 11, 1 << 10, 1 << 9, 1 << 8, 1 << 7, 1 << 6, 1 << 5, 1 << 4, 1 << 3, 1 << 2, 1 << 1, 1}, maxSmall: 16,
			want: [][]string{keyRange(7, 17)}},
		{name: "files of half the target neither count nor merge",
			files: append(append(sizedFiles(repeatRows(1, 4)...), &lakepb.DataFile{Key: "big1", Rows: 1, Size: target / 2}, &lakepb.DataFile{Key: "big2", Rows: 1, Size: target - 1}),
				&lakepb.DataFile{Key: "f4", Rows: 1, Size: parquetSize(1)}),
			maxSmall: 4, want: [][]string{{"f0", "f1", "f2", "f3", "f4"}}},
		{name: "files of half the target do not trigger",
			files:    append(sizedFiles(repeatRows(1, 4)...), &lakepb.DataFile{Key: "big1", Rows: 1, Size: target / 2}),
			maxSmall: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := tc.files
			if files == nil {
				files = sizedFiles(tc.rows...)
			}
			got := runKeys(planCompaction(files, target, tc.maxSmall))
			if !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Fatalf("runs %v, want %v", got, tc.want)
			}
		})
	}
}

// A run worth more than the target is cut there, in table order, and a
// piece of one file is no run.
func TestPlanCompactionCutsAtTheTarget(t *testing.T) {
	files := sizedFiles(repeatRows(1, 25)...)
	target := 10*parquetSize(1) + 1
	got := runKeys(planCompaction(files, target, 16))
	want := [][]string{keyRange(0, 10), keyRange(10, 20), keyRange(20, 25)}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("runs %v, want %v", got, want)
	}
	files = sizedFiles(repeatRows(1, 21)...)
	if got := runKeys(planCompaction(files, target, 16)); len(got) != 2 || len(got[1]) != 10 {
		t.Fatalf("21 files with room for 10 a run: %v, want two runs of 10 and the last file alone", got)
	}
}

func TestCompactTier(t *testing.T) {
	for _, tc := range []struct {
		rows       int64
		fanIn, out int
	}{{0, 8, 0}, {1, 8, 0}, {7, 8, 0}, {8, 8, 1}, {63, 8, 1}, {64, 8, 2}, {1, 2, 0}, {2, 2, 1}, {1023, 2, 9}, {1024, 2, 10}} {
		if got := compactTier(tc.rows, tc.fanIn); got != tc.out {
			t.Errorf("compactTier(%d, %d) = %d, want %d", tc.rows, tc.fanIn, got, tc.out)
		}
	}
	for maxSmall, want := range map[int]int{1: 2, 16: 2, 24: 3, 64: 8, 128: 16} {
		if got := compactFanIn(maxSmall); got != want {
			t.Errorf("compactFanIn(%d) = %d, want %d", maxSmall, got, want)
		}
	}
}

// rewriteCost is what a compactor planning with plan rewrote over
// appends one-row commits, planning after each commit as the background
// compactor does and applying each plan at once: the rows and bytes of
// the merged files it wrote, and the most small files (under half of
// target) any version had right after a compaction.
type rewriteCost struct {
	rows, bytes int64
	compactions int
	maxAfter    int
}

func simulateCompaction(appends int, target int64, plan func([]*lakepb.DataFile) [][]*lakepb.DataFile) rewriteCost {
	var c rewriteCost
	var files []*lakepb.DataFile
	next := 0
	newFile := func(rows int64) *lakepb.DataFile {
		next++
		return &lakepb.DataFile{Key: fmt.Sprintf("d%d", next), Rows: rows, Size: parquetSize(rows)}
	}
	for range appends {
		files = append(files, newFile(1))
		runs := plan(files)
		if len(runs) == 0 {
			continue
		}
		c.compactions++
		gone := make(map[string]bool)
		var merged []*lakepb.DataFile
		for _, r := range runs {
			var rows int64
			for _, f := range r {
				gone[f.Key] = true
				rows += f.Rows
			}
			m := newFile(rows)
			merged = append(merged, m)
			c.rows += m.Rows
			c.bytes += m.Size
		}
		files = slices.DeleteFunc(files, func(f *lakepb.DataFile) bool { return gone[f.Key] })
		files = append(files, merged...)
		small := 0
		for _, f := range files {
			if f.Size < target/2 {
				small++
			}
		}
		c.maxAfter = max(c.maxAfter, small)
	}
	return c
}

// Over K one-row commits the background plan rewrites each row at most
// ⌊log_F K⌋ times (O(K log K) rows and bytes in all), and after every
// compaction the table has at most the bound of small files. Merging
// every small file at each trigger, as lake.table.compact does, would
// rewrite Θ(K²/bound) rows: the same check fails it.
func TestPlanCompactionRewritesEachRowLogTimes(t *testing.T) {
	const target = 128 << 20
	for _, tc := range []struct{ appends, maxSmall int }{{10_000, 16}, {10_000, 64}, {100_000, 64}} {
		t.Run(fmt.Sprintf("%d-commits-bound-%d", tc.appends, tc.maxSmall), func(t *testing.T) {
			fanIn := compactFanIn(tc.maxSmall)
			tiered := simulateCompaction(tc.appends, target, func(files []*lakepb.DataFile) [][]*lakepb.DataFile {
				return planCompaction(files, target, tc.maxSmall)
			})
			perRow := int64(compactTier(int64(tc.appends), fanIn)) // ⌊log_F K⌋
			if limit := int64(tc.appends) * perRow; tiered.rows > limit {
				t.Errorf("rewrote %d rows over %d commits, more than %d (each row ⌊log_%d K⌋ = %d times)", tiered.rows, tc.appends, limit, fanIn, perRow)
			}
			// Bytes: every row's bytes that often, plus a footer for every
			// merged file.
			if limit := int64(tc.appends)*perRow*rowBytes + int64(tiered.compactions)*perRow*fileOverhead; tiered.bytes > limit {
				t.Errorf("rewrote %d bytes, more than %d", tiered.bytes, limit)
			}
			if tiered.maxAfter > tc.maxSmall {
				t.Errorf("%d small files right after a compaction, bound %d", tiered.maxAfter, tc.maxSmall)
			}
			t.Logf("tiered: %d compactions rewrote %d rows (%.1f a row), %d bytes; at most %d small files after one",
				tiered.compactions, tiered.rows, float64(tiered.rows)/float64(tc.appends), tiered.bytes, tiered.maxAfter)
			if tc.appends > 10_000 {
				return // the quadratic plan takes long past this
			}
			all := simulateCompaction(tc.appends, target, func(files []*lakepb.DataFile) [][]*lakepb.DataFile {
				if len(files) <= tc.maxSmall {
					return nil
				}
				return planFullCompaction(files, target)
			})
			if all.rows <= int64(tc.appends)*perRow {
				t.Errorf("merging every small file at each trigger rewrote only %d rows: the check cannot tell", all.rows)
			}
			t.Logf("all small files at each trigger: %d compactions rewrote %d rows (%.1f a row)", all.compactions, all.rows, float64(all.rows)/float64(tc.appends))
		})
	}
}
