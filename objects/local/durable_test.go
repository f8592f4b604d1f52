package local_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// Puts that need their directory synced while an fsync of it runs wait for
// the next one, which serves them all: eight puts, two directory fsyncs,
// and none of the waiting puts returns before the fsync started after it.
func TestConcurrentPutsShareDirectoryFsync(t *testing.T) {
	s := open(t, t.TempDir())
	if err := put(t, s, "d/first")(); err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		dirSyncs int
		done     atomic.Int32      // waiting puts returned
		doneAt2  int32        = -1 // of them, when the second fsync started
	)
	started, release := make(chan struct{}), make(chan struct{})
	local.SetBeforeDirSync(t, func(dir string) {
		if dir != "d" {
			return
		}
		mu.Lock()
		dirSyncs++
		n := dirSyncs
		mu.Unlock()
		switch n {
		case 1:
			close(started)
			<-release
		case 2:
			doneAt2 = done.Load()
		}
	})
	before := local.Syncs(s)
	errs := make(chan error, 8)
	go func() { errs <- put(t, s, "d/a")() }()
	<-started
	for i := range 7 {
		go func() {
			err := put(t, s, fmt.Sprintf("d/b%d", i))()
			done.Add(1)
			errs <- err
		}()
	}
	for i := 0; local.WaitingDirSyncs(s, "d") < 8; i++ {
		if i == 1000 {
			t.Fatalf("%d puts wait for the directory's fsync, want 8", local.WaitingDirSyncs(s, "d"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if dirSyncs != 2 || doneAt2 != 0 {
		t.Errorf("%d directory fsyncs, the second after %d of the waiting puts returned; want 2 after none", dirSyncs, doneAt2)
	}
	if got := local.Syncs(s) - before; got != 8+2 {
		t.Errorf("%d fsyncs for 8 puts, want 8 of files and 2 of the directory", got)
	}
	for _, k := range []string{"d/a", "d/b0", "d/b6"} {
		if _, err := s.Stat(t.Context(), k); err != nil {
			t.Errorf("Stat(%s): %v", k, err)
		}
	}
}
