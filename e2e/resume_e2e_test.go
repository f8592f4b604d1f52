package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lakedata/lake/internal/s3test"
	"github.com/lakedata/lake/internal/tcpproxy"
)

// runLakeEnv runs the CLI with extra environment and returns its output
// and error (a killed process is an error).
func runLakeEnv(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(lakeBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestPutResumesAfterSIGKILLAndCancelAborts: a lake put of a multi-part
// file is killed after its second part is checkpointed; the same put run
// again sends only what was missing and commits exactly one row; another
// killed put is listed by `lake uploads ls` and removed, parts and all, by
// `lake uploads cancel`.
func TestPutResumesAfterSIGKILLAndCancelAborts(t *testing.T) {
	gw := s3test.Start(t)
	gw.SetEnv(t)
	bucket := gw.NewBucket(t)
	host := strings.TrimPrefix(gw.Endpoint, "http://")
	proxy := tcpproxy.Start(t, host)
	dir := t.TempDir()
	p := startLake(t, "serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0",
		"--data-dir", filepath.Join(dir, "data"), "--stage", "s3://"+bucket+"/lake",
		"--s3-endpoint", "http://"+proxy.Addr)
	endpoint := "grpc://" + p.Addr()
	cpDir := filepath.Join(dir, "checkpoints")
	common := []string{"--endpoint", endpoint, "--checkpoint-dir", cpDir}
	runLake(t, endpoint, "table", "create", "models")

	const size = 40 << 20 // 16 MiB parts: 3 parts
	content := make([]byte, size)
	rand.Read(content)
	file := filepath.Join(dir, "weights.bin")
	if err := os.WriteFile(file, content, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runLakeEnv(t, []string{"LAKE_FAILPOINTS=s3-after-part-checkpoint=2"},
		append([]string{"put", file, "--table", "models", "--no-progress"}, common...)...)
	if err == nil {
		t.Fatalf("the armed put survived:\n%s", out)
	}
	before := settle(proxy) // the killed put's buffered bytes first
	out, err = runLakeEnv(t, nil, append([]string{"put", file, "--table", "models", "--json", "--no-progress"}, common...)...)
	if err != nil {
		t.Fatalf("resumed put: %v\n%s", err, out)
	}
	resent := proxy.Sent() - before
	// At most the one part that was not checkpointed, plus requests.
	if resent > 16<<20+1<<20 {
		t.Fatalf("the resumed put sent %d bytes; two of three parts were already done", resent)
	}
	t.Logf("the resumed put sent %d bytes to S3 for a %d-byte file", resent, size)
	sum := sha256.Sum256(content)
	want := hex.EncodeToString(sum[:])
	if !strings.Contains(out, want) {
		t.Fatalf("resumed put output lacks the sha256:\n%s", out)
	}
	csv := runLake(t, endpoint, "sql", "SELECT count(*) AS n, min(file.sha256) AS sha FROM models", "--format", "csv")
	if !strings.Contains(csv, "1,"+want) {
		t.Fatalf("after the resumed put the table holds:\n%s", csv)
	}

	// A second file, killed after its first part, is then cancelled.
	other := filepath.Join(dir, "other.bin")
	if err := os.WriteFile(other, content[:20<<20], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runLakeEnv(t, []string{"LAKE_FAILPOINTS=s3-after-part-checkpoint=1"},
		append([]string{"put", other, "--table", "models", "--no-progress"}, common...)...); err == nil {
		t.Fatal("the armed put survived")
	}
	ls, err := runLakeEnv(t, nil, "uploads", "ls", "--checkpoint-dir", cpDir)
	if err != nil || !strings.Contains(ls, other) || !strings.Contains(ls, "1/2") {
		t.Fatalf("uploads ls: %v\n%s", err, ls)
	}
	if out, err := runLakeEnv(t, nil, append([]string{"uploads", "cancel", other}, common...)...); err != nil {
		t.Fatalf("uploads cancel: %v\n%s", err, out)
	}
	mpu, err := gw.Client(t).ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	if len(mpu.Uploads) != 0 {
		t.Fatalf("%d multipart uploads left pending", len(mpu.Uploads))
	}
	entries, _ := filepath.Glob(filepath.Join(cpDir, "*.json"))
	if len(entries) != 0 {
		t.Fatalf("checkpoints left: %v", entries)
	}
	if csv := runLake(t, endpoint, "sql", "SELECT count(*) AS n FROM models", "--format", "csv"); !strings.Contains(csv, "\n1") {
		t.Fatalf("the cancelled put added a row:\n%s", csv)
	}
}
