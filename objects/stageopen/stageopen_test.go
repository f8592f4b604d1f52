package stageopen

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/lakedata/lake/objects/local"
	"github.com/lakedata/lake/objects/s3"
	"github.com/lakedata/lake/wire/lakepb"
)

func TestDescribe(t *testing.T) {
	o := S3Options{Region: "eu-west-1", Endpoint: "http://127.0.0.1:9000", PathStyle: true}
	d, err := Describe("s3://bucket/some/prefix/", o)
	if err != nil {
		t.Fatal(err)
	}
	if d.Kind != "s3" || d.Bucket != "bucket" || d.Prefix != "some/prefix" || d.Region != o.Region ||
		d.Endpoint != o.Endpoint || !d.PathStyle || d.RootUri != "s3://bucket/some/prefix" {
		t.Fatalf("s3 descriptor %v", d)
	}
	dir := t.TempDir()
	d, err = Describe(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	// S3 settings do not leak into a local stage's descriptor.
	if d.Kind != "file" || d.LocalPath != dir || d.Endpoint != "" || d.Region != "" {
		t.Fatalf("local descriptor %v", d)
	}
	if _, err := Describe("ftp://host/x", o); err == nil {
		t.Fatal("an unsupported scheme was described")
	}
}

func TestOpenPicksTheBackend(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "stage")
	st, err := Open(ctx, &lakepb.StageDescriptor{Kind: "file", LocalPath: dir, RootUri: "file://" + dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ls, ok := st.(*local.Store); !ok || ls.Dir() != dir {
		t.Fatalf("file descriptor opened %T", st)
	}
	ls := st.(*local.Store)
	defer ls.Close()
	// Opening an S3 stage makes no request, so no gateway is needed here.
	st, err = Open(ctx, &lakepb.StageDescriptor{Kind: "s3", Bucket: "b", Prefix: "p", Region: "us-east-1", Endpoint: "http://127.0.0.1:1", PathStyle: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.(*s3.Store); !ok {
		t.Fatalf("s3 descriptor opened %T", st)
	}
	if _, err := Open(ctx, &lakepb.StageDescriptor{Kind: "ftp"}, nil); err == nil {
		t.Fatal("an unknown kind was opened")
	}
}
