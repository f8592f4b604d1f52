//go:build duckdb_arrow

package query_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lakedata/lake/roles/query"
	"github.com/lakedata/lake/wire"
)

// names runs q and returns its first column, a string, in order.
func (l *lakeFixture) names(t *testing.T, q string) []string {
	t.Helper()
	_, recs, err := l.sqlQuery(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	out := []string{}
	for _, r := range recs {
		c := r.Column(0).(*array.String)
		for i := range c.Len() {
			out = append(out, c.Value(i))
		}
	}
	return out
}

// sqlTime is a TIMESTAMP literal of a commit time in Unix microseconds.
func sqlTime(micros int64) string {
	return "TIMESTAMP '" + time.UnixMicro(micros).UTC().Format("2006-01-02 15:04:05.999999") + "'"
}

// timeTravelLake is a table clips with versions 1, 2, 3 adding a.mp4,
// b.mp4 and c.mp4, and the commit times of versions 0 to 3.
func timeTravelLake(t *testing.T) (*lakeFixture, []int64) {
	l := newLake(t)
	l.createTable("clips", wire.DefaultSchema())
	for _, n := range []string{"a.mp4", "b.mp4", "c.mp4"} {
		l.putFile("clips", n, []byte(n))
	}
	h, err := l.meta.History(context.Background(), "clips", 0)
	if err != nil {
		t.Fatal(err)
	}
	times := make([]int64, len(h.Versions))
	for _, v := range h.Versions {
		times[v.Version] = v.CommittedAtUnixMicros
	}
	return l, times
}

func TestTimeTravel(t *testing.T) {
	l, times := timeTravelLake(t)
	cases := []struct{ sql, want string }{
		{"SELECT name FROM clips AT (VERSION => 0)", ""},
		{"SELECT name FROM clips AT (VERSION => 1)", "a.mp4"},
		{"SELECT name FROM clips AT (VERSION => 2) ORDER BY name", "a.mp4 b.mp4"},
		{"SELECT name FROM clips AT (VERSION => 3) ORDER BY 1", "a.mp4 b.mp4 c.mp4"},
		{"select name from CLIPS at (version => 1)", "a.mp4"},
		{"SELECT clips.name FROM clips AT (VERSION => 1)", "a.mp4"},
		{"SELECT c.name FROM clips AS c AT (VERSION => 1)", "a.mp4"},
		{"SELECT name FROM main.clips AT (VERSION => 1)", "a.mp4"},
		// Two versions of one table in one statement. (DuckDB takes the
		// alias before the AT clause.)
		{"SELECT n.name FROM clips n AT (VERSION => 3) LEFT JOIN clips o AT (VERSION => 1) USING (name) WHERE o.name IS NULL ORDER BY 1", "b.mp4 c.mp4"},
		{"SELECT name FROM clips EXCEPT SELECT name FROM clips AT (VERSION => 2)", "c.mp4"},
		{"WITH old AS (SELECT name FROM clips AT (VERSION => 2)) SELECT name FROM clips WHERE name NOT IN (SELECT name FROM old)", "c.mp4"},
		{"SELECT name FROM clips WHERE name NOT IN (SELECT name FROM clips AT (VERSION => 1)) ORDER BY name", "b.mp4 c.mp4"},
		{"SELECT (SELECT count(*) FROM clips AT (VERSION => 2))::VARCHAR", "2"},
		{"SELECT 'it''s ' || name FROM clips AT (VERSION => 1)", "it's a.mp4"},
		// At a time: the newest version committed then or before.
		{"SELECT name FROM clips AT (TIMESTAMP => " + sqlTime(times[1]) + ")", "a.mp4"},
		{"SELECT name FROM clips AT (TIMESTAMP => " + sqlTime(times[2]-1) + ")", "a.mp4"},
		{"SELECT name FROM clips AT (TIMESTAMP => " + sqlTime(times[2]) + ") ORDER BY 1", "a.mp4 b.mp4"},
		{"SELECT name FROM clips AT (TIMESTAMP => '" + time.UnixMicro(times[1]).UTC().Add(2*time.Hour).Format("2006-01-02 15:04:05.999999") + "+02'::TIMESTAMPTZ)", "a.mp4"},
		{"SELECT count(*)::VARCHAR FROM clips AT (TIMESTAMP => " + sqlTime(times[0]) + ")", "0"},
		{"SELECT a.name FROM clips a AT (TIMESTAMP => " + sqlTime(times[1]) + ") JOIN clips b AT (VERSION => 2) USING (name)", "a.mp4"},
	}
	for _, c := range cases {
		if got := strings.Join(l.names(t, c.sql), " "); got != c.want {
			t.Errorf("%s: %q, want %q", c.sql, got, c.want)
		}
		// Again: a remembered text reads the same.
		if got := strings.Join(l.names(t, c.sql), " "); got != c.want {
			t.Errorf("%s, the second time: %q, want %q", c.sql, got, c.want)
		}
	}

	t.Run("prepared", func(t *testing.T) {
		ctx := context.Background()
		p, err := l.sql.Prepare(ctx, "SELECT o.name FROM clips o AT (VERSION => 2) JOIN clips n USING (name) ORDER BY 1")
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(ctx)
		if f := p.DatasetSchema().Field(0); f.Name != "name" {
			t.Errorf("prepared schema %v", p.DatasetSchema())
		}
		l.putFile("clips", "d.mp4", []byte("d"))
		if _, got := l.preparedNames(t, p); !slices.Equal(got, []string{"a.mp4", "b.mp4"}) {
			t.Errorf("prepared statement read %v", got)
		}
	})

	t.Run("errors", func(t *testing.T) {
		cases := []struct {
			sql  string
			code codes.Code
			want string
		}{
			{"SELECT * FROM clips AT (VERSION => 99)", codes.NotFound, "99"},
			{"SELECT * FROM clips AT (VERSION => -1)", codes.NotFound, "-1"},
			{"SELECT * FROM clips AT (TIMESTAMP => " + sqlTime(time.Now().Add(time.Hour).UnixMicro()) + ")", codes.InvalidArgument, "future"},
			{"SELECT * FROM clips AT (TIMESTAMP => " + sqlTime(times[0]-1) + ")", codes.NotFound, "created"},
			{"SELECT * FROM clips AT (TIMESTAMP => TIMESTAMP 'yesterday-ish')", codes.InvalidArgument, "TIMESTAMP"},
		}
		for _, c := range cases {
			_, _, err := l.sqlQuery(c.sql)
			if s, _ := status.FromError(err); s.Code() != c.code || !strings.Contains(s.Message(), c.want) {
				t.Errorf("%s: %v, want %v mentioning %q", c.sql, err, c.code, c.want)
			}
		}
	})
}

// TestTimeTravelIsGuarded: AT is allowed only with a constant on a lake
// table, and the views of old versions can never be named.
func TestTimeTravelIsGuarded(t *testing.T) {
	l, _ := timeTravelLake(t)
	ctx := context.Background()
	l.names(t, "SELECT name FROM clips AT (VERSION => 1)") // defines the view clips@1
	before := l.state(t)
	const notAllowed = "is not allowed in lake SQL"
	cases := []string{
		"SELECT * FROM clips AT (VERSION => 1 + 1)",
		"SELECT * FROM clips AT (VERSION => (SELECT 1))",
		"SELECT * FROM clips AT (VERSION => (SELECT max(version) FROM read_parquet('x')))",
		"SELECT * FROM clips AT (VERSION => '1')",
		"SELECT * FROM clips AT (VERSION => 1.5)",
		"SELECT * FROM clips AT (VERSION => NULL)",
		"SELECT * FROM clips AT (VERSION => 99999999999999999999999)",
		"SELECT * FROM clips AT (VERSION => CAST(1 AS BIGINT))",
		"SELECT * FROM clips AT (VERSION => getvariable('v'))",
		"SELECT * FROM clips AT (TIMESTAMP => now())",
		"SELECT * FROM clips AT (TIMESTAMP => current_timestamp - INTERVAL 1 HOUR)",
		"SELECT * FROM clips AT (TIMESTAMP => TRY_CAST('2026-01-01' AS TIMESTAMP))",
		"SELECT * FROM clips AT (TIMESTAMP => '2026-01-01'::VARCHAR)",
		"SELECT * FROM clips AT (TIMESTAMP => 1700000000)",
		"SELECT * FROM clips AT (TIMESTAMP => (SELECT TIMESTAMP '2026-01-01'))",
		"WITH c AS (SELECT 1 AS a) SELECT * FROM c AT (VERSION => 1)",
		"WITH clips AS (SELECT 1 AS a) SELECT * FROM clips AT (VERSION => 1)",
		"SELECT * FROM information_schema.tables AT (VERSION => 1)",
		"SELECT * FROM nosuch AT (VERSION => 1)",
		`SELECT * FROM lake_versions."clips@1"`,
		`SELECT * FROM "lake_versions"."clips@1"`,
		`SELECT * FROM "clips@1"`,
		`SELECT * FROM main."clips@1"`,
		`SELECT * FROM memory.lake_versions."clips@1"`,
		`SELECT * FROM lake_versions."clips@1" AT (VERSION => 1)`,
		`SELECT * FROM read_parquet('clips@1')`,
		`SELECT * FROM query_table('lake_versions."clips@1"')`,
		`SELECT * FROM clips AT (VERSION => 1), read_parquet('x')`,
		`SELECT * FROM information_schema.views`,
	}
	for _, q := range cases {
		_, _, err := l.sqlQuery(q)
		wantRefused(t, q, err, notAllowed)
		wantRefused(t, q+" (prepared)", l.prepareAndRun(ctx, q), notAllowed)
	}
	// VERSION => ? is a parameter: refused as such.
	_, _, err := l.sqlQuery("SELECT * FROM clips AT (VERSION => ?)")
	wantRefused(t, "a parameter", err, "")
	if after := l.state(t); after != before {
		t.Errorf("refused statements changed the engine: %+v, was %+v", after, before)
	}
}

// TestVersionViewsAreBounded: the views of old versions are kept up to a
// bound, the least recently used going first, and a view dropped is
// defined again when asked for.
func TestVersionViewsAreBounded(t *testing.T) {
	l, _ := timeTravelLake(t)
	for i := range 5 {
		l.putFile("clips", fmt.Sprintf("x%d.mp4", i), []byte("x"))
	}
	query.SetVersionViewLimit(l.query, 3)
	for v := range 8 {
		got := l.names(t, fmt.Sprintf("SELECT name FROM clips AT (VERSION => %d)", v))
		if len(got) != v {
			t.Fatalf("version %d: %d rows", v, len(got))
		}
	}
	views := query.VersionViews(l.query)
	slices.Sort(views)
	if want := []string{"clips@5", "clips@6", "clips@7"}; !slices.Equal(views, want) {
		t.Errorf("views %v, want %v", views, want)
	}
	// clips@1 was dropped; the remembered text defines it again.
	if got := l.names(t, "SELECT name FROM clips AT (VERSION => 1)"); len(got) != 1 {
		t.Errorf("version 1 again: %v", got)
	}
	n, err := query.EngineScalar(l.query, "SELECT count(*) FROM duckdb_views() WHERE schema_name = 'lake_versions'")
	if err != nil || n.(int64) != 3 {
		t.Errorf("%v views in the hidden schema (%v), want 3", n, err)
	}
}
