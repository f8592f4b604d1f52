package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/internal/s3test"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/stageopen"
	"github.com/lakedata/lake/wire"
)

// gcBenchLiveRows is how many of a benchmark stage's objects rows point
// to; the rest are orphans.
const gcBenchLiveRows = 1000

// BenchmarkGC (LAKE_BENCH_GC=1) times one `gc --grace 0s`, asked of meta
// directly, over a stage holding many objects, most of them orphans and
// gcBenchLiveRows of them named by rows: 100,000 on a local stage, 20,000
// on versitygw. Each iteration writes the orphans again first, with the
// timer stopped. It reports the calls the collection made to the stage:
// S3 requests counted by a proxy between meta and the gateway, and on the
// local stage the system calls of the meta process counted by strace -c
// in one more collection after the timed ones (strace slows it down, so
// that one is not timed).
//
//	LAKE_BENCH_GC=1 go test -tags duckdb_arrow,failpoints -run '^$' -bench BenchmarkGC -benchtime 1x -timeout 30m ./e2e
func BenchmarkGC(b *testing.B) {
	if os.Getenv("LAKE_BENCH_GC") == "" {
		b.Skip("set LAKE_BENCH_GC=1: it writes 100,000 objects to a local stage and 20,000 to versitygw")
	}
	b.Run("local-100000", func(b *testing.B) {
		dir := filepath.Join(b.TempDir(), "stage")
		stage := compactStage{uri: "file://" + dir, flags: []string{"--stage", "file://" + dir}}
		r := newGCBenchRig(b, stage)
		// Straight into the stage directory: a put with its fsyncs would
		// take longer than the collection it sets up.
		write := func(keys []string) {
			for _, k := range keys {
				p := filepath.Join(dir, filepath.FromSlash(k))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					b.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(benchObjectContent(k)), 0o644); err != nil {
					b.Fatal(err)
				}
			}
		}
		r.run(b, 100_000, write, nil)
		syscalls := r.straced(b, 100_000, write)
		for _, name := range []string{"getdents64", "newfstatat", "statx", "openat", "unlinkat", "total"} {
			if n := syscalls[name]; n > 0 {
				b.ReportMetric(float64(n), name+"/gc")
			}
		}
	})
	b.Run("versitygw-20000", func(b *testing.B) {
		gw := s3test.Start(b)
		gw.SetEnv(b)
		proxy := s3test.StartCountingProxy(b, gw.Endpoint)
		uri := "s3://" + gw.NewBucket(b) + "/lake"
		// meta talks to the gateway through the proxy; the benchmark's own
		// writes go around it.
		stage := compactStage{uri: uri, flags: []string{"--stage", uri, "--s3-endpoint", proxy.Endpoint},
			s3: stageopen.S3Options{Endpoint: gw.Endpoint, PathStyle: true}}
		r := newGCBenchRig(b, stage)
		write := func(keys []string) { putConcurrently(b, r.store, keys, 16) }
		r.run(b, 20_000, write, proxy)
	})
}

// gcBenchRig is meta and query over one stage, with table clips holding
// gcBenchLiveRows rows, and the stage opened by the benchmark.
type gcBenchRig struct {
	store objects.Store
	meta  *proc
	cl    *client.Client // of the query role
	admin *client.Client // of meta: a collection outlasts the query role's 10 s relay of an action
	ctx   context.Context
	live  []wire.FileValue
}

func newGCBenchRig(b *testing.B, stage compactStage) *gcBenchRig {
	dir := b.TempDir()
	m := startLake(b, append([]string{"serve", "--role=meta", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "meta"),
		"--compact-min-files", "0"}, stage.flags...)...)
	q := startLake(b, "serve", "--role=query", "--listen", "127.0.0.1:0", "--meta", m.Addr(), "--data-dir", filepath.Join(dir, "query"))
	r := &gcBenchRig{meta: m, ctx: withTimeout(b, 30*time.Minute)}
	d, err := stageopen.Describe(stage.uri, stage.s3)
	if err != nil {
		b.Fatal(err)
	}
	if r.store, err = stageopen.Open(r.ctx, d, nil); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.store.Close() })
	if r.cl, err = client.Connect(r.ctx, "grpc://"+q.Addr()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.cl.Close() })
	if r.admin, err = client.Connect(r.ctx, "grpc://"+m.Addr()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.admin.Close() })
	if _, err := r.cl.CreateTable(r.ctx, "clips", nil, false); err != nil {
		b.Fatal(err)
	}
	keys := make([]string, gcBenchLiveRows)
	for i := range keys {
		keys[i] = objects.NewObjectKey(fmt.Sprintf("live-%05d.bin", i), time.Now())
	}
	putConcurrently(b, r.store, keys, 16)
	// Ten appends of a hundred rows: ten data files to read.
	const perAppend = 100
	for i := 0; i < len(keys); i += perAppend {
		var names []string
		var values []wire.FileValue
		for _, k := range keys[i : i+perAppend] {
			info, err := r.store.Stat(r.ctx, k)
			if err != nil {
				b.Fatal(err)
			}
			sum := sha256.Sum256([]byte(benchObjectContent(k)))
			names = append(names, filepath.Base(k))
			values = append(values, wire.FileValue{Key: k, Size: info.Size, SHA256: hex.EncodeToString(sum[:]), ETag: info.ETag, UploadedAt: time.Now().UTC()})
		}
		rec := wiretest.FileRows(names, values)
		_, err := r.cl.Append(r.ctx, "clips", rec, client.AppendOptions{})
		rec.Release()
		if err != nil {
			b.Fatal(err)
		}
		r.live = append(r.live, values...)
	}
	return r
}

// orphanKeys mints n object keys no row will name.
func orphanKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = objects.NewObjectKey(fmt.Sprintf("orphan-%06d.bin", i), time.Now())
	}
	return keys
}

// run times b.N collections, each over total objects (the live ones and
// fresh orphans write wrote), and reports the S3 requests of the last
// one when proxy is not nil.
func (r *gcBenchRig) run(b *testing.B, total int, write func(keys []string), proxy *s3test.CountingProxy) {
	grace := time.Duration(0)
	var calls map[string]int
	for range b.N {
		b.StopTimer()
		orphans := orphanKeys(total - len(r.live))
		write(orphans)
		if proxy != nil {
			proxy.Take()
		}
		b.StartTimer()
		res, err := r.admin.GC(r.ctx, client.GCOptions{Grace: &grace})
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if res.GetObjects().GetCount() != int64(len(orphans)) || res.GetReferencedObjects() != int64(len(r.live)) {
			b.Fatalf("gc freed %d objects and kept %d referenced, want %d and %d", res.GetObjects().GetCount(), res.GetReferencedObjects(), len(orphans), len(r.live))
		}
		if proxy != nil {
			calls = proxy.Take()
		}
		b.StartTimer()
	}
	b.StopTimer()
	r.checkLive(b)
	b.ReportMetric(float64(total), "objects")
	if proxy != nil {
		// DeleteObject and DeleteObjects both count as Delete.
		for name, n := range calls {
			b.ReportMetric(float64(n), name+"/gc")
		}
	}
}

// straced runs one more collection over total objects with strace -c
// attached to the meta process and returns its system call counts by
// name, and "total".
func (r *gcBenchRig) straced(b *testing.B, total int, write func(keys []string)) map[string]int {
	bin, err := exec.LookPath("strace")
	if err != nil {
		b.Log("no strace: the local stage's system calls are not counted")
		return nil
	}
	write(orphanKeys(total - len(r.live)))
	out := filepath.Join(b.TempDir(), "strace")
	st := exec.Command(bin, "-c", "-f", "-o", out, "-p", strconv.Itoa(r.meta.cmd.Process.Pid))
	stderr, err := st.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := st.Start(); err != nil {
		b.Fatal(err)
	}
	// strace says "Process N attached" once per thread; wait for the first.
	if !bufio.NewScanner(stderr).Scan() {
		b.Fatal("strace did not attach")
	}
	time.Sleep(500 * time.Millisecond) // the other threads
	grace := time.Duration(0)
	_, gcErr := r.admin.GC(r.ctx, client.GCOptions{Grace: &grace})
	_ = st.Process.Signal(syscall.SIGINT)
	_ = st.Wait()
	if gcErr != nil {
		b.Fatal(gcErr)
	}
	return parseStraceSummary(b, out)
}

// parseStraceSummary reads the table strace -c writes: calls by name.
func parseStraceSummary(b *testing.B, path string) map[string]int {
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	calls := map[string]int{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		// % time, seconds, usecs/call, calls, [errors,] syscall
		if len(f) < 5 || strings.HasPrefix(line, "%") || strings.HasPrefix(line, "-") {
			continue
		}
		n, err := strconv.Atoi(f[3])
		if err != nil {
			continue
		}
		calls[f[len(f)-1]] = n
	}
	return calls
}

// checkLive fails b unless every live row's object is still there.
func (r *gcBenchRig) checkLive(b *testing.B) {
	for _, v := range r.live {
		if _, err := r.store.Stat(r.ctx, v.Key); err != nil {
			b.Fatalf("live object %s after gc: %v", v.Key, err)
		}
	}
}

// benchObjectContent is the bytes of the benchmark's object at key.
func benchObjectContent(key string) string { return "object " + key }

// putConcurrently uploads a small object at each key, with writers
// uploads at a time.
func putConcurrently(b *testing.B, store objects.Store, keys []string, writers int) {
	ctx := context.Background()
	next := make(chan string)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				if _, err := store.Put(ctx, k, strings.NewReader(benchObjectContent(k)), objects.PutOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for _, k := range keys {
		select {
		case next <- k:
		case err := <-errs:
			b.Fatal(err)
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}
