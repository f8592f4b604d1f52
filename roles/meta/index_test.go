package meta

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/protobuf/proto"

	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/objects/layout"
	"github.com/lakedata/lake/wire"
)

// After an OS crash the unsynced index may be torn; the open marker from
// another boot makes the service drop it and rebuild from the stage.
func TestIndexFromAnotherBootIsRebuilt(t *testing.T) {
	f := newFixture(t)
	f.createTable("clips")
	for i := range 3 {
		if _, err := f.appendOne("clips", nameN(i), ""); err != nil {
			t.Fatal(err)
		}
	}
	want := f.snapshot("clips", nil)
	f.stop()
	// What an OS crash leaves: the marker of a previous boot and a torn file.
	if err := os.WriteFile(filepath.Join(f.dataDir, "meta.db.open"), []byte("00000000-dead-beef-0000-000000000000"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dataDir, "meta.db"), []byte("torn pages"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.start()
	if got := f.snapshot("clips", nil); !proto.Equal(got, want) {
		t.Fatalf("after rebuild %v, want %v", got, want)
	}
}

// A crash between the log put and the index update leaves a log record the
// index lacks; the next start applies it.
func TestStartCatchesUpFromTheLog(t *testing.T) {
	f := newFixture(t)
	info := f.createTable("clips")
	if _, err := f.appendOne("clips", "indexed.mp4", "c1"); err != nil {
		t.Fatal(err)
	}
	v := f.putObject("only-in-log.mp4", []byte("x"))
	rec := wiretest.FileRows([]string{"only-in-log.mp4"}, []wire.FileValue{v})
	defer rec.Release()
	data, err := encodeParquet(wire.DefaultSchema(), []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	f.stop()
	ctx := context.Background()
	key := layout.NewDataKey(info.Id)
	if err := f.stage.PutIfAbsent(ctx, key, data); err != nil {
		t.Fatal(err)
	}
	lr := &logRecord{Format: recordFormat, TableID: info.Id, Version: 2, CommittedAt: time.Now().UTC(),
		Files: []dataFile{{Key: key, Rows: 1, Size: int64(len(data))}}, Commits: []commitMark{{ID: "c2", Rows: 1}}, Rows: 1}
	if _, err := (stageLog{store: f.stage}).putRecord(ctx, lr); err != nil {
		t.Fatal(err)
	}
	f.start()
	snap := f.snapshot("clips", nil)
	if snap.Version != 2 {
		t.Fatalf("head %d after restart, want 2", snap.Version)
	}
	names := f.readNames(snap)
	if len(names) != 2 || names[1] != "only-in-log.mp4" {
		t.Fatalf("rows %v", names)
	}
	// Its commit id is known too: a retry is a duplicate, not a new row.
	res, err := f.appendOne("clips", "retry.mp4", "c2")
	if err != nil || !res.Duplicate || res.Version != 2 {
		t.Fatalf("retry of c2: %v %v, want duplicate of version 2", res, err)
	}
}

// Losing the put-if-absent race for a version (another writer took it)
// makes the committer catch up and commit on top, never over it.
func TestLostVersionRaceCommitsOnTop(t *testing.T) {
	f := newFixture(t)
	info := f.createTable("clips")
	// Another writer commits version 1 behind this service's back.
	lr := &logRecord{Format: recordFormat, TableID: info.Id, Version: 1, CommittedAt: time.Now().UTC(),
		Commits: []commitMark{{ID: "other", Rows: 0}}}
	if _, err := (stageLog{store: f.stage}).putRecord(context.Background(), lr); err != nil {
		t.Fatal(err)
	}
	res, err := f.appendOne("clips", "mine.mp4", "mine")
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != 2 || res.Duplicate {
		t.Fatalf("got %v, want a fresh version 2", res)
	}
	dup, err := f.appendOne("clips", "again.mp4", "other")
	if err != nil || !dup.Duplicate || dup.Version != 1 {
		t.Fatalf("commit id of the other writer: %v %v, want duplicate of version 1", dup, err)
	}
}
