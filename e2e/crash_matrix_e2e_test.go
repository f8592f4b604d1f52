package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lakedata/lake/internal/s3test"
	"github.com/lakedata/lake/internal/tcpproxy"
	"github.com/lakedata/lake/objects/checkpoint"
)

// crashRig is one lake serve whose S3 stage (versitygw) is reached
// through a counting proxy, shared by the cases of a test.
type crashRig struct {
	gw       *s3test.Server
	bucket   string
	proxy    *tcpproxy.Proxy
	endpoint string
}

func newCrashRig(t *testing.T) *crashRig {
	t.Helper()
	gw := s3test.Start(t)
	gw.SetEnv(t)
	bucket := gw.NewBucket(t)
	proxy := tcpproxy.Start(t, strings.TrimPrefix(gw.Endpoint, "http://"))
	p := startLake(t, "serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0",
		"--data-dir", filepath.Join(t.TempDir(), "data"), "--stage", "s3://"+bucket+"/lake",
		"--s3-endpoint", "http://"+proxy.Addr)
	return &crashRig{gw: gw, bucket: bucket, proxy: proxy, endpoint: "grpc://" + p.Addr()}
}

// putArgs is `lake put file` into table with checkpoints in cpDir.
//
// Every case puts the same file, so each asks for no dedup: else the
// second case on would find the first's object and upload nothing.
func (r *crashRig) putArgs(file, table, cpDir string, extra ...string) []string {
	args := []string{"put", file, "--table", table, "--no-progress", "--no-dedup", "--checkpoint-dir", cpDir, "--endpoint", r.endpoint}
	return append(args, extra...)
}

// noPendingUploads fails when any multipart upload is left in the bucket.
func (r *crashRig) noPendingUploads(t *testing.T) {
	t.Helper()
	out, err := r.gw.Client(t).ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: aws.String(r.bucket)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Uploads) != 0 {
		var keys []string
		for _, u := range out.Uploads {
			keys = append(keys, aws.ToString(u.Key))
		}
		t.Fatalf("%d multipart uploads left pending: %v", len(out.Uploads), keys)
	}
}

// rows is the table's row count, min sha256 and min size as CSV.
func (r *crashRig) rows(t *testing.T, table string) string {
	t.Helper()
	return runLake(t, r.endpoint, "sql",
		fmt.Sprintf("SELECT count(*) AS n, min(file.sha256) AS sha, min(file.size) AS size FROM %s", table), "--format", "csv")
}

// checkpoints lists the checkpoint files in dir.
func checkpoints(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// onlyCheckpoint decodes the one checkpoint in dir.
func onlyCheckpoint(t *testing.T, dir string) *checkpoint.Checkpoint {
	t.Helper()
	files := checkpoints(t, dir)
	if len(files) != 1 {
		t.Fatalf("want one checkpoint in %s, found %v", dir, files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	cp, err := checkpoint.Decode(b)
	if err != nil {
		t.Fatalf("decode %s: %v", files[0], err)
	}
	return cp
}

// writeRandomFile writes size random bytes to path and returns their
// hex SHA-256.
func writeRandomFile(t *testing.T, path string, size int64) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(f, h), rand.Reader, size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// killAfterSent starts the put and SIGKILLs it once the proxy has counted
// at least threshold bytes since the start.
func (r *crashRig) killAfterSent(t *testing.T, threshold int64, args []string) {
	t.Helper()
	cmd := exec.Command(lakeBin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := r.proxy.Sent()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(60 * time.Second)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			t.Fatalf("the put exited (%v) before sending %d bytes (sent %d):\n%s", err, threshold, r.proxy.Sent()-start, out.String())
		case <-deadline:
			cmd.Process.Kill()
			<-exited
			t.Fatalf("the put sent only %d of %d bytes in 60s:\n%s", r.proxy.Sent()-start, threshold, out.String())
		case <-tick.C:
			if sent := r.proxy.Sent() - start; sent >= threshold {
				if err := cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				<-exited
				t.Logf("killed the put after the proxy counted %d bytes", sent)
				return
			}
		}
	}
}

// TestPutCrashMatrixEndsInOneRow: a lake put of a big multi-part file
// killed at each crash point of docs/architecture.md's "Resumable
// uploads" table and run again commits exactly one row, leaves no
// multipart upload or checkpoint behind, and resends no more than what
// the checkpoint did not hold.
func TestPutCrashMatrixEndsInOneRow(t *testing.T) {
	r := newCrashRig(t)
	const size = 256 << 20
	const slack = 2 << 20
	file := filepath.Join(t.TempDir(), "weights.bin")
	sum := writeRandomFile(t, file, size)

	type bound int
	const (
		missingParts bound = iota // ≤ parts not in the checkpoint + slack
		noParts                   // < 1 MiB
	)
	cases := []struct {
		name       string
		failpoints string // "" kills the put by the proxy's count
		bound      bound
		duplicate  bool // the rerun's append is answered duplicate
	}{
		{name: "mid-part", bound: missingParts},
		{name: "after-part-upload", failpoints: "s3-after-part-upload=3", bound: missingParts},
		{name: "after-complete", failpoints: "s3-after-complete", bound: noParts},
		{name: "after-append", failpoints: "client-after-append", bound: noParts, duplicate: true},
		{name: "before-append", failpoints: "client-before-append", bound: noParts},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			table := fmt.Sprintf("crash%d", i)
			cpDir := filepath.Join(t.TempDir(), "checkpoints")
			runLake(t, r.endpoint, "table", "create", table)
			args := r.putArgs(file, table, cpDir)

			if tc.failpoints == "" {
				r.killAfterSent(t, size*4/10, args)
			} else {
				out, err := runLakeEnv(t, []string{"LAKE_FAILPOINTS=" + tc.failpoints}, args...)
				if err == nil {
					t.Fatalf("the armed put survived:\n%s", out)
				}
			}
			cp := onlyCheckpoint(t, cpDir)
			if cp.PartSize <= 0 || cp.Source.Size != size {
				t.Fatalf("checkpoint: part size %d, source size %d", cp.PartSize, cp.Source.Size)
			}
			t.Logf("checkpoint before the rerun: %d parts of %d bytes, completed %v, commit id %q",
				len(cp.Parts), cp.PartSize, cp.Completed, cp.CommitID)

			// A killed process's bytes still in socket buffers drain
			// through the proxy after it died: count from when they stop.
			before := settle(r.proxy)
			out, err := runLakeEnv(t, nil, r.putArgs(file, table, cpDir, "--json")...)
			if err != nil {
				t.Fatalf("the rerun failed: %v\n%s", err, out)
			}
			resent := r.proxy.Sent() - before
			var limit int64
			switch tc.bound {
			case missingParts:
				limit = size - int64(len(cp.Parts))*cp.PartSize + slack
			case noParts:
				limit = 1<<20 - 1
			}
			t.Logf("the rerun sent %d bytes to S3 (limit %d)", resent, limit)
			if resent > limit {
				t.Errorf("the rerun sent %d bytes, more than %d", resent, limit)
			}

			var line struct {
				SHA256    string `json:"sha256"`
				Size      int64  `json:"size"`
				Duplicate bool   `json:"duplicate"`
			}
			if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &line); err != nil {
				t.Fatalf("the rerun's --json output: %v\n%s", err, out)
			}
			if line.SHA256 != sum || line.Size != size {
				t.Errorf("the rerun put sha256 %s, %d bytes; want %s, %d", line.SHA256, line.Size, sum, size)
			}
			if line.Duplicate != tc.duplicate {
				t.Errorf("the rerun's append: duplicate %v, want %v", line.Duplicate, tc.duplicate)
			}
			if csv := r.rows(t, table); !strings.Contains(csv, fmt.Sprintf("\n1,%s,%d", sum, size)) {
				t.Errorf("after the rerun the table holds:\n%s", csv)
			}
			r.noPendingUploads(t)
			if left := checkpoints(t, cpDir); len(left) != 0 {
				t.Errorf("checkpoints left: %v", left)
			}
		})
	}
}

// TestPutOfChangedSourceIsRefused: a put killed after its first part is
// checkpointed is not resumed once the file has grown: the rerun fails
// naming the size change and adds no row; `lake uploads cancel` then
// drops the upload and its checkpoint.
func TestPutOfChangedSourceIsRefused(t *testing.T) {
	r := newCrashRig(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "weights.bin")
	writeRandomFile(t, file, 40<<20)
	cpDir := filepath.Join(dir, "checkpoints")
	runLake(t, r.endpoint, "table", "create", "changed")
	args := r.putArgs(file, "changed", cpDir)

	if out, err := runLakeEnv(t, []string{"LAKE_FAILPOINTS=s3-after-part-checkpoint=1"}, args...); err == nil {
		t.Fatalf("the armed put survived:\n%s", out)
	}
	if cp := onlyCheckpoint(t, cpDir); len(cp.Parts) != 1 {
		t.Fatalf("the killed put checkpointed %d parts, want 1", len(cp.Parts))
	}
	f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("more bytes")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	before := settle(r.proxy)
	out, err := runLakeEnv(t, nil, args...)
	if err == nil {
		t.Fatalf("the put of the changed file succeeded:\n%s", out)
	}
	if resent := r.proxy.Sent() - before; resent >= 1<<20 {
		t.Errorf("the refused put sent %d bytes to S3", resent)
	} else {
		t.Logf("the refused put sent %d bytes to S3", resent)
	}
	if !strings.Contains(out, "size changed") {
		t.Fatalf("the refusal does not name the size change:\n%s", out)
	}
	t.Logf("the rerun was refused: %s", strings.TrimSpace(out))
	if csv := r.rows(t, "changed"); !strings.Contains(csv, "\n0,") {
		t.Fatalf("the refused put added a row:\n%s", csv)
	}

	if out, err := runLakeEnv(t, nil, "uploads", "cancel", file, "--checkpoint-dir", cpDir, "--endpoint", r.endpoint); err != nil {
		t.Fatalf("uploads cancel: %v\n%s", err, out)
	}
	r.noPendingUploads(t)
	if left := checkpoints(t, cpDir); len(left) != 0 {
		t.Fatalf("checkpoints left: %v", left)
	}
}

// settle waits until the proxy's count has not moved for 300 ms (bounded
// by 10 s) and returns it.
func settle(p *tcpproxy.Proxy) int64 {
	last := p.Sent()
	for range 34 {
		time.Sleep(300 * time.Millisecond)
		now := p.Sent()
		if now == last {
			return now
		}
		last = now
	}
	return last
}
