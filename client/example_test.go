package client_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/objects/local"
	"github.com/lakedata/lake/roles/meta"
)

// startMeta runs a metadata service on a local stage in dir, as a
// stand-in for `lake serve`, and returns its address and a stop function.
func startMeta(dir string) (string, func(), error) {
	stageDir := filepath.Join(dir, "stage")
	stage, err := local.Open(stageDir, nil)
	if err != nil {
		return "", nil, err
	}
	cfg := meta.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.Stage, cfg.StageURI = stage, "file://"+stageDir
	svc, err := meta.Open(context.Background(), cfg)
	if err != nil {
		stage.Close()
		return "", nil, err
	}
	return svc.Addr().String(), func() { svc.Close(context.Background()); stage.Close() }, nil
}

func Example() {
	dir, err := os.MkdirTemp("", "lake-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	addr, stop, err := startMeta(dir)
	if err != nil {
		panic(err)
	}
	defer stop()

	ctx := context.Background()
	c, err := client.Connect(ctx, "grpc://"+addr)
	if err != nil {
		panic(err)
	}
	defer c.Close()

	// name utf8, file FILE, created_at timestamp: the default schema.
	if _, err := c.CreateTable(ctx, "notes", nil, false); err != nil {
		panic(err)
	}
	res, err := c.PutReader(ctx, "notes", "hello.txt", strings.NewReader("hello, lake"), client.PutOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println("version", res.Version, "size", res.File.Size)

	rc, err := c.Open(ctx, res.File) // verifies size and SHA-256 at EOF
	if err != nil {
		panic(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s\n", b)
	// Output:
	// version 1 size 11
	// hello, lake
}
