package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/internal/memcg"
)

// streamRows is the size of the table TestSelectStarStaysWithinMemoryLimit
// reads: at about 130 bytes a row, its result is larger than the role's
// memory limit.
const (
	streamRows    = 10_000_000
	streamBatch   = 500_000
	streamPayload = 120
	streamBound   = memoryLimit + 256<<20
)

// TestSelectStarStaysWithinMemoryLimit reads SELECT * of a 10M-row table
// (about 1.3 GB) through a Flight SQL client from a real `lake serve`
// with --memory-limit 1GB in a memory cgroup, once as fast as it can and
// once slowly, each from a freshly started process, and requires the
// process's peak RSS to stay within the limit + 256 MiB: the role holds
// no more of the result than DuckDB's streaming buffer and the Flight
// stream's few batches, whatever the size of the result or the speed of
// the reader. Loading the table takes minutes, so it runs with
// LAKE_BENCH_BIG=1.
func TestSelectStarStaysWithinMemoryLimit(t *testing.T) {
	if os.Getenv("LAKE_BENCH_BIG") != "1" {
		t.Skip("set LAKE_BENCH_BIG=1 to load a 10M-row table and read it back")
	}
	group, err := memcg.New("lake-e2e-stream", 4<<30)
	if errors.Is(err, memcg.ErrUnavailable) {
		t.Skip("no memory cgroup can be created here (needs root and a memory controller)")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { group.Close() })
	dataDir := filepath.Join(t.TempDir(), "lake-data")
	serve := func() *proc {
		p := startLakeHook(t, nil, group.Add, "serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0",
			"--data-dir", dataDir, "--memory-limit", "1GB", "--statement-timeout", "10m")
		t.Cleanup(func() { p.kill(9) })
		return p
	}
	ctx := withTimeout(t, 30*time.Minute)

	loader := serve()
	c, err := client.Connect(ctx, "grpc://"+loader.Addr())
	if err != nil {
		t.Fatal(err)
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "payload", Type: arrow.BinaryTypes.String},
	}, nil)
	if _, err := c.CreateTable(ctx, "wide", schema, false); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for first := int64(0); first < streamRows; first += streamBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		ids, payloads := b.Field(0).(*array.Int64Builder), b.Field(1).(*array.StringBuilder)
		for i := first; i < first+streamBatch; i++ {
			ids.Append(i)
			payloads.Append(fmt.Sprintf("%0*d", streamPayload, i*7919))
		}
		rec := b.NewRecordBatch()
		b.Release()
		_, err := c.Append(ctx, "wide", rec, client.AppendOptions{})
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	loader.kill(syscall.SIGTERM)
	t.Logf("loaded %d rows in %v", streamRows, time.Since(start).Round(time.Second))

	for _, read := range []struct {
		name  string
		pause time.Duration // after every batch
	}{{"fast", 0}, {"slow", 2 * time.Millisecond}} {
		t.Run(read.name, func(t *testing.T) {
			p := serve()
			defer p.kill(syscall.SIGTERM)
			c, err := client.Connect(ctx, "grpc://"+p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			rdr, err := c.Query(ctx, "SELECT * FROM wide")
			if err != nil {
				t.Fatal(err)
			}
			var rows, batches int64
			for rdr.Next() {
				rows += rdr.RecordBatch().NumRows()
				batches++
				time.Sleep(read.pause)
			}
			err = rdr.Err()
			rdr.Release()
			if err != nil {
				t.Fatal(err)
			}
			if rows != streamRows {
				t.Fatalf("read %d rows, want %d", rows, streamRows)
			}
			peak := peakRSS(t, p.cmd.Process.Pid)
			t.Logf("%s read: %d rows in %d batches in %v; peak RSS %d MiB, bound %d MiB",
				read.name, rows, batches, time.Since(start).Round(time.Millisecond), peak>>20, streamBound>>20)
			if peak > streamBound {
				t.Errorf("peak RSS %d MiB, above --memory-limit + 256 MiB = %d MiB", peak>>20, streamBound>>20)
			}
		})
	}
}
