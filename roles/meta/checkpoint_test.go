package meta

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/lakedata/lake/internal/etcdtest"
	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/layout"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// readCounter is the stage as the service sees it, counting the objects
// it opens by the part of the layout they belong to.
type readCounter struct {
	objects.Store
	mu    sync.Mutex
	reads map[layout.Kind]int
}

func (c *readCounter) Open(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if k, err := layout.Parse(key); err == nil {
		c.mu.Lock()
		c.reads[k.Kind]++
		c.mu.Unlock()
	}
	return c.Store.Open(ctx, key, offset, length)
}

func (c *readCounter) take() map[layout.Kind]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.reads
	c.reads = make(map[layout.Kind]int)
	return out
}

// checkpointFixture is a service that checkpoints every interval
// versions, on a stage whose reads are counted.
func checkpointFixture(t *testing.T, interval int64, retention time.Duration) (*fixture, *readCounter) {
	t.Helper()
	counter := &readCounter{reads: make(map[layout.Kind]int)}
	f := newFixtureWith(t, func(s objects.Store) objects.Store {
		counter.Store = s
		return counter
	})
	f.restartWith(func(c *Config) {
		c.CheckpointInterval, c.CommitRetention = interval, retention
		c.CompactMinFiles = 0 // file counts stay as the appends made them
		c.VerifyRate = 0      // only the rebuild reads the stage
	})
	return f, counter
}

// restartWith restarts the service with tune applied to its config.
func (f *fixture) restartWith(tune func(*Config)) {
	f.t.Helper()
	f.tune = tune
	f.restart()
}

// rebuild restarts the service with its index deleted: everything it
// knows then comes from the stage.
func (f *fixture) rebuild() {
	f.t.Helper()
	f.stop()
	if err := os.Remove(filepath.Join(f.dataDir, "meta.db")); err != nil {
		f.t.Fatal(err)
	}
	f.start()
}

// waitCheckpoint waits (bounded) until the stage's hint names version.
func (f *fixture) waitCheckpoint(tableID string, version int64) {
	f.t.Helper()
	for range 500 {
		b, err := objects.ReadAll(context.Background(), f.stage, layout.LastCheckpointKey(tableID))
		if err == nil {
			if v, err := decodeLastCheckpoint(b, tableID); err == nil && v >= version {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.t.Fatalf("no checkpoint of version %d after 5s", version)
}

func (f *fixture) history(table string) *lakepb.History {
	f.t.Helper()
	var h lakepb.History
	if err := flightrpc.Action(context.Background(), f.fc, wire.ActionHistory, &lakepb.HistoryRequest{Name: table}, &h); err != nil {
		f.t.Fatal(err)
	}
	return &h
}

// TestCheckpointBoundsWhatARebuildReads: after 95 single-row commits with
// a checkpoint every 10 versions, a node whose index is gone reads the
// hint, one checkpoint and the 5 records after it — not 95 records — and
// answers everything as before: the snapshot, an old version, the whole
// history, and a retried commit id.
func TestCheckpointBoundsWhatARebuildReads(t *testing.T) {
	f, counter := checkpointFixture(t, 10, DefaultCommitRetention)
	info := f.createTable("clips")
	var fifth *lakepb.AppendResult
	for i := range 95 {
		res, err := f.appendOne("clips", nameN(i), fmt.Sprintf("commit-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if i == 5 {
			fifth = res
		}
	}
	f.waitCheckpoint(info.Id, 90)
	want, wantV3, wantHistory := f.snapshot("clips", nil), f.snapshot("clips", ptr[int64](3)), f.history("clips")

	// A plain restart loads the base from the index and reads no record.
	counter.take()
	f.restart()
	if got := f.snapshot("clips", nil); !proto.Equal(got, want) {
		t.Fatalf("after restart: snapshot %v, want %v", got, want)
	}
	if reads := counter.take(); reads[layout.KindLog] > 1 || reads[layout.KindLastCheckpoint] != 0 {
		t.Errorf("a restart with its index read %v; want at most 1 log record (the end of the log) and no checkpoint hint", reads)
	}

	f.rebuild()
	reads := counter.take()
	if reads[layout.KindLog] > 1+5+1 || reads[layout.KindCheckpoint] != 1 || reads[layout.KindLastCheckpoint] != 1 {
		t.Errorf("a rebuild read %v; want the hint, one checkpoint, record 0 and the 5 records after the checkpoint (+1 for the end)", reads)
	}
	if got := f.snapshot("clips", nil); !proto.Equal(got, want) {
		t.Fatalf("after rebuild: snapshot %v, want %v", got, want)
	}
	if got := f.snapshot("clips", ptr[int64](3)); !proto.Equal(got, wantV3) {
		t.Errorf("after rebuild: clips@3 %v, want %v", got, wantV3)
	}
	if got := f.history("clips"); !proto.Equal(got, wantHistory) {
		t.Errorf("after rebuild: the history differs (%d versions, want %d)", len(got.Versions), len(wantHistory.Versions))
	}
	again, err := f.appendOne("clips", "again.bin", "commit-5")
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate || again.Version != fifth.Version || again.Rows != 1 {
		t.Errorf("a retry of commit-5 after the rebuild got %v, want duplicate of version %d", again, fifth.Version)
	}
	next, err := f.appendOne("clips", "next.bin", "")
	if err != nil {
		t.Fatal(err)
	}
	if next.Version != want.Version+1 {
		t.Errorf("the next append got version %d, want %d", next.Version, want.Version+1)
	}
	if n := len(f.readNames(f.snapshot("clips", nil))); n != 96 {
		t.Errorf("%d rows, want 96", n)
	}
}

// TestCommitRetentionThroughCheckpoints: a checkpoint remembers the
// commit ids of the retention window and forgets older ones, so after a
// rebuild a retry within the window is a duplicate and one after it is a
// new commit.
func TestCommitRetentionThroughCheckpoints(t *testing.T) {
	const retention = 300 * time.Millisecond
	f, _ := checkpointFixture(t, 10, retention)
	info := f.createTable("clips")
	old, err := f.appendOne("clips", "old.bin", "old")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * retention) // "old" leaves the window of the versions after it
	var recent *lakepb.AppendResult
	for i := range 9 {
		if recent, err = f.appendOne("clips", nameN(i), fmt.Sprintf("recent-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	f.waitCheckpoint(info.Id, 10)
	raw, err := objects.ReadAll(context.Background(), f.stage, layout.CheckpointKey(info.Id, 10))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), `"old"`) || !strings.Contains(string(raw), `"recent-8"`) {
		t.Fatalf("checkpoint 10 should hold recent-8 and not old:\n%s", raw)
	}

	f.rebuild()
	again, err := f.appendOne("clips", "recent-again.bin", "recent-8")
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate || again.Version != recent.Version {
		t.Errorf("a retry within the window got %v, want duplicate of version %d", again, recent.Version)
	}
	late, err := f.appendOne("clips", "old-again.bin", "old")
	if err != nil {
		t.Fatal(err)
	}
	if late.Duplicate || late.Version == old.Version {
		t.Errorf("a retry after the window got %v: the rebuilt node should not know commit id old any more", late)
	}
}

// TestBrokenCheckpointFallsBackToTheLog: a torn or foreign checkpoint
// only makes a rebuild read the whole log; the table comes back whole.
func TestBrokenCheckpointFallsBackToTheLog(t *testing.T) {
	for name, damage := range map[string]func(f *fixture, id string) error{
		"torn checkpoint": func(f *fixture, id string) error {
			return os.WriteFile(filepath.Join(f.stage.Dir(), layout.CheckpointKey(id, 20)), []byte(`{"format":1,"table_`), 0o644)
		},
		"hint naming a missing checkpoint": func(f *fixture, id string) error {
			return os.WriteFile(filepath.Join(f.stage.Dir(), layout.LastCheckpointKey(id)), []byte(`{"format":1,"version":30}`), 0o644)
		},
		"checkpoint of a later format": func(f *fixture, id string) error {
			path := filepath.Join(f.stage.Dir(), layout.CheckpointKey(id, 20))
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(path, []byte(strings.Replace(string(b), `"format":1`, `"format":9`, 1)), 0o644)
		},
		"checkpoint that lies about its rows": func(f *fixture, id string) error {
			path := filepath.Join(f.stage.Dir(), layout.CheckpointKey(id, 20))
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(path, []byte(strings.Replace(string(b), `"rows":20`, `"rows":21`, 1)), 0o644)
		},
	} {
		t.Run(name, func(t *testing.T) {
			f, counter := checkpointFixture(t, 10, DefaultCommitRetention)
			info := f.createTable("clips")
			for i := range 25 {
				if _, err := f.appendOne("clips", nameN(i), ""); err != nil {
					t.Fatal(err)
				}
			}
			f.waitCheckpoint(info.Id, 20)
			want := f.snapshot("clips", nil)
			if err := damage(f, info.Id); err != nil {
				t.Fatal(err)
			}
			counter.take()
			f.rebuild()
			if n := counter.take()[layout.KindLog]; n < 26 {
				t.Errorf("the rebuild read %d log records; with the checkpoint unusable it must read all 26", n)
			}
			if got := f.snapshot("clips", nil); !proto.Equal(got, want) {
				t.Errorf("snapshot %v, want %v", got, want)
			}
		})
	}
}

// TestIndexOfThePreviousReleaseAnswersRetries: an index written before
// checkpoints kept only the version of a commit id; a retry is still
// answered with its rows.
func TestIndexOfThePreviousReleaseAnswersRetries(t *testing.T) {
	f := newFixture(t)
	info := f.createTable("clips")
	first, err := f.appendOne("clips", "a.bin", "commit-a")
	if err != nil {
		t.Fatal(err)
	}
	f.stop()
	db, err := bolt.Open(filepath.Join(f.dataDir, "meta.db"), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], uint64(first.Version))
		return tx.Bucket(bucketCommits).Bucket([]byte(info.Id)).Put([]byte("commit-a"), v[:])
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	f.start()
	again, err := f.appendOne("clips", "a-again.bin", "commit-a")
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate || again.Version != first.Version || again.Rows != first.Rows {
		t.Errorf("retry got %v, want duplicate of %v", again, first)
	}
}

// TestCheckpointInterval0WritesNone: with checkpoints off nothing is
// written, and the log alone still serves a rebuild.
func TestCheckpointInterval0WritesNone(t *testing.T) {
	f, _ := checkpointFixture(t, 0, DefaultCommitRetention)
	info := f.createTable("clips")
	for i := range 12 {
		if _, err := f.appendOne("clips", nameN(i), ""); err != nil {
			t.Fatal(err)
		}
	}
	f.rebuild()
	if n := len(f.readNames(f.snapshot("clips", nil))); n != 12 {
		t.Errorf("%d rows after a rebuild, want 12", n)
	}
	for info, err := range f.stage.List(context.Background(), layout.CheckpointPrefix(info.Id)) {
		if err != nil {
			t.Fatal(err)
		}
		t.Errorf("checkpoint %s written with CheckpointInterval 0", info.Key)
	}
}

func TestCheckpointDecodeRefuses(t *testing.T) {
	good := checkpointRecord{Format: checkpointFormat, TableID: "t", Name: "clips", Schema: []byte{1}, Version: 3, Rows: 2,
		Files: []dataFile{{Key: "k", Rows: 2, Size: 10}}, Commits: []checkpointCommit{{ID: "c", Version: 3, Rows: 2}}}
	raw, err := json.Marshal(good)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeCheckpoint(raw, "t", 3); err != nil {
		t.Fatalf("a good checkpoint: %v", err)
	}
	for name, c := range map[string]func(*checkpointRecord){
		"format":         func(c *checkpointRecord) { c.Format = 2 },
		"table":          func(c *checkpointRecord) { c.TableID = "u" },
		"version":        func(c *checkpointRecord) { c.Version = 4 },
		"no schema":      func(c *checkpointRecord) { c.Schema = nil },
		"rows":           func(c *checkpointRecord) { c.Rows = 3 },
		"file":           func(c *checkpointRecord) { c.Files[0].Key = "" },
		"commit":         func(c *checkpointRecord) { c.Commits[0].Version = 9 },
		"commit sans id": func(c *checkpointRecord) { c.Commits[0].ID = "" },
	} {
		bad := good
		bad.Files = append([]dataFile(nil), good.Files...)
		bad.Commits = append([]checkpointCommit(nil), good.Commits...)
		c(&bad)
		raw, err := json.Marshal(bad)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeCheckpoint(raw, "t", 3); err == nil {
			t.Errorf("%s: a bad checkpoint was accepted", name)
		}
	}
	if _, err := decodeLastCheckpoint([]byte(`{"format":1,"version":0}`), "t"); err == nil {
		t.Error("a hint of version 0 was accepted")
	}
}

// FuzzDecodeCheckpoint: whatever the stage holds, decoding never panics,
// and what it accepts is self-consistent.
func FuzzDecodeCheckpoint(f *testing.F) {
	f.Add([]byte(`{"format":1,"table_id":"t","name":"a","schema":"AQ==","version":1,"rows":1,"files":[{"key":"k","rows":1,"size":1}]}`))
	f.Add([]byte(`{"format":1,"version":5}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if c, err := decodeCheckpoint(b, "t", -1); err == nil {
			if c.validate("t", c.Version) != nil {
				t.Fatal("accepted a checkpoint that does not validate")
			}
		}
		if v, err := decodeLastCheckpoint(b, "t"); err == nil && v < 1 {
			t.Fatalf("accepted a hint of version %d", v)
		}
	})
}

// TestFollowerFarBehindCatchesUpFromACheckpoint: a follower that was down
// while the leader committed 65 versions reads the hint, one checkpoint
// and the few records after it when it comes back, not 65 records, and
// then serves the same snapshot as the leader.
func TestFollowerFarBehindCatchesUpFromACheckpoint(t *testing.T) {
	etcd := etcdtest.Start(t)
	every := func(c *Config) { c.CheckpointInterval, c.CompactMinFiles = 10, 0 }
	leader := newMemberWith(t, etcd.Endpoint, nil, func(f *fixture) { f.tune = every })
	waitFor(t, "the first node to lead", func() bool { return leader.svc.canCommit() })
	counter := &readCounter{reads: make(map[layout.Kind]int)}
	follower := newMemberWith(t, etcd.Endpoint, leader, func(f *fixture) {
		f.tune = every
		f.wrap = func(s objects.Store) objects.Store {
			counter.Store = s
			return counter
		}
	})
	info := leader.createTable("clips")
	waitFor(t, "the follower to know the table", func() bool { return follower.svc.reg.lookup("clips") != nil })
	follower.stop()
	for i := range 65 {
		if _, err := leader.appendOne("clips", nameN(i), ""); err != nil {
			t.Fatal(err)
		}
	}
	leader.waitCheckpoint(info.Id, 60)
	counter.take()
	follower.start()
	waitFor(t, "the follower to catch up", func() bool { return follower.svc.reg.lookup("clips").row().Head >= 65 })
	if n := counter.take()[layout.KindLog]; n > 5+2 {
		t.Errorf("the follower read %d log records to catch up 65 versions; want the 5 after checkpoint 60 (+2)", n)
	}
	if got, want := follower.snapshot("clips", nil), leader.snapshot("clips", nil); !proto.Equal(got, want) {
		t.Errorf("follower snapshot %v, leader %v", got, want)
	}
}
