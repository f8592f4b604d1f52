//go:build duckdb_arrow

package client

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

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
