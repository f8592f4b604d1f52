package query

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/wire"
)

// fileCache keeps local copies of a remote stage's data files for DuckDB,
// which cannot read s3:// (the bundled build has no httpfs). Data files
// are immutable, so a copy never goes stale and survives restarts. The
// cache is bounded: files no current view needs are evicted, least
// recently used first, once the total passes the limit. Files that views
// need are never evicted under a running query; if they alone pass the
// limit, the cache grows and says so.
type fileCache struct {
	dir   string
	limit int64
	store objects.Store
	log   *slog.Logger
	// metrics counts hits and misses; nil: not counted.
	metrics *metrics

	mu      sync.Mutex
	entries map[string]*cacheEntry // stage key → local copy
	total   int64
	loading map[string]chan struct{} // keys being fetched
}

type cacheEntry struct {
	size    int64
	lastUse time.Time
}

const cacheTempPrefix = ".fetch-"

func openFileCache(dir string, limit int64, store objects.Store, log *slog.Logger) (*fileCache, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("query: cache dir: %w", err)
	}
	c := &fileCache{dir: dir, limit: limit, store: store, log: log,
		entries: map[string]*cacheEntry{}, loading: map[string]chan struct{}{}}
	// Adopt what a previous run fetched; drop its unfinished downloads.
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if strings.HasPrefix(d.Name(), cacheTempPrefix) {
			return os.Remove(path)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		c.entries[filepath.ToSlash(rel)] = &cacheEntry{size: info.Size(), lastUse: info.ModTime()}
		c.total += info.Size()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("query: scan cache: %w", err)
	}
	return c, nil
}

// path returns the local copy of key, fetching it first if needed.
// Concurrent callers for one key share one download.
func (c *fileCache) path(ctx context.Context, key string, size int64) (string, error) {
	if err := wire.ValidateKey(key); err != nil {
		return "", err
	}
	local := filepath.Join(c.dir, filepath.FromSlash(key))
	for {
		c.mu.Lock()
		if e, ok := c.entries[key]; ok {
			e.lastUse = time.Now()
			c.mu.Unlock()
			c.metrics.cacheLookup(true)
			return local, nil
		}
		wait, busy := c.loading[key]
		if !busy {
			c.metrics.cacheLookup(false)
			done := make(chan struct{})
			c.loading[key] = done
			c.mu.Unlock()
			n, err := c.fetch(ctx, key, local)
			if err == nil && size >= 0 && n != size {
				os.Remove(local)
				err = fmt.Errorf("query: fetched %s has %d bytes, the log says %d", key, n, size)
			}
			c.mu.Lock()
			delete(c.loading, key)
			close(done)
			if err == nil {
				c.entries[key] = &cacheEntry{size: n, lastUse: time.Now()}
				c.total += n
			}
			c.mu.Unlock()
			return local, err
		}
		c.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// fetch downloads key to local through a temp file, so a crash never
// leaves a partial copy under the final name.
func (c *fileCache) fetch(ctx context.Context, key, local string) (int64, error) {
	if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
		return 0, err
	}
	rc, err := c.store.Open(ctx, key, 0, -1)
	if err != nil {
		return 0, fmt.Errorf("query: fetch %s: %w", key, err)
	}
	defer rc.Close()
	tmp, err := os.CreateTemp(filepath.Dir(local), cacheTempPrefix+"*")
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(tmp, rc)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), local)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return 0, fmt.Errorf("query: fetch %s: %w", key, err)
	}
	return n, nil
}

// evict removes least recently used files that no view needs until the
// cache fits its limit.
func (c *fileCache) evict(needed map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.total <= c.limit {
		return
	}
	var keys []string
	for k := range c.entries {
		if !needed[k] {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return c.entries[keys[i]].lastUse.Before(c.entries[keys[j]].lastUse) })
	for _, k := range keys {
		if c.total <= c.limit {
			break
		}
		err := os.Remove(filepath.Join(c.dir, filepath.FromSlash(k)))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			c.log.Warn("cache: evict", "key", k, "err", err)
			continue
		}
		c.total -= c.entries[k].size
		delete(c.entries, k)
	}
	if c.total > c.limit {
		c.log.Warn("cache: the data files of the current table versions exceed the cache limit",
			"bytes", c.total, "limit", c.limit)
	}
}

// size is the bytes held, for tests and status.
func (c *fileCache) size() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}
