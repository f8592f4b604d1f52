package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakedata/lake/client"
)

// TestDeletesThroughTheCLI: against meta and query as processes, on a
// local stage and on versitygw, `lake rm --key` and `lake rm --where`
// delete rows as one version each, and bad input — a key no row has, a
// predicate with a second statement, one that calls a function lake SQL
// refuses, one that closes a parenthesis it did not open, --key with
// --where — is refused with its exit code and changes nothing. Deleted
// rows stay in the older version's data files.
func TestDeletesThroughTheCLI(t *testing.T) {
	for _, st := range compactStages {
		t.Run(st.name, func(t *testing.T) {
			stage := st.make(t)
			dir := t.TempDir()
			m := startLake(t, append([]string{"serve", "--role=meta", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "meta")}, stage.flags...)...)
			q := startLake(t, "serve", "--role=query", "--listen", "127.0.0.1:0", "--meta", m.Addr(), "--data-dir", filepath.Join(dir, "query"))
			endpoint := "grpc://" + q.Addr()
			runLake(t, endpoint, "table", "create", "clips")
			var paths []string
			for _, name := range []string{"a.bin", "b.bin", "c.bin", "d.bin", "e.bin"} {
				p := filepath.Join(dir, name)
				if err := os.WriteFile(p, []byte("bytes of "+name), 0o644); err != nil {
					t.Fatal(err)
				}
				paths = append(paths, p)
			}
			keys := map[string]string{} // name → key
			for _, line := range strings.Split(strings.TrimSpace(runLake(t, endpoint, append([]string{"put", "--table", "clips", "--json", "--no-progress"}, paths...)...)), "\n") {
				var put struct{ Path, Key string }
				if err := json.Unmarshal([]byte(line), &put); err != nil {
					t.Fatalf("put output %q: %v", line, err)
				}
				keys[filepath.Base(put.Path)] = put.Key
			}
			names := func() string {
				var rows []struct{ Names string }
				out := runLake(t, endpoint, "sql", "SELECT string_agg(name, ',' ORDER BY name) AS names FROM clips", "--format", "json")
				if err := json.Unmarshal([]byte("["+strings.Join(strings.Fields(out), ",")+"]"), &rows); err != nil || len(rows) != 1 {
					t.Fatalf("sql output %q: %v", out, err)
				}
				return rows[0].Names
			}
			if got := names(); got != "a.bin,b.bin,c.bin,d.bin,e.bin" {
				t.Fatalf("rows before: %q", got)
			}
			ctx := withTimeout(t, 2*time.Minute)
			cl, err := client.Connect(ctx, endpoint)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			before, err := cl.Describe(ctx, "clips")
			if err != nil {
				t.Fatal(err)
			}

			out := runLake(t, endpoint, "rm", "--table", "clips", "--key", keys["b.bin"], "--json")
			var res struct {
				Version, Rows int64
				Duplicate     bool
			}
			if err := json.Unmarshal([]byte(out), &res); err != nil || res.Rows != 1 || res.Version != before.GetVersion()+1 {
				t.Fatalf("rm --key: %q (%v), want 1 row at version %d", out, err, before.GetVersion()+1)
			}
			out = runLake(t, endpoint, "rm", "--table", "clips", "--where", "name IN ('d.bin', 'e.bin') AND file.size > 0")
			if !strings.Contains(out, "deleted 2 rows") {
				t.Fatalf("rm --where: %q", out)
			}
			if got := names(); got != "a.bin,c.bin" {
				t.Fatalf("rows after the deletes: %q", got)
			}
			after, err := cl.Describe(ctx, "clips")
			if err != nil {
				t.Fatal(err)
			}

			for _, c := range []struct {
				args []string
				code int
				want string
			}{
				{[]string{"--key", "objects/2026/12/01/nobody-has-this"}, 1, "no row has"},
				{[]string{"--key", keys["a.bin"], "--key", keys["b.bin"]}, 1, "no row has"}, // b.bin is gone already
				{[]string{"--where", "true; SELECT 1"}, 1, "one expression"},
				{[]string{"--where", "read_text('/etc/passwd') IS NOT NULL"}, 1, "not allowed"},
				{[]string{"--where", "true) OR (true"}, 1, "parenthesis"},
				{[]string{"--where", "name = 'a.bin' -- and more"}, 1, "comment"},
				{[]string{"--key", keys["a.bin"], "--where", "true"}, 2, "not both"},
				{[]string{}, 2, "--key"},
			} {
				stdout, stderr, code := runLakeExit(t, endpoint, append([]string{"rm", "--table", "clips"}, c.args...)...)
				if code != c.code || !strings.Contains(stderr, c.want) {
					t.Errorf("lake rm %q exited %d (want %d), stderr %q (want %q), stdout %q", c.args, code, c.code, stderr, c.want, stdout)
				}
			}
			if info, err := cl.Describe(ctx, "clips"); err != nil || info.GetVersion() != after.GetVersion() || info.GetRows() != 2 {
				t.Errorf("after the refused deletes: %v, %v; want version %d with 2 rows", info, err, after.GetVersion())
			}
			if got := names(); got != "a.bin,c.bin" {
				t.Errorf("rows after the refused deletes: %q", got)
			}
			// The version before the deletes still has all five rows.
			v := before.GetVersion()
			snap, err := cl.Snapshot(ctx, "clips", &v)
			if err != nil {
				t.Fatal(err)
			}
			var rows int64
			for _, f := range snap.GetFiles() {
				rows += f.GetRows()
			}
			if rows != 5 {
				t.Errorf("version %d holds %d rows, want 5", before.GetVersion(), rows)
			}
			t.Logf("%s: deletes at versions %d..%d", st.name, before.GetVersion()+1, after.GetVersion())
		})
	}
}
