package meta

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/layout"
	"github.com/lakedata/lake/objects/local"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"

	"google.golang.org/protobuf/proto"
)

func (f *fixture) gc(grace time.Duration, dry bool) *lakepb.GcResult {
	f.t.Helper()
	us := grace.Microseconds()
	var res lakepb.GcResult
	if err := flightrpc.Action(context.Background(), f.fc, wire.ActionGC, &lakepb.GcRequest{GraceMicros: &us, DryRun: dry}, &res); err != nil {
		f.t.Fatalf("gc: %v", err)
	}
	return &res
}

func (f *fixture) exists(key string) bool {
	f.t.Helper()
	_, err := f.stage.Stat(context.Background(), key)
	if err != nil && !errors.Is(err, objects.ErrNotFound) {
		f.t.Fatal(err)
	}
	return err == nil
}

func (f *fixture) dataFiles(tableID string) map[string]bool {
	f.t.Helper()
	out := map[string]bool{}
	for info, err := range f.stage.List(context.Background(), layout.DataPrefix(tableID)) {
		if err != nil {
			f.t.Fatal(err)
		}
		out[info.Key] = true
	}
	return out
}

// TestGCFreesWhatNoRetainedVersionReferences: after a delete, a
// compaction and an expiry keeping only the current version, gc with no
// grace frees the orphan object, the deleted row's object and every data
// file the current version does not use, keeps the live objects (whose
// bytes still match their sha256) and an object two tables share while
// one of them still has its row; a dry run frees nothing and a grace
// keeps young orphans.
func TestGCFreesWhatNoRetainedVersionReferences(t *testing.T) {
	f := newFixture(t)
	info := f.createTable("clips")
	f.createTable("other")
	keys := f.keysOf("clips", 5)
	shared := f.putObject("shared.bin", []byte("one object, two tables"))
	for _, table := range []string{"clips", "other"} {
		rec := wiretest.FileRow("shared.bin", shared)
		if _, err := f.append(table, "", rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	orphan := f.putObject("orphan.bin", []byte("uploaded, never committed"))
	if _, err := f.delete(&lakepb.DeleteRequest{Table: "clips", Keys: []string{keys[1], shared.Key}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Compact(context.Background(), "clips"); err != nil {
		t.Fatal(err)
	}

	// Everything is still retained: only the orphan is unreferenced.
	if res := f.gc(0, true); res.Objects.Count != 1 || res.DataFiles.Count != 0 {
		t.Fatalf("dry run before the expiry: %v, want the orphan only", res)
	}
	if !f.exists(orphan.Key) {
		t.Fatal("a dry run freed the orphan")
	}
	if res := f.gc(time.Hour, false); res.Objects.Count != 0 {
		t.Fatalf("gc with a grace of 1h freed %v", res)
	}
	if _, err := f.expire(&lakepb.ExpireRequest{Table: "clips", KeepLast: ptr[int64](1)}); err != nil {
		t.Fatal(err)
	}
	current := map[string]bool{}
	for _, df := range f.snapshot("clips", nil).Files {
		current[df.Key] = true
	}
	res := f.gc(0, false)
	if res.Objects.Count != 2 {
		t.Errorf("freed %d objects, want 2 (the orphan, the deleted row's)", res.Objects.Count)
	}
	if f.exists(orphan.Key) || f.exists(keys[1]) {
		t.Error("the orphan or the deleted row's object is still there")
	}
	if !f.exists(shared.Key) {
		t.Error("gc freed an object another table's row still points to")
	}
	for i, k := range keys {
		if i == 1 {
			continue
		}
		b, err := objects.ReadAll(context.Background(), f.stage, k)
		if err != nil {
			t.Fatalf("live object %s: %v", k, err)
		}
		got, want := sha256.Sum256(b), sha256.Sum256([]byte("content of "+nameN(i)))
		if hex.EncodeToString(got[:]) != hex.EncodeToString(want[:]) {
			t.Errorf("live object %s no longer matches its sha256", k)
		}
	}
	if left := f.dataFiles(info.Id); fmt.Sprint(left) != fmt.Sprint(current) {
		t.Errorf("data files after gc %v, want those of the current version %v", left, current)
	}
	if res.DataFiles.Count == 0 {
		t.Error("gc freed no data file of the expired versions")
	}
	if n := len(f.readNames(f.snapshot("clips", nil))); n != 4 {
		t.Errorf("%d rows after gc, want 4", n)
	}
	// The last reference to the shared object goes; then the object does.
	if _, err := f.delete(&lakepb.DeleteRequest{Table: "other", Keys: []string{shared.Key}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.expire(&lakepb.ExpireRequest{Table: "other", KeepLast: ptr[int64](1)}); err != nil {
		t.Fatal(err)
	}
	f.gc(0, false)
	if f.exists(shared.Key) {
		t.Error("the shared object outlived its last row")
	}
}

// TestGCBesideAppendsNeverFreesAReferencedObject: gc with no grace runs
// again and again (100 times) while four writers upload fresh objects and append rows
// pointing to them. An append may be refused (its object was being
// freed), but every acknowledged row's object exists at the end.
func TestGCBesideAppendsNeverFreesAReferencedObject(t *testing.T) {
	f := newFixture(t)
	f.createTable("clips")
	var (
		mu      sync.Mutex
		acked   []wire.FileValue
		refused atomic.Int64
		stop    = make(chan struct{})
		wg      sync.WaitGroup
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				name := fmt.Sprintf("w%d-%02d", w, i)
				v := f.putObject(name, []byte("bytes of "+name))
				rec := wiretest.FileRow(name, v)
				_, err := f.append("clips", "", rec)
				rec.Release()
				switch {
				case err == nil:
					mu.Lock()
					acked = append(acked, v)
					mu.Unlock()
				case errors.Is(wire.FromStatus(err), wire.ErrObjectMissing):
					refused.Add(1) // refused before it was acknowledged: allowed
				default:
					t.Error(err)
					return
				}
			}
		}()
	}
	gcs := 0
	go func() {
		defer close(stop)
		for range 100 {
			f.gc(0, false)
			gcs++
			time.Sleep(2 * time.Millisecond)
		}
	}()
	wg.Wait()
	<-stop
	for _, v := range acked {
		if !f.exists(v.Key) {
			t.Errorf("acknowledged row %s points at a freed object", v.Key)
		}
	}
	if n := len(f.readNames(f.snapshot("clips", nil))); n != len(acked) {
		t.Errorf("%d rows, %d acknowledged", n, len(acked))
	}
	t.Logf("%d acknowledged, %d refused, %d collections", len(acked), refused.Load(), gcs)
}

// TestGCRemovesOldTempFiles: a temp file a crashed write left in the
// local stage goes once it is older than the grace; a young one, which a
// write in flight may still rename, stays.
func TestGCRemovesOldTempFiles(t *testing.T) {
	f := newFixture(t)
	tmp := filepath.Join(f.stage.Dir(), local.TempDir)
	old, young := filepath.Join(tmp, "put-crashed"), filepath.Join(tmp, "put-in-flight")
	for _, p := range []string{old, young} {
		if err := os.WriteFile(p, []byte("half a file"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(old, long, long); err != nil {
		t.Fatal(err)
	}
	if res := f.gc(time.Hour, true); res.TempFiles.Count != 1 || res.TempFiles.Bytes != 11 {
		t.Errorf("dry run: temp files %v, want 1 of 11 bytes", res.TempFiles)
	}
	res := f.gc(0, false) // the young one is kept by GCLeftoverMinAge
	if res.TempFiles.Count != 1 {
		t.Errorf("temp files freed: %v, want 1", res.TempFiles)
	}
	if _, err := os.Stat(old); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old temp file: %v", err)
	}
	if _, err := os.Stat(young); err != nil {
		t.Errorf("the young temp file: %v", err)
	}
}

// TestGCDropsDedupEntriesOfWhatItFrees: an object a completion recorded
// for dedup, which no row references, is freed by gc and its entry goes
// with it, so a grant of that content is an ordinary one; an object a row
// references keeps its entry and is still answered.
func TestGCDropsDedupEntriesOfWhatItFrees(t *testing.T) {
	f := newFixture(t)
	f.restartWith(noBackground)
	f.createTable("clips")
	orphanBytes, keptBytes := randomBytes(t, 1000), randomBytes(t, 2000)
	orphan := f.uploadLocal("clips", "orphan.bin", orphanBytes)
	kept := f.uploadLocal("clips", "kept.bin", keptBytes)
	f.appendRows("clips", []string{"kept"}, []wire.FileValue{fileValue(kept)})
	grantOf := func(b []byte) *lakepb.UploadGrantRequest {
		return &lakepb.UploadGrantRequest{Table: "clips", FileName: "again.bin", Size: int64(len(b)), Sha256: sumHex(b)}
	}
	if g := f.grant(grantOf(orphanBytes)); g.GetExisting().GetKey() != orphan.GetKey() {
		t.Fatalf("before gc the orphan is not answered: %v", g)
	}

	if res := f.gc(0, false); res.GetObjects().GetCount() != 1 {
		t.Fatalf("gc freed %d objects, want the orphan", res.GetObjects().GetCount())
	}
	if f.exists(orphan.GetKey()) {
		t.Fatal("the orphan is still there")
	}
	if _, ok := f.svc.ix.dedupOf(orphan.GetKey()); ok {
		t.Error("the freed object's dedup entry outlived it")
	}
	if has, err := f.svc.ix.dedupHasSize(orphan.GetSize()); err != nil || has {
		t.Errorf("a dedup entry of the freed object's size is left (%t, %v)", has, err)
	}
	if g := f.grant(grantOf(orphanBytes)); !isFreshGrant(g) {
		t.Errorf("a grant of the freed content: %v, want an ordinary grant", g)
	}
	if g := f.grant(grantOf(keptBytes)); !proto.Equal(g.GetExisting(), kept) {
		t.Errorf("a grant of the referenced content: %v, want existing %v", g, kept)
	}
}

// TestGCBesideDedupNeverFreesAnAnsweredRow: uploaders complete an
// object without a row, then ask for a grant of the same content and
// append a row with the existing object they are answered, while gc runs
// with no grace and frees such objects. A row may be refused (gc doomed
// the object between the grant and the append), but no acknowledged row
// points at a freed object: the append's own check behind the fence
// protects it, whatever the grant answered.
func TestGCBesideDedupNeverFreesAnAnsweredRow(t *testing.T) {
	f := newFixture(t)
	f.restartWith(noBackground)
	f.createTable("clips")
	// A referenced object keeps the day's directory from going empty:
	// the local stage's MkdirAll in a put can lose a race with a free
	// removing the directory (objects/local), which is not what this
	// test is about.
	f.appendRows("clips", []string{"anchor"}, []wire.FileValue{f.putObject("anchor.bin", []byte("anchor"))})
	var (
		mu       sync.Mutex
		acked    []wire.FileValue
		deduped  atomic.Int64
		refused  atomic.Int64
		wg       sync.WaitGroup
		gcDone   = make(chan struct{})
		stopping atomic.Bool
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				content := randomBytes(t, 100+w)
				if _, err := f.tryUploadLocal("clips", "x.bin", content); err != nil {
					if !errors.Is(err, wire.ErrObjectMissing) { // else gc freed it before its completion
						t.Error(err)
					}
					continue
				}
				g := f.grant(&lakepb.UploadGrantRequest{Table: "clips", FileName: "x.bin", Size: int64(len(content)), Sha256: sumHex(content)})
				file := g.GetExisting()
				if file == nil {
					continue // gc was quicker
				}
				deduped.Add(1)
				rec := wiretest.FileRow(fmt.Sprintf("w%d-%02d", w, i), fileValue(file))
				_, err := f.append("clips", "", rec)
				rec.Release()
				switch {
				case err == nil:
					mu.Lock()
					acked = append(acked, fileValue(file))
					mu.Unlock()
				case errors.Is(wire.FromStatus(err), wire.ErrObjectMissing):
					refused.Add(1)
				default:
					t.Error(err)
					return
				}
			}
		}()
	}
	go func() {
		defer close(gcDone)
		for !stopping.Load() {
			f.gc(0, false)
			time.Sleep(time.Millisecond)
		}
	}()
	wg.Wait()
	stopping.Store(true)
	<-gcDone
	f.gc(0, false)
	for _, v := range acked {
		if !f.exists(v.Key) {
			t.Errorf("acknowledged row %s points at a freed object", v.Key)
		}
	}
	if len(acked) == 0 {
		t.Error("no row with a deduplicated object was acknowledged: the test proved nothing")
	}
	t.Logf("%d acknowledged, %d deduplicated, %d refused", len(acked), deduped.Load(), refused.Load())
}
