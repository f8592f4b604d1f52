package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/lakedata/lake/client"
)

// queryNames runs q and returns its first column, a string.
func queryNames(ctx context.Context, c *client.Client, q string) ([]string, error) {
	rdr, err := c.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	out := []string{}
	for rdr.Next() {
		col := rdr.RecordBatch().Column(0).(*array.String)
		for i := range col.Len() {
			out = append(out, col.Value(i))
		}
	}
	return out, rdr.Err()
}

func sqlTimestamp(micros int64) string {
	return "TIMESTAMP '" + time.UnixMicro(micros).UTC().Format("2006-01-02 15:04:05.999999") + "'"
}

// TestTimeTravel: meta and query as processes, on a local stage and on
// versitygw. SQL reads a table at versions and at times, two versions in
// one join, in a CTE and in a prepared statement of a third-party Flight
// SQL client; the three errors come back typed; the CLI describes a
// version and gets a file by it.
func TestTimeTravel(t *testing.T) {
	for _, st := range compactStages {
		t.Run(st.name, func(t *testing.T) { timeTravel(t, st.make(t)) })
	}
}

func timeTravel(t *testing.T, stage compactStage) {
	dir := t.TempDir()
	m := startLake(t, append([]string{"serve", "--role=meta", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "meta")}, stage.flags...)...)
	q := startLake(t, "serve", "--role=query", "--listen", "127.0.0.1:0", "--meta", m.Addr(), "--data-dir", filepath.Join(dir, "query"))
	endpoint := "grpc://" + q.Addr()
	ctx := withTimeout(t, 3*time.Minute)
	c, err := client.Connect(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTable(ctx, "clips", nil, false); err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for _, name := range []string{"a.mp4", "b.mp4", "c.mp4"} {
		res, err := c.PutReader(ctx, "clips", name, strings.NewReader("bytes of "+name), client.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		keys[name] = res.File.Key
	}
	h, err := c.History(ctx, "clips", 0)
	if err != nil {
		t.Fatal(err)
	}
	at := make([]int64, len(h.Versions))
	for _, v := range h.Versions {
		at[v.Version] = v.CommittedAtUnixMicros
	}

	for _, tc := range []struct{ sql, want string }{
		{"SELECT name FROM clips AT (VERSION => 1)", "a.mp4"},
		{"SELECT name FROM clips AT (VERSION => 2) ORDER BY name", "a.mp4 b.mp4"},
		{"SELECT name FROM clips ORDER BY name", "a.mp4 b.mp4 c.mp4"},
		{"SELECT name FROM clips AT (TIMESTAMP => " + sqlTimestamp(at[2]) + ") ORDER BY name", "a.mp4 b.mp4"},
		{"SELECT name FROM clips AT (TIMESTAMP => " + sqlTimestamp(at[2]-1) + ")", "a.mp4"},
		{"SELECT n.name FROM clips n AT (VERSION => 3) LEFT JOIN clips o AT (VERSION => 1) USING (name) WHERE o.name IS NULL ORDER BY 1", "b.mp4 c.mp4"},
		{"WITH old AS (SELECT name FROM clips AT (VERSION => 2)) SELECT name FROM clips WHERE name NOT IN (SELECT name FROM old)", "c.mp4"},
	} {
		got, err := queryNames(ctx, c, tc.sql)
		if err != nil || strings.Join(got, " ") != tc.want {
			t.Errorf("%s: %v (%v), want %s", tc.sql, got, err, tc.want)
		}
	}

	t.Run("prepared statement of a Flight SQL client", func(t *testing.T) {
		sc, err := flightsql.NewClient(q.Addr(), nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		p, err := sc.Prepare(ctx, "SELECT o.name FROM clips o AT (VERSION => 2) JOIN clips USING (name) ORDER BY 1")
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(ctx)
		for range 2 {
			info, err := p.Execute(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rdr, err := sc.DoGet(ctx, info.Endpoint[0].Ticket)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for rdr.Next() {
				col := rdr.RecordBatch().Column(0).(*array.String)
				for i := range col.Len() {
					got = append(got, col.Value(i))
				}
			}
			err = rdr.Err()
			rdr.Release()
			if err != nil || strings.Join(got, " ") != "a.mp4 b.mp4" {
				t.Fatalf("prepared: %v (%v)", got, err)
			}
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			sql  string
			code codes.Code
		}{
			{"SELECT * FROM clips AT (VERSION => 42)", codes.NotFound},
			{"SELECT * FROM clips AT (TIMESTAMP => " + sqlTimestamp(time.Now().Add(24*time.Hour).UnixMicro()) + ")", codes.InvalidArgument},
			{"SELECT * FROM clips AT (TIMESTAMP => " + sqlTimestamp(at[0]-1) + ")", codes.NotFound},
			{"SELECT * FROM clips AT (VERSION => 1 + 1)", codes.InvalidArgument},
		} {
			if _, err := queryCount(ctx, c, tc.sql); status.Code(err) != tc.code {
				t.Errorf("%s: %v, want %v", tc.sql, err, tc.code)
			}
		}
	})

	t.Run("CLI", func(t *testing.T) {
		out := runLake(t, endpoint, "table", "describe", "clips", "--version", "2")
		if !strings.Contains(out, "version     2\n") || !strings.Contains(out, "rows        2\n") || strings.Count(out, "_lake/tables/") != 2 {
			t.Errorf("describe --version 2:\n%s", out)
		}
		dst := filepath.Join(t.TempDir(), "b.mp4")
		runLake(t, endpoint, "get", "--table", "clips", "--key", keys["b.mp4"], "--version", "2", "-o", dst)
		if got, err := os.ReadFile(dst); err != nil || string(got) != "bytes of b.mp4" {
			t.Errorf("get --version 2: %q (%v)", got, err)
		}
		if _, err := c.FindFileAt(ctx, "clips", keys["c.mp4"], 2); !errors.Is(err, client.ErrFileNotFound) {
			t.Errorf("c.mp4 at version 2: %v", err)
		}
		out, err := runLakeEnv(t, nil, "get", "--table", "clips", "--key", keys["c.mp4"], "--version", "2", "-o", dst, "--endpoint", endpoint)
		if err == nil || !strings.Contains(out, "no such file in the table") {
			t.Errorf("get of c.mp4 at version 2: %v\n%s", err, out)
		}
	})
}
