package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/internal/fstree"
)

// TestHostileSQLChangesNothing sends the statements that once broke a
// real `lake serve` (a logging file at the name of the next log record, a
// profile at a future one, logging that made every later statement fail,
// reads of the table log through file functions) through the SQL
// endpoint. Each is refused naming its function; nothing appears in the
// stage or in a directory outside it; appends keep working, and so does a
// restart of the process on the same data.
func TestHostileSQLChangesNothing(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "lake-data")
	stage := filepath.Join(dataDir, "stage")
	outside := filepath.Join(dir, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0", "--data-dir", dataDir}
	p := startLake(t, args...)
	endpoint := "grpc://" + p.Addr()
	runLake(t, endpoint, "table", "create", "clips")
	file := filepath.Join(dir, "a.txt")
	if err := os.WriteFile(file, []byte("first"), 0o644); err != nil {
		t.Fatal(err)
	}
	runLake(t, endpoint, "put", file, "--table", "clips")

	logDirs, err := filepath.Glob(filepath.Join(stage, "_lake", "tables", "*", "log"))
	if err != nil || len(logDirs) != 1 {
		t.Fatalf("table log directories %v (%v)", logDirs, err)
	}
	logDir := logDirs[0]
	next := func(v int) string { return filepath.Join(logDir, fmt.Sprintf("%020d.json", v)) }
	before := tree(t, stage)

	probes := []struct{ sql, fn string }{
		{"SELECT * FROM enable_logging(storage='file', storage_path='" + outside + "/x')", "enable_logging"},
		{"SELECT * FROM enable_logging(storage='file', storage_path='" + next(2) + "')", "enable_logging"},
		{"SELECT * FROM enable_profiling(format='json', save_location='" + next(11) + "')", "enable_profiling"},
		{"SELECT * FROM enable_logging('QueryLog')", "enable_logging"},
		{"SELECT message FROM duckdb_logs()", "duckdb_logs"},
		{"SELECT * FROM glob('" + stage + "/_lake/**')", "glob"},
		{"SELECT * FROM read_text('" + next(1) + "')", "read_text"},
		{"SELECT * FROM read_json('" + logDir + "/*.json')", "read_json"},
		{"SELECT * FROM read_parquet('" + stage + "/_lake/tables/*/data/*.parquet')", "read_parquet"},
		{"SELECT * FROM parquet_metadata('" + stage + "/_lake/tables/*/data/*.parquet')", "parquet_metadata"},
		{"SELECT * FROM sniff_csv('" + next(1) + "')", "sniff_csv"},
		{"WITH x AS (SELECT * FROM Read_Text('" + next(1) + "')) SELECT * FROM x", "read_text"},
		{"SELECT * FROM clips, LATERAL (SELECT * FROM main.read_text(clips.name)) t", "read_text"},
	}
	ctx := withTimeout(t, 2*time.Minute)
	c, err := client.Connect(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, pr := range probes {
		_, err := queryCount(ctx, c, pr.sql)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `"`+pr.fn+`" is not allowed`) {
			t.Errorf("%s: %v, want InvalidArgument naming %s", pr.sql, err, pr.fn)
		}
		// The engine keeps answering every client.
		if n, err := queryCount(ctx, c, "SELECT * FROM clips"); err != nil || n != 1 {
			t.Fatalf("after %s: SELECT: %d rows, %v", pr.sql, n, err)
		}
	}
	if after := tree(t, stage); after != before {
		t.Errorf("the stage changed:\nbefore\n%s\nafter\n%s", before, after)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("%s holds %v", outside, entries)
	}

	// Appends keep working, then a restart on the same data works.
	runLake(t, endpoint, "put", file, "--table", "clips")
	p.kill(15)
	p = startLake(t, args...)
	endpoint = "grpc://" + p.Addr()
	runLake(t, endpoint, "put", file, "--table", "clips")
	out := runLake(t, endpoint, "sql", "SELECT count(*) AS n FROM clips", "--format", "csv")
	if !strings.Contains(out, "\n3") {
		t.Fatalf("count after three puts and a restart:\n%s", out)
	}
}

// tree describes every file under dir.
func tree(t *testing.T, dir string) string {
	t.Helper()
	s, err := fstree.Describe(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
