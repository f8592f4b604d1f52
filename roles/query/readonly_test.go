//go:build duckdb_arrow

package query_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lakedata/lake/internal/fstree"
	"github.com/lakedata/lake/roles/query"
	"github.com/lakedata/lake/wire"
)

// lakeState is what a refused statement must leave untouched.
type lakeState struct {
	clips, tables, views, databases, sequences int64
	locked, externalAccess, allowedDirs        string
	logging, profiling                         string
	stage                                      string // every file of the stage, with its size
}

func (l *lakeFixture) state(t *testing.T) lakeState {
	t.Helper()
	var s lakeState
	ints := []struct {
		q   string
		dst *int64
	}{
		{"SELECT count(*) FROM clips", &s.clips},
		{"SELECT count(*) FROM duckdb_tables()", &s.tables},
		{"SELECT count(*) FROM duckdb_views()", &s.views},
		{"SELECT count(*) FROM duckdb_databases()", &s.databases},
		{"SELECT count(*) FROM duckdb_sequences()", &s.sequences},
	}
	// Caller SQL may not look at the engine's state: these run on the
	// engine itself, once a statement through the endpoint has brought
	// the views up to date.
	endpointClips := l.scalar(t, "SELECT count(*) FROM clips").(int64)
	for _, c := range ints {
		v, err := query.EngineScalar(l.query, c.q)
		if err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		*c.dst = v.(int64)
	}
	for _, c := range []struct {
		name string
		dst  *string
	}{{"lock_configuration", &s.locked}, {"enable_external_access", &s.externalAccess}, {"allowed_directories", &s.allowedDirs}, {"enable_logging", &s.logging}, {"enable_profiling", &s.profiling}} {
		v, err := query.EngineScalar(l.query, "SELECT current_setting('"+c.name+"')::VARCHAR")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		*c.dst = fmt.Sprint(v)
	}
	if endpointClips != s.clips {
		t.Fatalf("the SQL endpoint counts %d clips, the engine %d", endpointClips, s.clips)
	}
	s.stage = listTree(t, l.stage.Dir())
	return s
}

// scalar runs q, which must yield one row, and returns its first value
// (int64, string or bool).
func (l *lakeFixture) scalar(t *testing.T, q string) any {
	t.Helper()
	_, recs, err := l.sqlQuery(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if rowCount(recs) != 1 {
		t.Fatalf("%s: %d rows, want 1", q, rowCount(recs))
	}
	for _, r := range recs {
		if r.NumRows() == 0 {
			continue
		}
		switch c := r.Column(0).(type) {
		case *array.Int64:
			return c.Value(0)
		case *array.String:
			return c.Value(0)
		case *array.Boolean:
			return c.Value(0)
		default:
			t.Fatalf("%s: column of type %s", q, c.DataType())
		}
	}
	panic("unreachable")
}

// listTree describes every file under dir.
func listTree(t *testing.T, dir string) string {
	t.Helper()
	s, err := fstree.Describe(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runPrepared executes a prepared statement and reads all its rows.
func (l *lakeFixture) runPrepared(ctx context.Context, p *flightsql.PreparedStatement) (*arrow.Schema, int64, error) {
	info, err := p.Execute(ctx)
	if err != nil {
		return nil, 0, err
	}
	return l.fetch(ctx, info.Endpoint[0].Ticket.Ticket)
}

// fetch reads the stream of a ticket and counts its rows.
func (l *lakeFixture) fetch(ctx context.Context, ticket []byte) (*arrow.Schema, int64, error) {
	rdr, err := l.sql.DoGet(ctx, &flight.Ticket{Ticket: ticket})
	if err != nil {
		return nil, 0, err
	}
	defer rdr.Release()
	var n int64
	for rdr.Next() {
		n += rdr.RecordBatch().NumRows()
	}
	return rdr.Schema(), n, rdr.Err()
}

// prepareAndRun sends q through the Flight SQL prepared-statement path.
// A statement may be refused when prepared or, for table functions that
// touch files only when run, when executed.
func (l *lakeFixture) prepareAndRun(ctx context.Context, q string) error {
	p, err := l.sql.Prepare(ctx, q)
	if err != nil {
		return err
	}
	defer p.Close(ctx)
	_, _, err = l.runPrepared(ctx, p)
	return err
}

// wantRefused checks that err is a gRPC error with a client-side code (not
// OK, Internal or Unknown) whose message holds want.
func wantRefused(t *testing.T, how string, err error, want string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: succeeded, want it refused", how)
		return
	}
	s, ok := status.FromError(err)
	if !ok {
		t.Errorf("%s: %v is not a gRPC status", how, err)
		return
	}
	switch s.Code() {
	case codes.OK, codes.Internal, codes.Unknown:
		t.Errorf("%s: code %v (%s), want a refusal", how, s.Code(), s.Message())
	}
	if !strings.Contains(s.Message(), want) {
		t.Errorf("%s: message %q, want it to mention %q", how, s.Message(), want)
	}
}

// named is the refusal message's ending for a function or table name.
func named(name string) string { return `"` + name + `" is not allowed in lake SQL` }

func TestWritesAndEscapesAreRefused(t *testing.T) {
	l := newLake(t)
	l.createTable("clips", wire.DefaultSchema())
	l.putFile("clips", "a.mp4", []byte("aaa"))
	l.putFile("clips", "b.mp4", []byte("bbbb"))
	ctx := context.Background()
	tmp := t.TempDir()
	stage := l.stage.Dir()
	before := l.state(t)
	if before.clips != 2 || before.tables != 0 || before.locked != "true" || before.externalAccess != "false" {
		t.Fatalf("unexpected starting state %+v", before)
	}

	const (
		readOnly   = "only a single read-only SELECT statement is allowed"
		twoStmts   = "more than one statement"
		notAllowed = "is not allowed in lake SQL"
	)
	cases := []struct{ sql, want string }{
		{"INSERT INTO clips (name) VALUES ('x.mp4')", readOnly},
		{"insert into clips select * from clips", readOnly},
		{"CREATE TABLE x(a int)", readOnly},
		{"CREATE TEMP TABLE x AS SELECT 1", readOnly},
		{"CREATE VIEW v AS SELECT 1", readOnly},
		{"CREATE OR REPLACE VIEW clips AS SELECT 1", readOnly},
		{"CREATE MACRO m(a) AS a", readOnly},
		{"CREATE SEQUENCE s", readOnly},
		{"DROP VIEW clips", readOnly},
		{"DROP TABLE x", readOnly},
		{"ALTER VIEW clips RENAME TO c2", readOnly},
		{"UPDATE clips SET name = 'y'", readOnly},
		{"DELETE FROM clips", readOnly},
		{"TRUNCATE clips", readOnly},
		{"COPY (SELECT 1) TO '" + tmp + "/out.csv'", readOnly},
		{"COPY clips TO '" + tmp + "/out.parquet' (FORMAT parquet)", readOnly},
		{"COPY clips FROM '/etc/passwd'", readOnly},
		{"EXPORT DATABASE '" + tmp + "'", readOnly},
		{"IMPORT DATABASE '" + tmp + "'", readOnly},
		{"ATTACH ':memory:' AS x", readOnly},
		{"ATTACH '" + tmp + "/x.db'", readOnly},
		{"DETACH memory", readOnly},
		{"USE system", readOnly},
		{"INSTALL httpfs", readOnly},
		{"FORCE INSTALL httpfs", readOnly},
		{"LOAD httpfs", readOnly},
		{"SET memory_limit = '1GB'", readOnly},
		{"SET GLOBAL threads = 1", readOnly},
		{"SET VARIABLE v = 1", readOnly},
		{"RESET memory_limit", readOnly},
		{"RESET GLOBAL allowed_directories", readOnly},
		{"SET lock_configuration = false", readOnly},
		{"SET GLOBAL enable_external_access = true", readOnly},
		{"PRAGMA enable_profiling", readOnly},
		{"PRAGMA memory_limit = '1GB'", readOnly},
		{"PRAGMA enable_checkpoint_on_shutdown", readOnly},
		{"DROP TABLE x; SELECT 1", readOnly},
		{"SELECT 1; DROP VIEW clips", readOnly},
		{"SELECT 1; SELECT 2", twoStmts},
		{"CALL pragma_version()", readOnly},
		{"CALL checkpoint()", readOnly},
		{"BEGIN TRANSACTION", readOnly},
		{"COMMIT", readOnly},
		{"CHECKPOINT", readOnly},
		{"VACUUM", readOnly},
		{"EXPLAIN ANALYZE SELECT 1", readOnly},
		{"PREPARE p AS SELECT 1", readOnly},
		{"CREATE SECRET s (TYPE S3, KEY_ID 'a', SECRET 'b')", readOnly},
		{"  /* comment */ -- another\n  insert into clips (name) values ('x')", readOnly},
		{"WITH c AS (SELECT 1) INSERT INTO clips (name) SELECT 'x' FROM c", readOnly},
		// Functions that read files, by name, in every spelling and place.
		{"SELECT * FROM read_text('/etc/passwd')", named("read_text")},
		{"SELECT * FROM read_blob('/etc/passwd')", named("read_blob")},
		{"SELECT * FROM read_csv('/etc/passwd')", named("read_csv")},
		{"SELECT * FROM read_json('/etc/passwd')", named("read_json")},
		{"SELECT * FROM read_parquet('/etc/passwd')", named("read_parquet")},
		{"SELECT * FROM parquet_metadata('/etc/passwd')", named("parquet_metadata")},
		{"SELECT * FROM sniff_csv('/etc/passwd')", named("sniff_csv")},
		{"SELECT * FROM glob('/etc/*')", named("glob")},
		{"SELECT * FROM read_text('file:///etc/passwd')", notAllowed},
		{"SELECT * FROM read_blob('" + stage + "/objects/**')", notAllowed},
		{"SELECT * FROM glob('" + stage + "/*')", notAllowed},
		{"SELECT * FROM read_parquet('" + stage + "/_lake/tables/**/*.parquet')", named("read_parquet")},
		{"SELECT * FROM read_json('" + stage + "/_lake/tables/*/log/*.json')", named("read_json")},
		{"SELECT * FROM READ_TEXT('/etc/passwd')", named("read_text")},
		{`SELECT * FROM "read_text"('/etc/passwd')`, named("read_text")},
		{"SELECT * FROM main.read_text('/etc/passwd')", named("read_text")},
		{"SELECT * FROM system.main.read_text('/etc/passwd')", notAllowed},
		{"SELECT (SELECT content FROM read_text('/etc/passwd'))", named("read_text")},
		{"WITH x AS (SELECT * FROM read_text('/etc/passwd')) SELECT * FROM x", named("read_text")},
		{"SELECT * FROM clips, LATERAL (SELECT * FROM read_text(clips.name))", named("read_text")},
		{"SELECT name FROM clips WHERE name IN (SELECT filename FROM glob('/etc/*'))", named("glob")},
		{"SELECT 1 UNION ALL SELECT count(*) FROM read_text('/etc/passwd')", notAllowed},
		// Replacement scans: a file named as a table.
		{"SELECT * FROM '" + stage + "/_lake/tables/x.parquet'", notAllowed},
		{`SELECT * FROM "` + stage + `/_lake/catalog/clips.json"`, notAllowed},
		{"FROM '/etc/passwd'", notAllowed},
		{`WITH "a.json" AS (SELECT 1) SELECT * FROM "a.json"`, "CTE name"},
		{`SELECT * FROM (WITH c AS (SELECT 1) SELECT * FROM c), c`, `table "c" is not allowed`},
		{"SELECT * FROM duckdb_tables", notAllowed},
		{"SELECT * FROM information_schema.views", notAllowed},
		{"SELECT * FROM memory.main.clips", notAllowed},
		// Functions that change the engine, log, profile or leak.
		{"SELECT * FROM enable_logging(storage='file', storage_path='" + tmp + "/x')", named("enable_logging")},
		{"SELECT * FROM enable_logging('QueryLog')", named("enable_logging")},
		{"SELECT * FROM disable_logging()", notAllowed},
		{"SELECT message FROM duckdb_logs()", named("duckdb_logs")},
		{"SELECT * FROM enable_profiling(format='json', save_location='" + tmp + "/p.json')", named("enable_profiling")},
		{"SELECT * FROM checkpoint()", notAllowed},
		{"SELECT * FROM force_checkpoint()", notAllowed},
		{"SELECT * FROM duckdb_extensions()", notAllowed},
		{"SELECT * FROM duckdb_secrets()", notAllowed},
		{"SELECT * FROM duckdb_settings()", notAllowed},
		{"SELECT * FROM duckdb_views()", notAllowed},
		{"SELECT current_setting('allowed_directories')", named("current_setting")},
		{"SELECT getvariable('x')", notAllowed},
		{"SELECT setseed(0.5)", named("setseed")},
		{"SELECT write_log('x')", notAllowed},
		{"SELECT sleep_ms(100000)", notAllowed},
		{"SELECT getenv('HOME')", notAllowed},
		{"SELECT json_serialize_plan('SELECT 1')", notAllowed},
		{"SELECT * FROM json_execute_serialized_sql(json_serialize_sql('SELECT 1'))", notAllowed},
		{"SELECT * FROM query('DROP VIEW clips')", named("query")},
		{"SELECT * FROM query_table('clips')", named("query_table")},
		{"SELECT * FROM dbgen(sf=0.01)", notAllowed},
		{"SUMMARIZE clips", notAllowed},
		{"SELECT pg_get_viewdef(1)", notAllowed},
	}
	for _, c := range cases {
		name := c.sql
		if len(name) > 60 {
			name = name[:60]
		}
		t.Run(name, func(t *testing.T) {
			_, _, err := l.sqlQuery(c.sql)
			wantRefused(t, "Execute", err, c.want)
			wantRefused(t, "Prepare", l.prepareAndRun(ctx, c.sql), c.want)
			_, err = l.sql.GetExecuteSchema(ctx, c.sql)
			if err != nil { // a table function may fail only when run
				wantRefused(t, "GetExecuteSchema", err, c.want)
			}
			if after := l.state(t); after != before {
				t.Errorf("state changed:\nbefore %+v\nafter  %+v", before, after)
			}
			if entries, err := os.ReadDir(tmp); err != nil || len(entries) != 0 {
				t.Errorf("%s holds %v (%v)", tmp, entries, err)
			}
		})
	}

	t.Run("DoPut", func(t *testing.T) {
		const want = "lake SQL is read-only"
		_, err := l.sql.ExecuteUpdate(ctx, "INSERT INTO clips (name) VALUES ('x.mp4')")
		wantRefused(t, "ExecuteUpdate", err, want)
		_, err = l.sql.ExecuteUpdate(ctx, "SELECT 1")
		wantRefused(t, "ExecuteUpdate of a SELECT", err, want)
		_, err = l.sql.ExecuteSubstraitUpdate(ctx, flightsql.SubstraitPlan{Plan: []byte("plan"), Version: "0.1"})
		wantRefused(t, "ExecuteSubstraitUpdate", err, want)

		rec := oneNameRecord("x.mp4")
		defer rec.Release()
		rdr, err := array.NewRecordReader(rec.Schema(), []arrow.RecordBatch{rec})
		if err != nil {
			t.Fatal(err)
		}
		defer rdr.Release()
		_, err = l.sql.ExecuteIngest(ctx, rdr, &flightsql.ExecuteIngestOpts{
			Table: "clips", TableDefinitionOptions: &flightsql.TableDefinitionOptions{},
		})
		wantRefused(t, "ExecuteIngest", err, want)

		p, err := l.sql.Prepare(ctx, "SELECT name FROM clips")
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(ctx)
		_, err = p.ExecuteUpdate(ctx)
		wantRefused(t, "prepared ExecuteUpdate", err, want)

		if after := l.state(t); after != before {
			t.Errorf("state changed:\nbefore %+v\nafter  %+v", before, after)
		}
	})

	t.Run("transactions", func(t *testing.T) {
		if _, err := l.sql.BeginTransaction(ctx); err == nil {
			t.Error("BeginTransaction succeeded on a read-only server")
		} else if s, _ := status.FromError(err); s.Code() == codes.OK || s.Code() == codes.Internal {
			t.Errorf("BeginTransaction: %v", err)
		}
	})

	// Lake tables, CTEs and row generators with known-safe functions.
	allowed := []struct {
		sql  string
		rows int64
	}{
		{"SELECT name FROM clips", 2},
		{"SELECT 1", 1},
		{"SELECT 1;", 1},
		{"select 1 -- trailing comment", 1},
		{"WITH x AS (SELECT 1) SELECT * FROM x", 1},
		{"FROM clips", 2},
		{"SELECT upper(name), length(file.key) > 0, file.size FROM clips WHERE file.sha256 LIKE '%' ORDER BY name", 2},
		{"SELECT * FROM clips c JOIN (SELECT name FROM main.clips) d USING (name)", 2},
		{"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 2) SELECT * FROM r", 2},
		{"SELECT count(*) FROM range(10)", 1},
		{"SELECT * FROM unnest([1, 2])", 2},
		{"SELECT row_number() OVER (ORDER BY name) FROM CLIPS", 2},
		{"SELECT table_name FROM information_schema.tables WHERE table_name = 'clips'", 1},
		{"DESCRIBE clips", 3},
	}
	for _, c := range allowed {
		t.Run("allowed "+c.sql, func(t *testing.T) {
			_, recs, err := l.sqlQuery(c.sql)
			if err != nil {
				t.Fatal(err)
			}
			if rowCount(recs) != c.rows {
				t.Errorf("Execute: %d rows, want %d", rowCount(recs), c.rows)
			}
			p, err := l.sql.Prepare(ctx, c.sql)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close(ctx)
			if _, n, err := l.runPrepared(ctx, p); err != nil || n != c.rows {
				t.Errorf("prepared: %d rows, %v; want %d rows", n, err, c.rows)
			}
		})
	}
	if after := l.state(t); after != before {
		t.Errorf("state changed:\nbefore %+v\nafter  %+v", before, after)
	}
}

// oneNameRecord is a one-column, one-row record.
func oneNameRecord(name string) arrow.RecordBatch {
	schema := arrow.NewSchema([]arrow.Field{{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).Append(name)
	return b.NewRecordBatch()
}
