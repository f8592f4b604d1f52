//go:build duckdb_arrow

package query_test

import (
	"context"
	"testing"

	"github.com/lakedata/lake/roles/query"
	"github.com/lakedata/lake/wire"
)

// TestNoStateReachesTheNextClient: one client tries to turn logging on,
// a second runs a statement with a secret in it, a third looks for it.
// Nothing of the second's SQL is visible, and no engine connection is
// kept for reuse.
func TestNoStateReachesTheNextClient(t *testing.T) {
	l := newLake(t)
	l.createTable("clips", wire.DefaultSchema())
	l.putFile("clips", "a.mp4", []byte("aaa"))
	ctx := context.Background()

	for _, q := range []string{
		"SELECT * FROM enable_logging('QueryLog')",
		"SELECT * FROM enable_logging(level='DEBUG')",
		"SELECT * FROM enable_profiling()",
		"SELECT setseed(0.5)",
	} {
		_, _, err := l.sqlQuery(q)
		wantRefused(t, q, err, "is not allowed in lake SQL")
	}
	const secret = "s3cr3t-marker-4711"
	if got := l.scalar(t, "SELECT '"+secret+"' || name FROM clips"); got != secret+"a.mp4" {
		t.Fatalf("second client: %v", got)
	}
	for _, q := range []string{
		"SELECT message FROM duckdb_logs()",
		"SELECT * FROM duckdb_logs_parsed('QueryLog')",
		"SELECT current_query()",
		"SELECT * FROM duckdb_prepared_statements()",
	} {
		_, _, err := l.sqlQuery(q)
		wantRefused(t, q, err, "is not allowed in lake SQL")
	}
	// The engine itself kept no log of it.
	n, err := query.EngineScalar(l.query, "SELECT count(*) FROM duckdb_logs() WHERE message LIKE '%"+secret+"%'")
	if err != nil {
		t.Fatal(err)
	}
	if n.(int64) != 0 {
		t.Errorf("the engine's log holds the secret %d times", n)
	}
	for _, setting := range []string{"enable_logging", "enable_profiling"} {
		v, err := query.EngineScalar(l.query, "SELECT current_setting('"+setting+"')::VARCHAR")
		if err != nil {
			t.Fatal(err)
		}
		switch v {
		case nil, "", "0", "false": // off, as at start
		default:
			t.Errorf("%s = %v after the clients", setting, v)
		}
	}
	if _, err := l.sql.Execute(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	if idle := query.EngineIdleConns(l.query); idle != 0 {
		t.Errorf("%d engine connections kept for reuse, want 0", idle)
	}
}
