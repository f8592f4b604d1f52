package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lakedata/lake/internal/s3test"
	"github.com/lakedata/lake/objects/checkpoint"
	"github.com/lakedata/lake/objects/presigned"
)

// onceStage is a lake serve on one kind of stage, with a way to list the
// objects it holds.
type onceStage struct {
	endpoint string
	objects  func(t *testing.T) []string // keys under the stage's objects/
}

func startOnceLocal(t *testing.T) *onceStage {
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	dir := t.TempDir()
	stageDir := filepath.Join(dir, "stage")
	p := startLake(t, "serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0",
		"--data-dir", filepath.Join(dir, "data"), "--stage", "file://"+stageDir)
	return &onceStage{endpoint: "grpc://" + p.Addr(), objects: func(t *testing.T) []string {
		t.Helper()
		var keys []string
		root := filepath.Join(stageDir, "objects")
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type().IsRegular() {
				rel, _ := filepath.Rel(stageDir, p)
				keys = append(keys, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return keys
	}}
}

func startOnceS3(t *testing.T) *onceStage {
	gw := s3test.Start(t)
	gw.SetEnv(t)
	bucket := gw.NewBucket(t)
	p := startLake(t, "serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0",
		"--data-dir", filepath.Join(t.TempDir(), "data"), "--stage", "s3://"+bucket+"/lake",
		"--s3-endpoint", gw.Endpoint)
	return &onceStage{endpoint: "grpc://" + p.Addr(), objects: func(t *testing.T) []string {
		t.Helper()
		out, err := gw.Client(t).ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{
			Bucket: aws.String(bucket), Prefix: aws.String("lake/objects/")})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, o := range out.Contents {
			keys = append(keys, strings.TrimPrefix(aws.ToString(o.Key), "lake/"))
		}
		return keys
	}}
}

// TestPutOfSmallFileCommitsOnceAfterCrash: a lake put of a 64 KiB file,
// which both stages upload in one request and for which neither writes a
// checkpoint of its own, is killed right before its append is sent and
// right after it is acknowledged; the same lake put run again uploads
// nothing, appends the first attempt's key with its commit id, and the
// table holds exactly one row (the rerun after the acknowledged append is
// answered duplicate). No checkpoint is left.
func TestPutOfSmallFileCommitsOnceAfterCrash(t *testing.T) {
	const size = 64 << 10
	for _, st := range []struct {
		name  string
		start func(t *testing.T) *onceStage
	}{{"local", startOnceLocal}, {"versitygw", startOnceS3}} {
		t.Run(st.name, func(t *testing.T) {
			stage := st.start(t)
			for i, tc := range []struct {
				failpoint string
				committed bool // the killed put's append committed
			}{
				{failpoint: "client-before-append"},
				{failpoint: "client-after-append", committed: true},
			} {
				t.Run(tc.failpoint, func(t *testing.T) {
					table := fmt.Sprintf("once%d", i)
					dir := t.TempDir()
					file := filepath.Join(dir, "small.bin")
					sum := writeRandomFile(t, file, size)
					cpDir := filepath.Join(dir, "checkpoints")
					runLake(t, stage.endpoint, "table", "create", table)
					objectsBefore := len(stage.objects(t))
					args := []string{"put", file, "--table", table, "--no-progress", "--checkpoint-dir", cpDir,
						"--endpoint", stage.endpoint, "--json"}

					if out, err := runLakeEnv(t, []string{"LAKE_FAILPOINTS=" + tc.failpoint}, args...); err == nil {
						t.Fatalf("the armed put survived:\n%s", out)
					}
					cp := onlyCheckpoint(t, cpDir)
					// Through upload grants (S3) a one-part file is a
					// granted upload too; its record names the object alike.
					if (cp.Kind != checkpoint.KindSingle && cp.Kind != checkpoint.KindGranted) || cp.Table != table || cp.CommitID == "" || cp.SHA256 != sum || cp.Source.Size != size {
						t.Fatalf("the killed put's checkpoint: kind %q table %q commit id %q sha256 %s size %d",
							cp.Kind, cp.Table, cp.CommitID, cp.SHA256, cp.Source.Size)
					}
					key, ok := presigned.GrantedKey(cp.Binding)
					if !ok {
						t.Fatalf("the checkpoint's key %s is outside its prefix %q", cp.Binding.Key, cp.Binding.Prefix)
					}
					if got := stage.objects(t); len(got) != objectsBefore+1 || !slices.Contains(got, key) {
						t.Fatalf("the stage holds %v, want the checkpoint's %s among %d", got, key, objectsBefore+1)
					}
					want := "\n0,"
					if tc.committed {
						want = fmt.Sprintf("\n1,%s,", key)
					}
					if csv := keyRows(t, stage.endpoint, table); !strings.HasPrefix(csv[strings.Index(csv, "\n"):], want) {
						t.Fatalf("after the kill the table holds:\n%s", csv)
					}
					ls, err := runLakeEnv(t, nil, "uploads", "ls", "--checkpoint-dir", cpDir)
					if err != nil || !strings.Contains(ls, file) || !strings.Contains(ls, "1/1") || !strings.Contains(ls, "row not yet committed") {
						t.Errorf("uploads ls (%v):\n%s", err, ls)
					}

					out, err := runLakeEnv(t, nil, args...)
					if err != nil {
						t.Fatalf("the rerun failed: %v\n%s", err, out)
					}
					var line struct {
						Key       string `json:"key"`
						SHA256    string `json:"sha256"`
						Size      int64  `json:"size"`
						Version   int64  `json:"version"`
						Duplicate bool   `json:"duplicate"`
					}
					if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &line); err != nil {
						t.Fatalf("the rerun's --json output: %v\n%s", err, out)
					}
					if line.Key != key || line.SHA256 != sum || line.Size != size {
						t.Errorf("the rerun put key %s sha256 %s, %d bytes; want %s %s, %d", line.Key, line.SHA256, line.Size, key, sum, size)
					}
					if line.Duplicate != tc.committed || line.Version != 1 {
						t.Errorf("the rerun's append: version %d duplicate %v, want 1 %v", line.Version, line.Duplicate, tc.committed)
					}
					if csv := keyRows(t, stage.endpoint, table); !strings.Contains(csv, fmt.Sprintf("\n1,%s,%s\n", key, sum)) {
						t.Errorf("after the rerun the table holds:\n%s", csv)
					}
					if got := stage.objects(t); len(got) != objectsBefore+1 {
						t.Errorf("the rerun uploaded again: the stage holds %v", got)
					}
					if left, _ := filepath.Glob(filepath.Join(cpDir, "*")); len(left) != 0 {
						t.Errorf("checkpoint files left: %v", left)
					}
				})
			}
		})
	}
}

// keyRows is the table's row count, min key and min sha256 as CSV.
func keyRows(t *testing.T, endpoint, table string) string {
	t.Helper()
	return runLake(t, endpoint, "sql",
		fmt.Sprintf("SELECT count(*) AS n, min(file.key) AS k, min(file.sha256) AS sha FROM %s", table), "--format", "csv")
}
