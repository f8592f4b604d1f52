package meta

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/layout"
	"github.com/lakedata/lake/wire"
)

// raceFirst lets another writer commit a version just before this node's
// put-if-absent of the same version's log record.
type raceFirst struct {
	objects.Store
	key   string // the log record to lose
	other func() // commits that version elsewhere
	once  sync.Once
	raced bool
}

func (r *raceFirst) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if key == r.key {
		r.once.Do(func() { r.other(); r.raced = true })
	}
	return r.Store.PutIfAbsent(ctx, key, data)
}

// Two writers of one stage: the second loses the put-if-absent of version
// 1 to the first, removes the data file its lost record named, catches up
// (learning the first writer's commit_id) and commits on top as version 2.
func TestCommitterRebasesOnASecondWriter(t *testing.T) {
	a := newFixture(t)
	info := a.createTable("clips")
	race := &raceFirst{key: layout.LogKey(info.Id, 1)}
	b := &fixture{t: t, dataDir: t.TempDir(), stage: a.stage, wrap: func(s objects.Store) objects.Store {
		race.Store = s // no Preparer: the data file is written before the put
		return race
	}}
	b.start()
	t.Cleanup(b.stop)
	race.other = func() {
		if res, err := a.appendOne("clips", "a.mp4", "a"); err != nil || res.Version != 1 {
			t.Errorf("the first writer's append: %v %v, want version 1", res, err)
		}
	}

	res, err := b.appendOne("clips", "b.mp4", "b")
	if err != nil {
		t.Fatal(err)
	}
	if !race.raced {
		t.Fatal("the second writer never tried version 1")
	}
	if res.Version != 2 || res.Duplicate {
		t.Fatalf("second writer: %v, want a fresh version 2", res)
	}
	if names := b.readNames(b.snapshot("clips", nil)); !slices.Equal(names, []string{"a.mp4", "b.mp4"}) {
		t.Fatalf("version 2 holds %v, want [a.mp4 b.mp4]", names)
	}
	var files int
	for _, err := range a.stage.List(context.Background(), layout.DataPrefix(info.Id)) {
		if err != nil {
			t.Fatal(err)
		}
		files++
	}
	if files != 2 {
		t.Fatalf("%d data files in the stage, want 2: the lost attempt's file stays behind", files)
	}
	dup, err := b.appendOne("clips", "a-again.mp4", "a")
	if err != nil || !dup.Duplicate || dup.Version != 1 {
		t.Fatalf("the first writer's commit_id on the second: %v %v, want duplicate of version 1", dup, err)
	}
}

// markKind is a kind of commit that changes no rows: what a new kind
// needs is a build, nothing around the committer.
var markKind = &commitKind{name: "mark", build: func(context.Context, *committer, *logRecord, []*commitReq) (staged, error) {
	return staged{write: func() error { return nil }, discard: func() {}}, nil
}}

// Requests that queued up while a commit was in flight commit in the
// order they came, each run of one kind as one version.
func TestCommitterGroupsRunsOfOneKind(t *testing.T) {
	f := newFixture(t)
	f.createTable("clips")
	tb := f.svc.reg.lookup("clips")
	v := f.putObject("a.mp4", []byte("a"))
	rec := wiretest.FileRows([]string{"a.mp4"}, []wire.FileValue{v})
	defer rec.Release()
	// A second committer of the table whose queue is full before it runs,
	// as after a long commit.
	stop, cancel := context.WithCancel(context.Background())
	c := *tb.commits
	c.queue, c.stop = make(chan *commitReq, 8), stop
	order := []*commitReq{
		{kind: appendKind, commitID: "a1"}, {kind: appendKind, commitID: "a2"}, {kind: appendKind, commitID: "a3"},
		{kind: markKind, commitID: "m"}, {kind: appendKind, commitID: "a4"},
	}
	for _, r := range order {
		r.ctx, r.done = context.Background(), make(chan commitResp, 1)
		if r.kind == appendKind {
			r.recs, r.rows = []arrow.RecordBatch{rec}, 1
		}
		c.queue <- r
	}
	done := make(chan struct{})
	go func() { c.run(); close(done) }()
	want := []int64{1, 1, 1, 2, 3}
	for i, r := range order {
		if got := <-r.done; got.err != nil || got.version != want[i] || got.duplicate {
			t.Errorf("request %s: version %d (%v), want %d", r.commitID, got.version, got.err, want[i])
		}
	}
	cancel()
	<-done

	h, err := f.svc.History(context.Background(), "clips", 0)
	if err != nil {
		t.Fatal(err)
	}
	var rows []int64
	for _, v := range h.Versions {
		rows = append(rows, v.Rows)
	}
	if !slices.Equal(rows, []int64{1, 0, 3, 0}) {
		t.Fatalf("rows of versions 3..0: %v, want [1 0 3 0]", rows)
	}
}
