package local_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/local"
)

// A put fsyncs its file, the directory that gains the entry, and the
// parent of each directory on the way up whose own entry this store has
// not yet made durable; no more.
func TestPutSyncsWhatDurabilityNeeds(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	ctx := t.Context()
	steps := []struct {
		name string
		do   func() error
		want int64
	}{
		// file, then a, 03, 2026, objects (each new) and the root
		{"first put", put(t, s, "objects/2026/03/a/x"), 6},
		{"a second object in the same directory", put(t, s, "objects/2026/03/a/y"), 2},
		// file, the new b, and 03 for b's entry; 03 is known durable
		{"a new directory beside a known one", put(t, s, "objects/2026/03/b/z"), 3},
		{"put-if-absent into a known directory", func() error { return s.PutIfAbsent(ctx, "objects/2026/03/b/w", []byte("w")) }, 2},
		{"delete", func() error {
			for _, k := range []string{"objects/2026/03/a/x", "objects/2026/03/a/y", "objects/2026/03/b/z", "objects/2026/03/b/w"} {
				if err := s.Delete(ctx, k); err != nil {
					return err
				}
			}
			return nil
		}, 0},
		// Delete removed every directory: all are new again.
		{"put after the directories were deleted", put(t, s, "objects/2026/03/a/x"), 6},
	}
	for _, st := range steps {
		before := local.Syncs(s)
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got := local.Syncs(s) - before; got != st.want {
			t.Errorf("%s: %d fsyncs, want %d", st.name, got, st.want)
		}
	}
}

// A directory that another writer removed and made again is a new one,
// whose entry in its parent this store must make durable again, though it
// has the same name.
func TestRecreatedDirectorySyncedAgain(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	if err := put(t, s, "objects/2026/03/a/x")(); err != nil {
		t.Fatal(err)
	}
	// Another process replaces objects/2026/03/a: made beside it first, so
	// it cannot get the old one's inode.
	a := filepath.Join(dir, "objects", "2026", "03", "a")
	if err := os.Mkdir(a+".new", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(a); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(a+".new", a); err != nil {
		t.Fatal(err)
	}
	before := local.Syncs(s)
	if err := put(t, s, "objects/2026/03/a/y")(); err != nil {
		t.Fatal(err)
	}
	// file, a, and 03 for a's entry
	if got := local.Syncs(s) - before; got != 3 {
		t.Errorf("put into a recreated directory: %d fsyncs, want 3", got)
	}
}

func put(t *testing.T, s *local.Store, key string) func() error {
	return func() error {
		_, err := s.Put(t.Context(), key, bytes.NewReader([]byte("data")), objects.PutOptions{})
		return err
	}
}
