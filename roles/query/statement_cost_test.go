//go:build duckdb_arrow

package query_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/local"
	"github.com/lakedata/lake/roles/meta"
	"github.com/lakedata/lake/roles/query"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// syncBuffer is a log sink the role may write from several goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newRemoteLake is a lake whose stage the query role reads through its
// cache (a local store announced as S3), with the given cache limit.
func newRemoteLake(t testing.TB, cacheLimit int64, logger *slog.Logger) *lakeFixture {
	return newLakeTuned(t, func(stage *local.Store, m *meta.Config, q *query.Config) {
		m.Discover = &lakepb.StageDescriptor{Kind: "s3", RootUri: "s3://remote/lake", Bucket: "remote", Prefix: "lake"}
		q.OpenStage = func(context.Context, *lakepb.StageDescriptor) (objects.Store, error) { return stage, nil }
		q.CacheDir = filepath.Join(t.TempDir(), "qcache")
		q.CacheLimit = cacheLimit
		if logger != nil {
			q.Logger = logger
		}
	})
}

// TestUnchangedStatementsLeaveTheCacheAlone: statements that move no view
// do not revisit the cache. The cache is over its limit here (the current
// files alone exceed it), so every eviction pass says so in the log; only
// the statement after a commit may make one.
func TestUnchangedStatementsLeaveTheCacheAlone(t *testing.T) {
	var logs syncBuffer
	l := newRemoteLake(t, 1, slog.New(slog.NewTextHandler(&logs, nil)))
	l.createTable("clips", wire.DefaultSchema())
	l.putFile("clips", "a.mp4", []byte("a"))
	l.putFile("clips", "b.mp4", []byte("b"))
	passes := func() int { return strings.Count(logs.String(), "exceed the cache limit") }
	if _, _, err := l.sqlQuery("SELECT count(*) FROM clips"); err != nil {
		t.Fatal(err)
	}
	before := passes()
	if before == 0 {
		t.Fatal("the first statement made no eviction pass over a cache past its limit")
	}
	for range 5 {
		if _, _, err := l.sqlQuery("SELECT count(*) FROM clips"); err != nil {
			t.Fatal(err)
		}
	}
	if n := passes() - before; n != 0 {
		t.Fatalf("5 statements on unchanged tables made %d eviction passes, want 0", n)
	}
	l.putFile("clips", "c.mp4", []byte("c"))
	if _, _, err := l.sqlQuery("SELECT count(*) FROM clips"); err != nil {
		t.Fatal(err)
	}
	if passes() == before {
		t.Fatal("the statement after a commit made no eviction pass")
	}
}

// BenchmarkStatementCostByVersions is the p50 latency of SELECT 1 and of
// SELECT count(*) over a table of single-row commits, at 100 and at 2,000
// versions, on a stage read through the cache (where the role keeps a
// list of every current data file). SELECT 1 touches no table, so it must
// not grow with the versions; count(*) reads one file per version until
// compaction lands. Each statement runs in a loop of its own: a SELECT 1
// right after a count(*) of 2,000 files pays for the count's garbage.
func BenchmarkStatementCostByVersions(b *testing.B) {
	for _, versions := range []int{100, 2000} {
		for _, q := range []struct{ name, sql string }{{"select1", "SELECT 1"}, {"count", "SELECT count(*) FROM many"}} {
			b.Run(fmt.Sprintf("versions=%d/%s", versions, q.name), func(b *testing.B) {
				l := newRemoteLake(b, 10<<30, nil)
				l.createTable("many", wire.DefaultSchema())
				for i := range versions {
					l.putFile("many", fmt.Sprintf("f%05d.mp4", i), []byte("x"))
				}
				drainFlight(b, l, "SELECT count(*) FROM many") // defines the view, fills the cache
				var lat []time.Duration
				for b.Loop() {
					t0 := time.Now()
					drainFlight(b, l, q.sql)
					lat = append(lat, time.Since(t0))
				}
				b.ReportMetric(p50ms(lat), "p50-ms")
			})
		}
	}
}

func p50ms(d []time.Duration) float64 {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return float64(d[len(d)/2].Microseconds()) / 1000
}
