package meta

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/layout"
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
