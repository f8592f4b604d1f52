//go:build linux

package s3

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lakedata/lake/internal/s3test"
	"github.com/lakedata/lake/internal/tcpproxy"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/checkpoint"
)

// benchLakePartSizes are the part sizes BenchmarkUpload2GiB runs lake
// with, under the name lake<MiB>, besides DefaultPartSize (named lake).
var benchLakePartSizes = []int64{16 << 20, 32 << 20, 64 << 20}

// Environment of BenchmarkUpload2GiB.
const (
	envBenchBig  = "LAKE_BENCH_BIG"  // "1" runs it (it writes a 2 GiB file)
	envBenchSize = "LAKE_BENCH_SIZE" // object size in MiB instead of 2048

	// The re-executed test binary of the peak RSS measurement.
	envRSSChild    = "LAKE_BENCH_RSS_CHILD"
	envRSSEndpoint = "LAKE_BENCH_RSS_ENDPOINT"
	envRSSBucket   = "LAKE_BENCH_RSS_BUCKET"
	envRSSFile     = "LAKE_BENCH_RSS_FILE"
	envRSSDir      = "LAKE_BENCH_RSS_DIR"
)

// uploadExtras holds the once-per-process measurements of
// BenchmarkUpload2GiB (the benchmark function runs once with b.N = 1 and
// again with the -benchtime count; they are made in the first call only).
var uploadExtras struct {
	done    bool
	metrics map[string]float64
}

// BenchmarkUpload2GiB uploads one file of random bytes to versitygw on
// loopback, alternating in each iteration between
//
//	lake:    Store.PutPathResumable (the whole file hashed first,
//	         per-part SHA-256 checksums, default part size and
//	         concurrency);
//	lake<N>: the same with N MiB parts, for each other size of
//	         benchLakePartSizes;
//	tmdef:   the AWS transfer manager with its defaults;
//	tm64x4:  the transfer manager with 64 MiB parts × concurrency 4;
//
// and reports each one's MB/s and each lake's / (the faster transfer
// manager).
// Once per process it also measures a resume after a cancel at 50 %
// (bytes sent again, through a counting proxy, and the speed of re-hashing
// the finished parts) and the peak RSS increase of one lake upload in a
// fresh process.
func BenchmarkUpload2GiB(b *testing.B) {
	size := int64(2 << 30)
	if v := os.Getenv(envBenchSize); v != "" {
		mib, err := strconv.Atoi(v)
		if err != nil || mib < 1 {
			b.Fatalf("%s=%q: want a size in MiB", envBenchSize, v)
		}
		size = int64(mib) << 20
	} else if os.Getenv(envBenchBig) != "1" {
		b.Skipf("writes a 2 GiB file: set %s=1 (or %s to a size in MiB)", envBenchBig, envBenchSize)
	}
	ctx := context.Background()
	srv := s3test.Shared(b)
	bucket := srv.NewBucket(b)
	srv.SetEnv(b)
	client := srv.Client(b)
	dir := b.TempDir()
	file := filepath.Join(dir, "data")
	writeRandomFile(b, file, size)

	openStore := func(partSize int64) *Store {
		cfg := DefaultConfig()
		cfg.Bucket, cfg.Endpoint, cfg.PathStyle = bucket, srv.Endpoint, true
		cfg.PartSize = partSize
		store, err := Open(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		return store
	}
	tmDefault := transfermanager.New(client)
	tm64 := transfermanager.New(client, func(o *transfermanager.Options) {
		o.PartSizeBytes = 64 << 20
		o.Concurrency = 4
	})

	del := func(key string) {
		if _, err := client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); err != nil {
			b.Fatalf("delete %s: %v", key, err)
		}
	}
	viaLake := func(partSize int64) func(string) error {
		store := openStore(partSize)
		return func(key string) error {
			sess, err := checkpoint.Open(filepath.Join(dir, "ckpt", key))
			if err != nil {
				return err
			}
			defer sess.Close()
			in, err := store.PutPathResumable(ctx, key, file, sess, objects.PutOptions{})
			if err != nil {
				return err
			}
			if in.Size != size {
				return fmt.Errorf("uploaded %d bytes, want %d", in.Size, size)
			}
			return sess.Remove()
		}
	}
	viaTM := func(tm *transfermanager.Client) func(string) error {
		return func(key string) error {
			f, err := os.Open(file)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = tm.UploadObject(ctx, &transfermanager.UploadObjectInput{
				Bucket: aws.String(bucket), Key: aws.String(key), Body: f,
			})
			return err
		}
	}
	type config struct {
		name   string
		upload func(key string) error
		took   time.Duration
	}
	configs := []config{
		{"lake", viaLake(DefaultPartSize), 0},
		{"tmdef", viaTM(tmDefault), 0},
		{"tm64x4", viaTM(tm64), 0},
	}
	for _, ps := range benchLakePartSizes {
		if ps != DefaultPartSize {
			configs = append(configs, config{fmt.Sprintf("lake%d", ps>>20), viaLake(ps), 0})
		}
	}

	// One untimed upload first: whichever configuration went first right
	// after the file was written came out slowest every time (whatever it
	// was), and without this that was always lake's default.
	if err := configs[1].upload("warmup"); err != nil {
		b.Fatalf("warm-up: %v", err)
	}
	del("warmup")

	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range configs {
			c := &configs[(i+j)%len(configs)] // rotate who goes first
			key := fmt.Sprintf("%s-%d", c.name, i)
			start := time.Now()
			if err := c.upload(key); err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
			c.took += time.Since(start)
			b.StopTimer()
			del(key)
			b.StartTimer()
		}
	}
	b.StopTimer()

	mbps := func(d time.Duration) float64 { return float64(size) * float64(b.N) / d.Seconds() / 1e6 }
	bestTM := max(mbps(configs[1].took), mbps(configs[2].took))
	for _, c := range configs {
		b.ReportMetric(mbps(c.took), c.name+"_MB/s")
		if strings.HasPrefix(c.name, "lake") {
			b.ReportMetric(mbps(c.took)/bestTM, c.name+"/besttm")
		}
	}

	if !uploadExtras.done {
		uploadExtras.done = true
		uploadExtras.metrics = map[string]float64{}
		measureResume(b, srv, bucket, file, size, uploadExtras.metrics)
		measureRSS(b, srv, bucket, file, uploadExtras.metrics)
	}
	for unit, v := range uploadExtras.metrics {
		b.ReportMetric(v, unit)
	}
}

// writeRandomFile writes size random bytes to path.
func writeRandomFile(b *testing.B, path string, size int64) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	rng := rand.NewChaCha8([32]byte{1, 2, 3})
	buf := make([]byte, 8<<20)
	for left := size; left > 0; {
		n := min(left, int64(len(buf)))
		rng.Read(buf[:n])
		if _, err := f.Write(buf[:n]); err != nil {
			b.Fatal(err)
		}
		left -= n
	}
	// Written back before the first timed upload, so that it does not
	// share the disk with the flush of the whole file.
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

// measureResume uploads the file with a checkpoint session through a
// counting proxy, cancels it once half its bytes are stored, and resumes
// it. It reports the bytes sent beyond the object's size by both runs
// together (what the cancel wasted), against the in-flight bound of
// Concurrency parts, and the speed of the resume's re-hash of finished
// parts: their bytes divided by the time from the first Progress report
// with ResumedParts > 0 (made after ListParts, before the first part is
// read) to the last report of a verified part. Verified parts are reported
// on the reading goroutine, sent ones from sendPart, which tells them
// apart.
func measureResume(b *testing.B, srv *s3test.Server, bucket, file string, size int64, m map[string]float64) {
	u, err := url.Parse(srv.Endpoint)
	if err != nil {
		b.Fatal(err)
	}
	px := tcpproxy.Start(b, u.Host)
	cfg := DefaultConfig()
	cfg.Bucket, cfg.Endpoint, cfg.PathStyle = bucket, "http://"+px.Addr, true
	store, err := Open(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	sess, err := checkpoint.Open(filepath.Join(b.TempDir(), "resume.ckpt"))
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Close()

	ctx, cancel := context.WithCancel(context.Background())
	var sentAtCancel int64
	_, err = store.PutPathResumable(ctx, "resume", file, sess, objects.PutOptions{Progress: func(p objects.Progress) {
		if p.Done >= size/2 && ctx.Err() == nil {
			sentAtCancel = px.Sent()
			cancel()
		}
	}})
	cancel()
	if !errors.Is(err, context.Canceled) {
		b.Fatalf("cancelled upload: %v, want context.Canceled", err)
	}
	sentFirst := px.Sent()
	px.Reset()
	cp, err := sess.Load()
	if err != nil {
		b.Fatal(err)
	}
	var recorded int64
	for _, p := range cp.Parts {
		recorded += p.Length
	}

	var (
		last, verified     int64
		vStart, vEnd       time.Time
		resumedParts, sent int
	)
	start := time.Now()
	in, err := store.PutPathResumable(context.Background(), "resume", file, sess, objects.PutOptions{Progress: func(p objects.Progress) {
		now := time.Now() // reports are serialized by the tracker
		delta := p.Done - last
		last = p.Done
		if p.ResumedParts > 0 && vStart.IsZero() {
			vStart, resumedParts = now, p.ResumedParts
		}
		if delta == 0 {
			return
		}
		if calledFromSendPart() {
			sent++
			return
		}
		verified += delta
		vEnd = now
	}})
	total := time.Since(start)
	if err != nil {
		b.Fatalf("resume: %v", err)
	}
	if in.Size != size {
		b.Fatalf("resume uploaded %d bytes, want %d", in.Size, size)
	}
	sentSecond := px.Sent()
	if verified != recorded || resumedParts != len(cp.Parts) {
		b.Fatalf("resume verified %d bytes in %d parts, the checkpoint had %d in %d", verified, resumedParts, recorded, len(cp.Parts))
	}
	wasted := sentFirst + sentSecond - size
	partSize := cp.PartSize
	m["resent_MiB"] = float64(wasted) / (1 << 20)
	m["inflight_bound_MiB"] = float64(int64(cfg.Concurrency)*partSize) / (1 << 20)
	m["verified_MiB"] = float64(verified) / (1 << 20)
	m["verify_GB/s"] = float64(verified) / vEnd.Sub(vStart).Seconds() / 1e9
	b.Logf("resume: proxy had seen %d bytes when the cancel was made, %d by the end of the cancelled run", sentAtCancel, sentFirst)
	b.Logf("resume: cancelled at %d of %d bytes with %d parts recorded; proxy saw %d bytes before the cancel and %d in the resume (%d over the object's size); resume verified %d bytes in %v (%.2f GB/s), sent %d parts, took %v in all",
		recorded, size, len(cp.Parts), sentFirst, sentSecond, wasted, verified, vEnd.Sub(vStart), m["verify_GB/s"], sent, total)
	if err := sess.Remove(); err != nil {
		b.Fatal(err)
	}
}

// calledFromSendPart reports whether the caller was called by
// (*resumable).sendPart, i.e. the Progress report is of an uploaded part.
func calledFromSendPart() bool {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, "(*resumable).sendPart") {
			return true
		}
		if !more {
			return false
		}
	}
}

// measureRSS re-executes the test binary to run one lake upload
// (TestUploadBenchRSSChild) in a fresh process, and reports its peak RSS
// increase against Concurrency × PartSize + 64 MiB.
func measureRSS(b *testing.B, srv *s3test.Server, bucket, file string, m map[string]float64) {
	// Through sh, which forks the test binary: Linux carries a process's
	// Maxrss across execve, and os/exec starts children with CLONE_VM, so
	// a direct child would start with this process's peak. sh's forked
	// child starts afresh; the trailing command keeps sh from exec'ing it.
	cmd := exec.Command("/bin/sh", "-c", `"$@"; status=$?; exit $status`, "sh",
		os.Args[0], "-test.run=^TestUploadBenchRSSChild$", "-test.bench=^$", "-test.count=1")
	cmd.Env = append(os.Environ(),
		envRSSChild+"=1",
		envRSSEndpoint+"="+srv.Endpoint,
		envRSSBucket+"="+bucket,
		envRSSFile+"="+file,
		envRSSDir+"="+b.TempDir(),
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("RSS child: %v\n%s", err, out)
	}
	var before, after, hwm int64
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	found := false
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "LAKE_RSS before_kib=%d after_kib=%d vmhwm_after_kib=%d", &before, &after, &hwm); err == nil {
			found = true
		}
	}
	b.Logf("RSS child: Maxrss %d KiB before the upload, %d KiB after; VmHWM after %d KiB", before, after, hwm)
	if !found {
		b.Fatalf("RSS child printed no result:\n%s", out)
	}
	m["rss_before_MiB"] = float64(before) / 1024
	m["rss_peak_inc_MiB"] = float64(after-before) / 1024
	m["rss_bound_MiB"] = float64(DefaultConcurrency*DefaultPartSize+64<<20) / (1 << 20)
}

// TestUploadBenchRSSChild is the fresh process of measureRSS: one lake
// upload (PutPathResumable, default configuration), with
// getrusage(RUSAGE_SELF).Maxrss read before and after. It does nothing
// unless BenchmarkUpload2GiB started it.
func TestUploadBenchRSSChild(t *testing.T) {
	if os.Getenv(envRSSChild) != "1" {
		t.Skip("run by BenchmarkUpload2GiB")
	}
	ctx := context.Background()
	cfg := DefaultConfig()
	cfg.Bucket, cfg.Endpoint, cfg.PathStyle = os.Getenv(envRSSBucket), os.Getenv(envRSSEndpoint), true
	store, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := checkpoint.Open(filepath.Join(os.Getenv(envRSSDir), "rss.ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	runtime.GC()
	before := maxRSSKiB(t)
	if _, err := store.PutPathResumable(ctx, "rss", os.Getenv(envRSSFile), sess, objects.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	after := maxRSSKiB(t)
	fmt.Printf("LAKE_RSS before_kib=%d after_kib=%d vmhwm_after_kib=%d\n", before, after, vmHWMKiB(t))
	if err := store.Delete(ctx, "rss"); err != nil {
		t.Fatal(err)
	}
	if err := sess.Remove(); err != nil {
		t.Fatal(err)
	}
}

// vmHWMKiB is VmHWM of /proc/self/status, the peak RSS of this address
// space (a cross-check of Maxrss).
func vmHWMKiB(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// maxRSSKiB is the process's peak resident set size in KiB (Linux units).
func maxRSSKiB(t *testing.T) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return int64(ru.Maxrss)
}
