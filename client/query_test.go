//go:build duckdb_arrow

package client

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	"github.com/lakedata/lake/roles/meta"
	"github.com/lakedata/lake/roles/query"
	"github.com/lakedata/lake/wire"
)

// TestClientQueryThroughQueryRole talks only to a query endpoint: the
// puts are relayed to meta, and SQL sees their rows with FILE values.
func TestClientQueryThroughQueryRole(t *testing.T) {
	f := newFixture(t, nil)
	qcfg := query.DefaultConfig()
	qcfg.Listen, qcfg.Meta, qcfg.CacheDir = "127.0.0.1:0", f.addr, filepath.Join(t.TempDir(), "cache")
	q, err := query.Open(context.Background(), qcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close(context.Background()) })

	c, err := Connect(ctx, "grpc://"+q.Addr().String(), WithCheckpointDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTable(ctx, "docs", nil, false); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, name := range []string{"a.txt", "b.txt"} {
		res, err := c.PutReader(ctx, "docs", name, strings.NewReader("content of "+name), PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, res.File.Key)
	}

	rdr, err := c.Query(ctx, "SELECT name, file FROM docs ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	if !wire.IsFileField(rdr.Schema().Field(1)) {
		t.Errorf("the result's file column lost lake.type=file: %v", rdr.Schema())
	}
	var names, gotKeys []string
	for rdr.Next() {
		rec := rdr.RecordBatch()
		values, _, err := wire.FileValues(rec.Column(1))
		if err != nil {
			t.Fatal(err)
		}
		for i := range int(rec.NumRows()) {
			names = append(names, rec.Column(0).(*array.String).Value(i))
			gotKeys = append(gotKeys, values[i].Key)
		}
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, ",") != "a.txt,b.txt" || strings.Join(gotKeys, ",") != strings.Join(keys, ",") {
		t.Errorf("rows %v %v, want a.txt,b.txt with keys %v", names, gotKeys, keys)
	}

	if _, err := c.Query(ctx, "SELECT * FROM nope"); err == nil {
		t.Error("a query of an unknown table succeeded")
	}
}

// connCounter counts the connections a gRPC server accepts.
type connCounter struct{ n atomic.Int64 }

func (c *connCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (c *connCounter) HandleRPC(context.Context, stats.RPCStats)                         {}
func (c *connCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (c *connCounter) HandleConn(_ context.Context, s stats.ConnStats) {
	if _, ok := s.(*stats.ConnBegin); ok {
		c.n.Add(1)
	}
}

// TestClientConnectsOnlyToQueryForFileInsert: given only the query
// endpoint, the client uploads to the stage and inserts the FILE row; meta
// sees exactly one connection, the query role's.
func TestClientConnectsOnlyToQueryForFileInsert(t *testing.T) {
	var metaConns connCounter
	f := newFixture(t, func(cfg *meta.Config) {
		cfg.ServerOptions = append(cfg.ServerOptions, grpc.StatsHandler(&metaConns))
	})
	qcfg := query.DefaultConfig()
	qcfg.Listen, qcfg.Meta, qcfg.CacheDir = "127.0.0.1:0", f.addr, filepath.Join(t.TempDir(), "cache")
	q, err := query.Open(context.Background(), qcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close(context.Background()) })
	before := metaConns.n.Load()

	c, err := Connect(ctx, "grpc://"+q.Addr().String(), WithCheckpointDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTable(ctx, "clips", nil, false); err != nil {
		t.Fatal(err)
	}
	res, err := c.PutFile(ctx, "clips", writeFile(t, "v.mp4", []byte("video bytes")), PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != 1 {
		t.Fatalf("put: version %d", res.Version)
	}
	if n := metaConns.n.Load() - before; n != 0 {
		t.Fatalf("meta accepted %d connections from the client; it must only know the query endpoint", n)
	}
	if before != 1 {
		t.Fatalf("meta accepted %d connections before the client started, want the query role's one", before)
	}
	rdr, err := c.Query(ctx, "SELECT count(*) FROM clips")
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	var n int64
	for rdr.Next() {
		n += rdr.RecordBatch().NumRows()
	}
	if n != 1 {
		t.Fatalf("count query returned %d rows", n)
	}
}
