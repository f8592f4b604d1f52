//go:build duckdb_arrow

package query_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	flightgen "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/lakedata/lake/roles/query"
	"github.com/lakedata/lake/wire"
)

// preparedNames runs a prepared statement and returns its first column.
func (l *lakeFixture) preparedNames(t *testing.T, p *flightsql.PreparedStatement) (*arrow.Schema, []string) {
	t.Helper()
	ctx := context.Background()
	info, err := p.Execute(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := l.sql.DoGet(ctx, info.Endpoint[0].Ticket)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	var out []string
	for rdr.Next() {
		c := rdr.RecordBatch().Column(0).(*array.String)
		for i := range c.Len() {
			out = append(out, c.Value(i))
		}
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	return rdr.Schema(), out
}

func TestPreparedStatements(t *testing.T) {
	l := newLake(t)
	ctx := context.Background()
	l.createTable("clips", wire.DefaultSchema())
	l.putFile("clips", "b.mp4", []byte("bb"))
	l.putFile("clips", "a.mp4", []byte("a"))
	emptySchema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "label", Type: arrow.BinaryTypes.String, Nullable: true},
		wire.FileField("file", true),
	}, nil)
	l.createTable("empty", emptySchema)

	t.Run("prepare, execute, append, execute again, close", func(t *testing.T) {
		p, err := l.sql.Prepare(ctx, "SELECT name FROM clips ORDER BY name")
		if err != nil {
			t.Fatal(err)
		}
		want := arrow.NewSchema([]arrow.Field{{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
		if !p.DatasetSchema().Equal(want) {
			t.Errorf("DatasetSchema %v, want %v", p.DatasetSchema(), want)
		}
		if ps := p.ParameterSchema(); ps != nil && ps.NumFields() != 0 {
			t.Errorf("ParameterSchema %v, want none", ps)
		}
		sr, err := p.GetSchema(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s, err := flight.DeserializeSchema(sr.Schema, memory.DefaultAllocator); err != nil || !s.Equal(want) {
			t.Errorf("GetSchema %v (%v), want %v", s, err, want)
		}
		schema, names := l.preparedNames(t, p)
		if !schema.Equal(want) || strings.Join(names, ",") != "a.mp4,b.mp4" {
			t.Errorf("first run: %v %q", schema, names)
		}
		l.putFile("clips", "c.mp4", []byte("ccc"))
		if _, names = l.preparedNames(t, p); strings.Join(names, ",") != "a.mp4,b.mp4,c.mp4" {
			t.Errorf("after an append: %q", names)
		}
		if err := p.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		if _, err := p.Execute(ctx); err == nil {
			t.Error("a closed statement executed")
		}
	})

	t.Run("refused when prepared", func(t *testing.T) {
		for _, c := range []struct{ sql, want string }{
			{"DROP VIEW clips", "read-only SELECT"},
			{"INSERT INTO clips (name) VALUES ('x')", "read-only SELECT"},
			{"CREATE TABLE t (a int)", "read-only SELECT"},
			{"SELECT 1; DROP VIEW clips", "read-only SELECT"},
			{"SELECT ?", "statement parameters are not supported"},
			{"SELECT name FROM clips WHERE name = $1", "statement parameters are not supported"},
			{"SELECT name FROM clips WHERE name = $name", "statement parameters are not supported"},
			{"SELECT nope FROM clips", "nope"},
			{"SELECT * FROM missing_table", "missing_table"},
			{"", "empty query"},
			{"   ", "empty query"},
			{"-- nothing", "empty query"},
		} {
			p, err := l.sql.Prepare(ctx, c.sql)
			if err == nil {
				p.Close(ctx)
			}
			wantRefused(t, "Prepare "+c.sql, err, c.want)
		}
	})

	t.Run("forged handles and tickets", func(t *testing.T) {
		statementTicket := func(handle string) []byte {
			tkt, err := flightsql.CreateStatementQueryTicket([]byte(handle))
			if err != nil {
				t.Fatal(err)
			}
			return tkt
		}
		preparedTicket := func(handle string) []byte {
			a, err := anypb.New(&flightgen.CommandPreparedStatementQuery{PreparedStatementHandle: []byte(handle)})
			if err != nil {
				t.Fatal(err)
			}
			b, err := proto.Marshal(a)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		before := l.state(t)
		for _, c := range []struct {
			name   string
			ticket []byte
			want   string
		}{
			{"arbitrary bytes", []byte("\xff\x00garbage"), ""},
			{"empty", nil, ""},
			{"handle without the lake prefix", statementTicket("SELECT 1"), "unknown statement handle"},
			{"handle of another server", statementTicket("lake.sql.v0:SELECT 1"), "unknown statement handle"},
			{"handle carrying DROP", statementTicket("lake.sql.v1:DROP VIEW clips"), "read-only SELECT"},
			{"handle carrying two statements", statementTicket("lake.sql.v1:SELECT 1; DROP VIEW clips"), "read-only SELECT"},
			{"handle carrying COPY", statementTicket("lake.sql.v1:COPY (SELECT 1) TO '" + t.TempDir() + "/x.csv'"), "read-only SELECT"},
			{"handle carrying a file read", statementTicket("lake.sql.v1:SELECT * FROM read_text('/etc/passwd')"), named("read_text")},
			{"prepared handle carrying DROP", preparedTicket("lake.sql.v1:DROP VIEW clips"), "read-only SELECT"},
			{"prepared handle without the prefix", preparedTicket("DROP VIEW clips"), "unknown statement handle"},
		} {
			t.Run(c.name, func(t *testing.T) {
				_, _, err := l.fetch(ctx, c.ticket)
				wantRefused(t, "DoGet", err, c.want)
			})
		}
		// A client that loads a forged prepared-statement handle.
		for _, h := range []string{"lake.sql.v1:DROP VIEW clips", "DROP VIEW clips"} {
			p, err := l.sql.LoadPreparedStatementFromResult(&flightsql.CreatePreparedStatementResult{PreparedStatementHandle: []byte(h)})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Execute(ctx)
			wantRefused(t, "Execute of forged handle "+h, err, "")
			_, err = p.GetSchema(ctx)
			wantRefused(t, "GetSchema of forged handle "+h, err, "")
		}
		if after := l.state(t); after != before {
			t.Errorf("state changed:\nbefore %+v\nafter  %+v", before, after)
		}
	})

	t.Run("GetExecuteSchema matches the executed schema", func(t *testing.T) {
		for _, q := range []string{
			"SELECT name, file FROM clips",
			"SELECT * FROM clips",
			"SELECT count(*) AS n, max(created_at) FROM clips",
			// Duplicate column names stay as they are executed.
			"SELECT a.name, b.name FROM clips a, clips b",
			"SELECT 1 AS x, 2 AS x",
			// Trailing semicolons and comments.
			"SELECT name FROM clips;",
			"SELECT name FROM clips; -- done",
			"SELECT name FROM clips /* done */ ; ",
			"SELECT name FROM clips -- done",
			"SELECT 'it''s' AS s",
			"SELECT * FROM empty",
		} {
			t.Run(q, func(t *testing.T) {
				sr, err := l.sql.GetExecuteSchema(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				got, err := flight.DeserializeSchema(sr.Schema, memory.DefaultAllocator)
				if err != nil {
					t.Fatal(err)
				}
				executed, _, err := l.sqlQuery(q)
				if err != nil {
					t.Fatal(err)
				}
				if !got.Equal(executed) {
					t.Errorf("GetExecuteSchema:\n%v\nexecuted:\n%v", got, executed)
				}
				p, err := l.sql.Prepare(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close(ctx)
				if !p.DatasetSchema().Equal(executed) {
					t.Errorf("DatasetSchema:\n%v\nexecuted:\n%v", p.DatasetSchema(), executed)
				}
				if s, _, err := l.runPrepared(ctx, p); err != nil || !s.Equal(executed) {
					t.Errorf("prepared run: %v, %v", s, err)
				}
			})
		}
	})

	t.Run("empty table", func(t *testing.T) {
		schema, recs, err := l.sqlQuery("SELECT * FROM empty")
		if err != nil {
			t.Fatal(err)
		}
		if rowCount(recs) != 0 {
			t.Errorf("%d rows, want 0", rowCount(recs))
		}
		if !schema.Equal(emptySchema) {
			t.Errorf("schema\n%v\nwant\n%v", schema, emptySchema)
		}
		p, err := l.sql.Prepare(ctx, "SELECT label, file FROM empty WHERE id > 3")
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(ctx)
		s, n, err := l.runPrepared(ctx, p)
		if err != nil || n != 0 || s.NumFields() != 2 || !wire.IsFileField(s.Field(1)) {
			t.Errorf("prepared: %v, %d rows, %v", s, n, err)
		}
	})
}

func TestStatementTimeout(t *testing.T) {
	l := newLakeWith(t, func(c *query.Config) { c.StatementTimeout = 200 * time.Millisecond })
	ctx := context.Background()
	for _, q := range []string{
		"SELECT count(*) FROM range(10000000000)",
		"SELECT count(*) FROM range(1000000) a, range(1000000) b",
	} {
		start := time.Now()
		_, _, err := l.sqlQuery(q)
		took := time.Since(start)
		if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "statement timeout") {
			t.Errorf("%s: %v, want DeadlineExceeded naming the statement timeout", q, err)
		}
		if took > 5*time.Second {
			t.Errorf("%s: stopped after %v, want about 200ms", q, took)
		}
		// Preparing runs nothing, so it beats the timeout; executing does not.
		start = time.Now()
		err = l.prepareAndRun(ctx, q)
		if status.Code(err) != codes.DeadlineExceeded || time.Since(start) > 5*time.Second {
			t.Errorf("prepared %s: %v after %v, want DeadlineExceeded", q, err, time.Since(start))
		}
	}
	_, recs, err := l.sqlQuery("SELECT 1")
	if err != nil || rowCount(recs) != 1 {
		t.Fatalf("after the timeouts: %d rows, %v", rowCount(recs), err)
	}
}
