package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/internal/s3test"
	"github.com/lakedata/lake/internal/wiretest"
)

// coldStartRig is a meta node on a versitygw stage whose S3 requests go
// through a counting proxy, and a query node in front of it.
type coldStartRig struct {
	t        testing.TB
	dir      string
	gw       *s3test.Server
	bucket   string
	proxy    *s3test.CountingProxy
	interval int
	meta     *proc
	query    *proc
	endpoint string
	rows     map[string]int64 // acknowledged rows per table
}

func newColdStartRig(t testing.TB, interval int) *coldStartRig {
	gw := s3test.Start(t)
	gw.SetEnv(t)
	r := &coldStartRig{t: t, dir: t.TempDir(), gw: gw, bucket: gw.NewBucket(t), interval: interval, rows: map[string]int64{}}
	r.proxy = s3test.StartCountingProxy(t, gw.Endpoint)
	r.startMeta()
	r.query = startLake(t, "serve", "--role=query", "--listen", "127.0.0.1:0", "--meta", r.meta.Addr(),
		"--data-dir", filepath.Join(r.dir, "query"))
	r.endpoint = "grpc://" + r.query.Addr()
	return r
}

// startMeta starts the meta node; the background verifier is off, so the
// requests counted at start are the load's alone.
func (r *coldStartRig) startMeta() time.Duration {
	r.t.Helper()
	addr := "127.0.0.1:0"
	if r.meta != nil {
		addr = r.meta.Addr() // the query node keeps its meta address
	}
	start := time.Now()
	r.meta = startLake(r.t, "serve", "--role=meta", "--listen", addr, "--data-dir", filepath.Join(r.dir, "meta"),
		"--stage", "s3://"+r.bucket+"/lake", "--s3-endpoint", r.proxy.Endpoint,
		"--verify-rate", "0", "--checkpoint-interval", fmt.Sprint(r.interval))
	return time.Since(start)
}

// coldStart stops meta, deletes its index and starts it again. It returns
// how long until meta listened (the index is rebuilt before that) and the
// S3 requests it made meanwhile.
func (r *coldStartRig) coldStart() (time.Duration, map[string]int) {
	r.t.Helper()
	r.meta.kill(syscall.SIGTERM)
	if err := os.RemoveAll(filepath.Join(r.dir, "meta")); err != nil {
		r.t.Fatal(err)
	}
	r.proxy.Take()
	took := r.startMeta()
	return took, r.proxy.Take()
}

// grow appends single-row versions to table until it has at least
// versions versions, from a few writers at once (the leader groups what
// arrives together, so the appends outnumber the versions a little).
func (r *coldStartRig) grow(ctx context.Context, table string, versions int64) {
	r.t.Helper()
	admin, err := client.Connect(ctx, r.endpoint)
	if err != nil {
		r.t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.CreateTable(ctx, table, nil, true); err != nil {
		r.t.Fatal(err)
	}
	put, err := admin.PutReader(ctx, table, "seed", strings.NewReader("one object for every row"), client.PutOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	var acked atomic.Int64
	acked.Add(1)
	var head atomic.Int64
	var wg sync.WaitGroup
	for w := range 4 {
		cl, err := client.Connect(ctx, r.endpoint)
		if err != nil {
			r.t.Fatal(err)
		}
		defer cl.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; head.Load() < versions && i < int(versions); i++ {
				rec := wiretest.FileRow(fmt.Sprintf("w%d-%06d", w, i), put.File)
				res, err := cl.Append(ctx, table, rec, client.AppendOptions{})
				rec.Release()
				if err != nil {
					r.t.Errorf("append to %s: %v", table, err)
					return
				}
				acked.Add(1)
				for v := head.Load(); res.GetVersion() > v && !head.CompareAndSwap(v, res.GetVersion()); v = head.Load() {
				}
			}
		}()
	}
	wg.Wait()
	r.rows[table] += acked.Load()
}

// check asks a fresh query node for every table's rows through SQL.
func (r *coldStartRig) check(ctx context.Context, when string) {
	r.t.Helper()
	q := startLake(r.t, "serve", "--role=query", "--listen", "127.0.0.1:0", "--meta", r.meta.Addr(),
		"--data-dir", filepath.Join(r.dir, fmt.Sprintf("query-%d", time.Now().UnixNano())))
	defer q.kill(syscall.SIGTERM)
	cl, err := client.Connect(ctx, "grpc://"+q.Addr())
	if err != nil {
		r.t.Fatal(err)
	}
	defer cl.Close()
	for table, want := range r.rows {
		if got := countTable(r.t, ctx, cl, table); got != want {
			r.t.Errorf("%s: %s has %d rows through SQL, %d were acknowledged", when, table, got, want)
		}
	}
}

func countTable(t testing.TB, ctx context.Context, c *client.Client, table string) int64 {
	t.Helper()
	rdr, err := c.Query(ctx, "SELECT count(*) FROM "+table)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	for rdr.Next() {
		if rec := rdr.RecordBatch(); rec.NumRows() == 1 {
			return rec.Column(0).(*array.Int64).Value(0)
		}
	}
	t.Fatalf("count(*) of %s returned no row: %v", table, rdr.Err())
	return 0
}

// TestColdStartReadsBoundedObjects: meta on versitygw, with its index
// deleted, starts from the stage alone. The GETs it makes, counted by a
// proxy between it and the gateway, do not grow with the number of
// versions: the same bound holds after 300 and after 1,200 versions of
// the big table (LAKE_BENCH_BIG=1: 20,000), since each table costs its
// catalog entry, its creation record, the checkpoint hint, one checkpoint
// and at most one interval of log records. Every table then answers SQL
// with the rows that were acknowledged.
func TestColdStartReadsBoundedObjects(t *testing.T) {
	const interval = 50
	sizes := []int64{300, 1200}
	if os.Getenv("LAKE_BENCH_BIG") != "" {
		sizes = []int64{300, 20000}
	}
	r := newColdStartRig(t, interval)
	ctx := withTimeout(t, 20*time.Minute)
	r.grow(ctx, "small", 3)
	r.grow(ctx, "medium", 2*interval+7)
	// One GET each for the catalog entry, the creation record, the hint
	// and the checkpoint, the log after the checkpoint (less than two
	// intervals: a checkpoint is written a moment after its version) and
	// the first missing record.
	bound := 3 * (4 + 2*interval + 1)
	var gets []int
	for _, n := range sizes {
		r.grow(ctx, "big", n)
		took, reqs := r.coldStart()
		t.Logf("cold start after %d versions of big: %v, requests %v", n, took.Round(time.Millisecond), reqs)
		if reqs[s3test.GetObject] > bound || reqs[s3test.ListObjects] > 2 {
			t.Errorf("after %d versions the cold start made %d GETs and %d LISTs, want at most %d and 2", n, reqs[s3test.GetObject], reqs[s3test.ListObjects], bound)
		}
		gets = append(gets, reqs[s3test.GetObject])
		r.check(ctx, fmt.Sprintf("after %d versions", n))
	}
	if gets[1] > gets[0]+2*interval {
		t.Errorf("the GETs at a cold start grew with the versions: %v for %v versions", gets, sizes)
	}
}

// BenchmarkColdStartNoIndex (LAKE_BENCH_BIG=1): meta on versitygw with
// 20,000 versions of one table and no index starts, first from a stage
// without checkpoints (every log record is read: the "without" metrics),
// then from the same stage once a checkpoint exists (ns/op).
func BenchmarkColdStartNoIndex(b *testing.B) {
	if os.Getenv("LAKE_BENCH_BIG") == "" {
		b.Skip("set LAKE_BENCH_BIG=1: it builds a table of 20,000 versions on versitygw first")
	}
	const versions = 20000
	// Reading 20,000 log records one by one takes longer than a start
	// normally may.
	defer func(d time.Duration) { startTimeout = d }(startTimeout)
	startTimeout = 10 * time.Minute
	r := newColdStartRig(b, 0)
	ctx := withTimeout(b, 30*time.Minute)
	r.grow(ctx, "big", versions)
	without, reqs := r.coldStart()
	withoutGets := reqs[s3test.GetObject]

	// A leader with checkpoints on writes one for the versions it loads.
	r.interval = 100
	r.meta.kill(syscall.SIGTERM)
	r.startMeta()
	r.waitCheckpoint(ctx, b)
	var with []time.Duration
	var gets int
	for b.Loop() {
		took, reqs := r.coldStart()
		with = append(with, took)
		gets = reqs[s3test.GetObject]
	}
	slices.Sort(with)
	b.ReportMetric(float64(without.Milliseconds()), "ms-without-checkpoints")
	b.ReportMetric(float64(withoutGets), "GETs-without-checkpoints")
	b.ReportMetric(float64(with[len(with)/2].Milliseconds()), "ms-with-checkpoints")
	b.ReportMetric(float64(gets), "GETs-with-checkpoints")
	b.ReportMetric(0, "ns/op")
	r.check(ctx, "after the cold starts")
}

// waitCheckpoint waits (bounded) until the bucket holds a checkpoint hint.
func (r *coldStartRig) waitCheckpoint(ctx context.Context, t testing.TB) {
	t.Helper()
	cl := r.gw.Client(t)
	for range 600 {
		l, err := cl.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(r.bucket), Prefix: aws.String("lake/_lake/tables/")})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range l.Contents {
			if strings.HasSuffix(aws.ToString(o.Key), "/checkpoints/_last.json") {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("no checkpoint in the bucket after 60s")
}
