package query

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/local"
)

// countingStore counts Opens: how often the cache went to the stage.
type countingStore struct {
	objects.Store
	opens atomic.Int64
}

func (s *countingStore) Open(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	s.opens.Add(1)
	return s.Store.Open(ctx, key, off, n)
}

func newRemote(t *testing.T, files map[string]string) *countingStore {
	t.Helper()
	st, err := local.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for k, v := range files {
		if _, err := st.Put(context.Background(), k, bytes.NewReader([]byte(v)), objects.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return &countingStore{Store: st}
}

func TestFileCacheFetchesOnceAndEvictsUnneededLRU(t *testing.T) {
	remote := newRemote(t, map[string]string{
		"_lake/tables/t/data/a.parquet": "aaaa",
		"_lake/tables/t/data/b.parquet": "bbbb",
		"_lake/tables/t/data/c.parquet": "cccc",
	})
	dir := t.TempDir()
	c, err := openFileCache(dir, 8, remote, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Eight concurrent readers of one file share one download.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := c.path(ctx, "_lake/tables/t/data/a.parquet", 4)
			if err != nil {
				t.Error(err)
				return
			}
			if b, _ := os.ReadFile(p); string(b) != "aaaa" {
				t.Errorf("cached content %q", b)
			}
		}()
	}
	wg.Wait()
	if n := remote.opens.Load(); n != 1 {
		t.Fatalf("%d downloads for one file, want 1", n)
	}
	for _, k := range []string{"b", "c"} {
		if _, err := c.path(ctx, "_lake/tables/t/data/"+k+".parquet", 4); err != nil {
			t.Fatal(err)
		}
	}
	// 12 bytes over a limit of 8: a (least recently used) goes, unless needed.
	c.evict(map[string]bool{"_lake/tables/t/data/a.parquet": true})
	if _, err := os.Stat(filepath.Join(dir, "_lake/tables/t/data/a.parquet")); err != nil {
		t.Fatalf("a needed file was evicted: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "_lake/tables/t/data/b.parquet")); !os.IsNotExist(err) {
		t.Fatalf("the least recently used unneeded file stayed: %v", err)
	}
	if c.size() != 8 {
		t.Fatalf("cache holds %d bytes, want 8", c.size())
	}
	// A restart adopts the copies and drops unfinished downloads.
	os.WriteFile(filepath.Join(dir, "_lake/tables/t/data", cacheTempPrefix+"x"), []byte("partial"), 0o644)
	c2, err := openFileCache(dir, 8, remote, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	before := remote.opens.Load()
	if _, err := c2.path(ctx, "_lake/tables/t/data/c.parquet", 4); err != nil {
		t.Fatal(err)
	}
	if remote.opens.Load() != before || c2.size() != 8 {
		t.Fatalf("restart: refetched (%d→%d) or wrong size %d", before, remote.opens.Load(), c2.size())
	}
	if _, err := os.Stat(filepath.Join(dir, "_lake/tables/t/data", cacheTempPrefix+"x")); !os.IsNotExist(err) {
		t.Fatal("an unfinished download survived a restart")
	}
	// A size that disagrees with the log is an error.
	for range 2 {
		if _, err := c2.path(ctx, "_lake/tables/t/data/b.parquet", 5); err == nil {
			t.Fatal("a size mismatch went unnoticed")
		}
	}
	if _, err := c2.path(ctx, "../escape", 1); err == nil {
		t.Fatal("an unclean key was accepted")
	}
}
