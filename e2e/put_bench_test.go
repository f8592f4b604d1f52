package e2e

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakedata/lake/internal/s3test"
)

// BenchmarkPutMany measures `lake put` of many files as a user runs it,
// one process against a running `lake serve`, side by side with the tools
// it is held against, on the same files and in the same run:
//
//   - local: 2,000 × 64 KiB into the embedded `lake serve` on a local
//     stage, against writing the same files durably (each written and
//     fsync'd, 8 writers at a time, the directory fsync'd at the end);
//   - s3-small: the same files to versitygw, against `rclone copy` with its
//     defaults and --expect-continue-timeout 0 (versitygw never answers
//     100 Continue; rclone would wait a second on every large PUT);
//   - s3-large: 100 × 8 MiB to versitygw, against `aws s3 cp --recursive`.
//
// Each side runs LAKE_BENCH_ROUNDS times (default 3), alternating, into a
// fresh table or bucket; the metrics are the medians in files/s and the
// ratio lake ÷ the other. It runs only with LAKE_BENCH_PUT=1, and skips
// the S3 comparisons when rclone or aws is missing. LAKE_BENCH_AWS names
// the aws program when the first on PATH is not the one to measure.
func BenchmarkPutMany(b *testing.B) {
	if os.Getenv("LAKE_BENCH_PUT") != "1" {
		b.Skip("set LAKE_BENCH_PUT=1 to run the put benchmarks (several minutes, a few GB of disk)")
	}
	rounds := 3
	if s := os.Getenv("LAKE_BENCH_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("LAKE_BENCH_ROUNDS=%q", s)
		}
		rounds = n
	}
	small := writeBenchFiles(b, filepath.Join(b.TempDir(), "small"), 2000, 64<<10)

	b.Run("local", func(b *testing.B) {
		dir := b.TempDir()
		p := startLake(b, "serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0",
			"--data-dir", filepath.Join(dir, "data"))
		lake := newBenchLake(b, "grpc://"+p.Addr())
		durable := func(round int) {
			durableWrite(b, small, filepath.Join(dir, fmt.Sprintf("durable-%d", round)), 8)
		}
		compare(b, rounds, len(small.files), lake.put(small), "durable-writer", durable)
		lake.checkRows()
	})

	b.Run("s3-small", func(b *testing.B) {
		gw := startBenchGateway(b)
		rclone := rcloneCopy(b, gw, small)
		compare(b, rounds, len(small.files), gw.lake.put(small), "rclone", rclone)
		gw.lake.checkRows()
	})

	b.Run("s3-large", func(b *testing.B) {
		gw := startBenchGateway(b)
		large := writeBenchFiles(b, filepath.Join(b.TempDir(), "large"), 100, 8<<20)
		aws := awsCopy(b, gw, large)
		compare(b, rounds, len(large.files), gw.lake.put(large), "aws", aws)
		gw.lake.checkRows()
	})
}

// benchFiles is a directory of files of random bytes.
type benchFiles struct {
	dir   string
	files []string
	size  int64
}

func writeBenchFiles(b *testing.B, dir string, n int, size int64) benchFiles {
	b.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	fs := benchFiles{dir: dir, size: size}
	buf := make([]byte, size)
	for i := range n {
		rand.Read(buf)
		p := filepath.Join(dir, fmt.Sprintf("img%05d.jpg", i))
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			b.Fatal(err)
		}
		fs.files = append(fs.files, p)
	}
	return fs
}

// compare runs lake's side and the other's rounds times each, alternating,
// and reports their median rates and the ratio.
func compare(b *testing.B, rounds, files int, lake func(round int), other string, run func(round int)) {
	b.Helper()
	var lakeRates, otherRates []float64
	rate := func(fn func(int), round int) float64 {
		t0 := time.Now()
		fn(round)
		return float64(files) / time.Since(t0).Seconds()
	}
	for round := range rounds {
		lakeRates = append(lakeRates, rate(lake, round))
		otherRates = append(otherRates, rate(run, round))
		b.Logf("round %d: lake %.0f files/s, %s %.0f files/s, ratio %.2f", round+1, lakeRates[round], other, otherRates[round], lakeRates[round]/otherRates[round])
	}
	l, o := median(lakeRates), median(otherRates)
	b.ReportMetric(l, "lake-files/s")
	b.ReportMetric(o, other+"-files/s")
	b.ReportMetric(l/o, "ratio")
	b.ReportMetric(0, "ns/op")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// benchLake runs `lake put -r` processes, with their defaults, against
// endpoint, each round into a table of its own.
type benchLake struct {
	b        *testing.B
	endpoint string
	tables   int
	filled   []filledTable // by the rounds, for checkRows
}

type filledTable struct {
	table string
	rows  int
}

func newBenchLake(b *testing.B, endpoint string) *benchLake {
	return &benchLake{b: b, endpoint: endpoint}
}

func (l *benchLake) put(fs benchFiles) func(round int) {
	return func(int) {
		l.tables++
		table := fmt.Sprintf("put%d", l.tables)
		runLakeBench(l.b, "table", "create", table, "--endpoint", l.endpoint)
		args := []string{"put", "-r", fs.dir, "--table", table, "--no-progress", "--endpoint", l.endpoint}
		if jobs := os.Getenv("LAKE_BENCH_JOBS"); jobs != "" {
			args = append(args, "--jobs", jobs) // the default (8) otherwise
		}
		runLakeBench(l.b, args...)
		l.filled = append(l.filled, filledTable{table, len(fs.files)})
	}
}

// checkRows fails the benchmark unless every table a round filled holds
// one row per file: a round counts only if it did the work. It runs after
// the timed rounds.
func (l *benchLake) checkRows() {
	l.b.Helper()
	for _, f := range l.filled {
		cmd := exec.Command(lakeBin, "sql", "SELECT count(*) AS n FROM "+f.table, "--format", "csv", "--endpoint", l.endpoint)
		out, err := cmd.Output()
		if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "\n"+strconv.Itoa(f.rows)) {
			l.b.Fatalf("after lake put -r of %d files, %s holds %q (%v)", f.rows, f.table, out, err)
		}
	}
	l.filled = nil
}

func runLakeBench(b *testing.B, args ...string) {
	b.Helper()
	cmd := exec.Command(lakeBin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &out
	if err := cmd.Run(); err != nil {
		b.Fatalf("lake %s: %v\n%s", args[0], err, out.String())
	}
}

// durableWrite copies the files into dst the way a careful writer does:
// create, write, fsync, close, writers at a time; then the directory once.
func durableWrite(b *testing.B, fs benchFiles, dst string, writers int) {
	b.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		b.Fatal(err)
	}
	paths := make(chan string)
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for p := range paths {
				if err := writeSynced(p, filepath.Join(dst, filepath.Base(p))); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for _, p := range fs.files {
		paths <- p
	}
	close(paths)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	d, err := os.Open(dst)
	if err == nil {
		err = d.Sync()
		d.Close()
	}
	if err != nil {
		b.Fatal(err)
	}
}

func writeSynced(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// benchGateway is versitygw with the embedded `lake serve` on a stage in
// one of its buckets; the credentials reach every process through the
// environment (s3test.SetEnv).
type benchGateway struct {
	srv  *s3test.Server
	lake *benchLake
}

func startBenchGateway(b *testing.B) *benchGateway {
	b.Helper()
	gw := s3test.Start(b)
	gw.SetEnv(b)
	bucket := gw.NewBucket(b)
	p := startLake(b, "serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0",
		"--data-dir", filepath.Join(b.TempDir(), "data"), "--stage", "s3://"+bucket+"/lake", "--s3-endpoint", gw.Endpoint)
	return &benchGateway{srv: gw, lake: newBenchLake(b, "grpc://"+p.Addr())}
}

// rcloneCopy returns a round of `rclone copy` of fs into a fresh bucket,
// with rclone's defaults, configured through its environment only.
func rcloneCopy(b *testing.B, gw *benchGateway, fs benchFiles) func(round int) {
	b.Helper()
	bin := benchTool(b, "rclone", "")
	cfg := filepath.Join(b.TempDir(), "rclone.conf")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		b.Fatal(err)
	}
	env := append(toolEnv(),
		"RCLONE_CONFIG="+cfg,
		"RCLONE_CONFIG_VGW_TYPE=s3",
		"RCLONE_CONFIG_VGW_PROVIDER=Other",
		"RCLONE_CONFIG_VGW_ACCESS_KEY_ID="+gw.srv.AccessKey,
		"RCLONE_CONFIG_VGW_SECRET_ACCESS_KEY="+gw.srv.SecretKey,
		"RCLONE_CONFIG_VGW_REGION="+gw.srv.Region,
		"RCLONE_CONFIG_VGW_ENDPOINT="+gw.srv.Endpoint,
	)
	return func(int) {
		bucket := gw.srv.NewBucket(b)
		runTool(b, env, bin, "copy", fs.dir, "vgw:"+bucket+"/files", "--expect-continue-timeout", "0")
	}
}

// awsCopy returns a round of `aws s3 cp --recursive` of fs into a fresh
// bucket.
func awsCopy(b *testing.B, gw *benchGateway, fs benchFiles) func(round int) {
	b.Helper()
	bin := benchTool(b, "aws", os.Getenv("LAKE_BENCH_AWS"))
	return func(int) {
		bucket := gw.srv.NewBucket(b)
		runTool(b, toolEnv(), bin, "--endpoint-url", gw.srv.Endpoint, "s3", "cp", "--recursive", "--only-show-errors",
			fs.dir, "s3://"+bucket+"/files")
	}
}

// toolEnv is the environment for rclone and aws: SetEnv's, without the
// variables it blanks (an empty AWS_PROFILE is a profile named "" to the
// aws CLI) and without a CA bundle, which the gateway's plain HTTP does
// not need and rclone's SDK cannot load into its own transport.
func toolEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "AWS_") && (v == "" || k == "AWS_CA_BUNDLE") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// benchTool finds a program to compare with, or skips the benchmark.
func benchTool(b *testing.B, name, override string) string {
	b.Helper()
	if override != "" {
		name = override
	}
	bin, err := exec.LookPath(name)
	if err != nil {
		b.Skipf("%s is not installed (Debian: apt-get install rclone awscli): %v", name, err)
	}
	out, _ := exec.Command(bin, "--version").CombinedOutput()
	version, _, _ := strings.Cut(string(out), "\n")
	b.Logf("%s: %s", bin, version)
	return bin
}

func runTool(b *testing.B, env []string, bin string, args ...string) {
	b.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s %s: %v\n%s", filepath.Base(bin), args[0], err, out.String())
	}
}
