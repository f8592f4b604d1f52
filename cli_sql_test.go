//go:build duckdb_arrow

package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakedata/lake/roles/query"
)

// TestCLISQL runs every command through a query endpoint, `lake sql`
// included.
func TestCLISQL(t *testing.T) {
	f := newCLIFixture(t)
	qcfg := query.DefaultConfig()
	qcfg.Listen, qcfg.Meta, qcfg.CacheDir = "127.0.0.1:0", strings.TrimPrefix(f.endpoint, "grpc://"), filepath.Join(t.TempDir(), "cache")
	q, err := query.Open(context.Background(), qcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close(context.Background()) })
	f.endpoint = "grpc://" + q.Addr().String()

	f.mustRun("table", "create", "docs", "--schema", "name utf8, file file, created_at timestamp, pages int64")
	f.mustRun("put", writeTemp(t, "a.txt", "aaa"), "--table", "docs", "--set", "pages=3")
	f.mustRun("put", writeTemp(t, "b.txt", "bb"), "--table", "docs")

	out := f.mustRun("sql", "SELECT name, pages, file FROM docs ORDER BY name", "--format", "json")
	type row struct {
		Name  string
		Pages *int64
		File  struct {
			Key    string
			Size   int64
			SHA256 string
		}
	}
	var rows []row
	for _, l := range lines(out) {
		var row row
		if err := json.Unmarshal([]byte(l), &row); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		rows = append(rows, row)
	}
	if len(rows) != 2 || rows[0].Name != "a.txt" || rows[0].Pages == nil || *rows[0].Pages != 3 || rows[1].Pages != nil ||
		rows[0].File.Size != 3 || rows[0].File.SHA256 != sha([]byte("aaa")) || !strings.HasSuffix(rows[1].File.Key, "b.txt") {
		t.Errorf("json:\n%s", out)
	}

	csv := lines(f.mustRun("sql", "SELECT name, file.size AS size FROM docs ORDER BY name", "--format", "csv"))
	if strings.Join(csv, "|") != "name,size|a.txt,3|b.txt,2" {
		t.Errorf("csv: %q", csv)
	}
	table := lines(f.mustRun("sql", "SELECT name, pages FROM docs ORDER BY name"))
	if len(table) != 3 || strings.Join(strings.Fields(table[2]), " ") != "b.txt NULL" {
		t.Errorf("table:\n%s", strings.Join(table, "\n"))
	}
	if _, err := f.run("", "sql", "DELETE FROM docs"); err == nil {
		t.Error("a DELETE ran")
	}
}
