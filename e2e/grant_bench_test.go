package e2e

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lakedata/lake/internal/s3test"
	"github.com/lakedata/lake/internal/tcpproxy"
)

// BenchmarkPresignedPut measures a large `lake put` by a client with no
// AWS credentials (upload grants, presigned part URLs) side by side, in
// one run, with what it is held against, on the same gateway through the
// same counting proxy:
//
//   - direct: `lake put` with the client's own credentials against a lake
//     serve started with --direct-uploads (today's direct upload);
//   - tm: the AWS transfer manager for Go (feature/s3/transfermanager,
//     its defaults), in this process;
//   - aws: `aws s3 cp` (the AWS CLI's transfer manager), when installed.
//
// Each round writes a fresh file of LAKE_BENCH_SIZE MiB (default 2048)
// plus the round number in bytes, so no earlier round's object has its
// size and the presigned put takes its usual path (hashing while it
// uploads), then runs each side once, rotating the order. Afterwards it
// puts the first round's file again under another name (dedup: the time,
// and the bytes the proxy counted), and a fresh file of exactly that size
// (the service asks the client to hash it first, since an object of that
// size exists). LAKE_BENCH_ROUNDS sets the rounds (default 2). It runs
// only with LAKE_BENCH_GRANT=1.
func BenchmarkPresignedPut(b *testing.B) {
	if os.Getenv("LAKE_BENCH_GRANT") != "1" {
		b.Skip("set LAKE_BENCH_GRANT=1 to run the presigned upload benchmark (several minutes, a few GB of disk)")
	}
	mib := benchEnvInt(b, "LAKE_BENCH_SIZE", 2048)
	rounds := benchEnvInt(b, "LAKE_BENCH_ROUNDS", 2)
	size := int64(mib) << 20

	gw := s3test.Start(b)
	proxy := tcpproxy.Start(b, strings.TrimPrefix(gw.Endpoint, "http://"))
	dir := b.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		b.Fatal(err)
	}
	noCreds := noAWSEnv(empty)
	creds := append(slices.Clone(noCreds), "AWS_ACCESS_KEY_ID="+gw.AccessKey, "AWS_SECRET_ACCESS_KEY="+gw.SecretKey, "AWS_REGION="+gw.Region)
	serve := func(name string, extra ...string) string {
		bucket := gw.NewBucket(b)
		args := append([]string{"serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0",
			"--data-dir", filepath.Join(dir, name), "--stage", "s3://" + bucket + "/lake", "--s3-endpoint", "http://" + proxy.Addr}, extra...)
		endpoint := "grpc://" + startLakeEnv(b, creds, args...).Addr()
		runLakeBenchEnv(b, creds, endpoint, "table", "create", "clips")
		return endpoint
	}
	presigned := serve("presigned")
	direct := serve("direct", "--direct-uploads")
	put := func(env []string, endpoint string) func(path, name string) {
		return func(path, name string) {
			runLakeBenchEnv(b, env, endpoint, "put", path, "--table", "clips", "--name", name, "--no-progress",
				"--checkpoint-dir", filepath.Join(dir, "checkpoints"))
		}
	}
	tmBucket := gw.NewBucket(b)
	tm := transfermanager.New(s3.NewFromConfig(aws.Config{
		Region:      gw.Region,
		Credentials: credentials.NewStaticCredentialsProvider(gw.AccessKey, gw.SecretKey, ""),
	}, func(o *s3.Options) {
		o.BaseEndpoint = aws.String("http://" + proxy.Addr)
		o.UsePathStyle = true
	}))
	sides := []struct {
		name string
		run  func(path, name string)
	}{
		{"presigned", put(noCreds, presigned)},
		{"direct", put(creds, direct)},
		{"tm", func(path, name string) {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			if _, err := tm.UploadObject(context.Background(), &transfermanager.UploadObjectInput{
				Bucket: aws.String(tmBucket), Key: aws.String(name), Body: f,
			}); err != nil {
				b.Fatal(err)
			}
		}},
	}
	if bin, err := exec.LookPath(cmp.Or(os.Getenv("LAKE_BENCH_AWS"), "aws")); err == nil {
		awsBucket := gw.NewBucket(b)
		sides = append(sides, struct {
			name string
			run  func(path, name string)
		}{"aws", func(path, name string) {
			runTool(b, creds, bin, "--endpoint-url", "http://"+proxy.Addr, "s3", "cp", "--only-show-errors", path, "s3://"+awsBucket+"/"+name)
		}})
	} else {
		b.Logf("aws is not installed: no `aws s3 cp` side")
	}

	speeds := make(map[string][]float64)
	var first string
	b.ResetTimer()
	for range b.N {
		for round := range rounds {
			path := filepath.Join(dir, fmt.Sprintf("round-%d.bin", round))
			writeRandom(b, path, size+int64(round), uint64(1000+round))
			if first == "" {
				first = path
			}
			for i := range sides {
				s := sides[(i+round)%len(sides)]
				start := time.Now()
				s.run(path, fmt.Sprintf("r%d-%s.bin", round, s.name))
				speeds[s.name] = append(speeds[s.name], float64(size)/time.Since(start).Seconds()/1e6)
			}
			if path != first {
				os.Remove(path)
			}
		}
	}
	b.StopTimer()
	best, bestName := 0.0, ""
	for _, s := range sides {
		m := median(speeds[s.name])
		b.ReportMetric(m, s.name+"-MB/s")
		b.Logf("%s: %.1f MB/s median of %v", s.name, m, speeds[s.name])
		if s.name != "presigned" && m > best {
			best, bestName = m, s.name
		}
	}
	ratio := median(speeds["presigned"]) / best
	b.ReportMetric(ratio, "presigned/best")
	b.Logf("presigned ÷ best other (%s): %.2f", bestName, ratio)

	// The same content again, under another name.
	before := settle(proxy)
	start := time.Now()
	put(noCreds, presigned)(first, "again.bin")
	took := time.Since(start)
	again := settle(proxy) - before
	if again >= 1<<20 {
		b.Fatalf("the same content again sent %d bytes: it was not deduplicated", again)
	}
	b.ReportMetric(took.Seconds(), "again-s")
	b.ReportMetric(float64(again), "again-bytes")
	b.Logf("the same %d MiB again: %v, %d bytes sent", mib, took.Round(time.Millisecond), again)

	// Fresh content of a size the lake already holds: hashed first.
	same := filepath.Join(dir, "same-size.bin")
	writeRandom(b, same, size, 99)
	before = settle(proxy)
	start = time.Now()
	put(noCreds, presigned)(same, "same-size.bin")
	hashFirst := float64(size) / time.Since(start).Seconds() / 1e6
	if sent := settle(proxy) - before; sent < size {
		b.Fatalf("fresh content of a known size sent %d bytes of %d: it was taken for a duplicate", sent, size)
	}
	b.ReportMetric(hashFirst, "hash-first-MB/s")
	b.Logf("fresh content of a size the lake holds (hashed before the upload): %.1f MB/s", hashFirst)
}

// runLakeBenchEnv runs the CLI with exactly env against endpoint and
// fails the benchmark unless it exits 0.
func runLakeBenchEnv(b *testing.B, env []string, endpoint string, args ...string) {
	b.Helper()
	cmd := exec.Command(lakeBin, append(args, "--endpoint", endpoint)...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("lake %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// benchEnvInt reads a positive integer setting, or def when it is unset.
func benchEnvInt(b *testing.B, name string, def int) int {
	b.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}
