//go:build duckdb_arrow

package server

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/lakedata/lake/client"
)

// TestOpenCloseAll: the embedded default on a local stage serves SQL, and
// after Close the same server opens again on the very same ports, data
// dir and stage in this process: ports, the bbolt lock and the stage are
// released (goroutines are checked by TestMain).
func TestOpenCloseAll(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Listen, cfg.MetaListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	var first *Server
	openClose(t, cfg, func(s *Server) {
		first = s
		if s.MetaAddr() == nil || s.QueryAddr() == nil {
			t.Fatalf("role all: meta %v, query %v", s.MetaAddr(), s.QueryAddr())
		}
		cfg.Listen, cfg.MetaListen = s.QueryAddr().String(), s.MetaAddr().String()
		createTable(t, cfg.Listen, "clips")
		runSQL(t, cfg.Listen, "SELECT count(*) FROM clips")
	})
	openClose(t, cfg, func(s *Server) {
		if s == first {
			t.Fatal("the same Server twice")
		}
		runSQL(t, cfg.Listen, "SELECT count(*) FROM clips")
	})
}

func runSQL(t *testing.T, endpoint, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, "grpc://"+endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rr, err := c.Query(ctx, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer rr.Release()
	for rr.Next() {
	}
	if err := rr.Err(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
