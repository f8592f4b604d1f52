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
// CompactMinFiles small files once the leader has caught up.
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
	for _, v := range h.Versions {
		if v.Rows == 0 && v.Version > 0 {
			compactions++
		}
	}
	if compactions < n/(minFiles+1)/2 {
		t.Fatalf("%d compactions over %d appends with a trigger of %d files", compactions, n, minFiles)
	}
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
