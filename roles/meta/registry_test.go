package meta

import (
	"context"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/layout"
)

// readLog is a stage that records which log records are opened.
type readLog struct {
	objects.Store
	mu    sync.Mutex
	reads []int64 // versions, in the order they were opened
}

func (r *readLog) Open(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if k, err := layout.Parse(key); err == nil && k.Kind == layout.KindLog {
		r.mu.Lock()
		r.reads = append(r.reads, k.Version)
		r.mu.Unlock()
	}
	return r.Store.Open(ctx, key, off, n)
}

func (r *readLog) take() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reads
	r.reads = nil
	return out
}

// catchUp reads exactly the records past the head: each once, none the
// node has, and with a known last not even the read that finds the end.
func TestCatchUpReadsExactlyThePastHead(t *testing.T) {
	var rl *readLog
	f := newFixtureWith(t, func(s objects.Store) objects.Store {
		rl = &readLog{Store: s}
		return rl
	})
	f.createTable("clips")
	for i := range 2 {
		if _, err := f.appendOne("clips", nameN(i), ""); err != nil {
			t.Fatal(err)
		}
	}
	tb := f.svc.reg.lookup("clips")
	if tb.row().Head != 2 {
		t.Fatalf("head %d, want 2", tb.row().Head)
	}
	// Another writer commits versions 3..5 behind the service's back.
	for v := int64(3); v <= 5; v++ {
		rec := &logRecord{Format: recordFormat, TableID: tb.id, Version: v, CommittedAt: time.Now().UTC(), Rows: 1,
			Files: []dataFile{{Key: layout.NewDataKey(tb.id), Rows: 1, Size: 1}}}
		if _, err := (stageLog{store: f.stage}).putRecord(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	rl.take()
	if err := f.svc.reg.catchUp(ctx, tb, 4); err != nil {
		t.Fatal(err)
	}
	if got := rl.take(); !slices.Equal(got, []int64{3, 4}) {
		t.Fatalf("catch up to 4 read versions %v, want [3 4]", got)
	}
	if err := f.svc.reg.catchUp(ctx, tb, 4); err != nil {
		t.Fatal(err)
	}
	if got := rl.take(); len(got) != 0 {
		t.Fatalf("catch up to an applied version read %v, want nothing", got)
	}
	if err := f.svc.reg.catchUp(ctx, tb, -1); err != nil {
		t.Fatal(err)
	}
	if got := rl.take(); !slices.Equal(got, []int64{5, 6}) {
		t.Fatalf("catch up to the end read versions %v, want [5 6] (6: the end)", got)
	}
	if h := tb.row().Head; h != 5 {
		t.Fatalf("head %d after catching up, want 5", h)
	}
	// The index has them too: a snapshot at 4 lists versions 1..4's files.
	if snap := f.snapshot("clips", ptr(int64(4))); len(snap.Files) != 4 {
		t.Fatalf("snapshot at 4 has %d files, want 4", len(snap.Files))
	}
	if got := f.svc.reg.counts(); got.Tables != 1 || got.Versions != 5 {
		t.Fatalf("counts %+v, want 1 table, 5 versions", got)
	}
}
