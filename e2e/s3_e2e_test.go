package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lakedata/lake/internal/s3test"
)

// TestWholeLakeOnS3: the embedded default on an S3 stage (versitygw on
// loopback). Catalog, log, data files and objects all land in the bucket;
// the CLI uploads with its own credentials (the AWS default chain, which
// --direct-uploads allows) and SQL reads the data files through the query
// role's cache.
func TestWholeLakeOnS3(t *testing.T) {
	gw := s3test.Start(t)
	gw.SetEnv(t) // the credentials reach lake through the AWS default chain
	bucket := gw.NewBucket(t)
	dir := t.TempDir()
	p := startLake(t, "serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0",
		"--data-dir", filepath.Join(dir, "data"), "--stage", "s3://"+bucket+"/lake", "--s3-endpoint", gw.Endpoint, "--direct-uploads")
	endpoint := "grpc://" + p.Addr()
	runLake(t, endpoint, "table", "create", "clips")

	content := make([]byte, 3<<20)
	rand.Read(content)
	file := filepath.Join(dir, "clip.mp4")
	if err := os.WriteFile(file, content, 0o644); err != nil {
		t.Fatal(err)
	}
	var put struct {
		Key, SHA256 string
		Size        int64
		Version     int64
	}
	if err := json.Unmarshal([]byte(runLake(t, endpoint, "put", file, "--table", "clips", "--json")), &put); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	if put.SHA256 != hex.EncodeToString(sum[:]) || put.Size != int64(len(content)) || put.Version != 1 {
		t.Fatalf("put: %+v", put)
	}
	out := runLake(t, endpoint, "sql", "SELECT name, file.sha256 AS sha FROM clips", "--format", "csv")
	if !strings.Contains(out, "clip.mp4,"+put.SHA256) {
		t.Fatalf("sql:\n%s", out)
	}

	// Everything is in the bucket, under the prefix.
	ctx := context.Background()
	cl := gw.Client(t)
	obj, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("lake/" + put.Key)})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(obj.Body)
	obj.Body.Close()
	if !bytes.Equal(got, content) {
		t.Fatal("the object in the bucket differs from the file")
	}
	if obj.Metadata["sha256"] != put.SHA256 {
		t.Errorf("object metadata sha256 = %q, want %s", obj.Metadata["sha256"], put.SHA256)
	}
	for _, prefix := range []string{"lake/_lake/catalog/", "lake/_lake/tables/"} {
		l, err := cl.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
		if err != nil || len(l.Contents) == 0 {
			t.Errorf("nothing under %s in the bucket: %v", prefix, err)
		}
	}
	// The discover descriptor tells where, never with what credentials.
	if strings.Contains(p.output(), gw.SecretKey) {
		t.Error("the secret key appears in lake's logs")
	}
}
