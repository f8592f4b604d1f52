package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakedata/lake/client"
)

// scopeTokens are the three tokens of a token file, one per scope.
type scopeTokens struct{ read, write, admin string }

func newScopeTokens() scopeTokens {
	return scopeTokens{read: "read-" + randomToken(), write: "write-" + randomToken(), admin: "admin-" + randomToken()}
}

func randomToken() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// writeTokenFile writes lines to a 0600 file in dir and returns its path.
func writeTokenFile(t *testing.T, dir, name string, lines ...string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runAs runs a CLI command with token as $LAKE_TOKEN ("" for none) and
// returns its stdout, stderr and exit status.
func runAs(t *testing.T, endpoint, token string, args ...string) (string, string, int) {
	t.Helper()
	env := []string{"AWS_EC2_METADATA_DISABLED=true"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LAKE_TOKEN=") {
			env = append(env, kv)
		}
	}
	if token != "" {
		env = append(env, "LAKE_TOKEN="+token)
	}
	return runLakeExitEnv(t, env, endpoint, args...)
}

// scopeDeployment is a running lake with scoped tokens: endpoint is where
// clients call, tokens what they may present.
type scopeDeployment struct {
	endpoint string
	tokens   scopeTokens
	dir      string
}

// mustRun runs a command that must succeed.
func (d *scopeDeployment) mustRun(t *testing.T, token string, args ...string) string {
	t.Helper()
	out, errOut, code := runAs(t, d.endpoint, token, args...)
	if code != 0 {
		t.Fatalf("lake %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// state is the table's version (from meta) and row count (from SQL), read
// with the admin token.
func (d *scopeDeployment) state(t *testing.T, table string) (version, rows int64) {
	t.Helper()
	ctx := withTimeout(t, time.Minute)
	cl, err := client.Connect(ctx, d.endpoint, client.WithToken(d.tokens.admin), client.WithCheckpointDir(filepath.Join(d.dir, "cp")))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	info, err := cl.Describe(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	out := d.mustRun(t, d.tokens.admin, "sql", "SELECT count(*) AS n FROM "+table, "--format", "json")
	var row struct{ N int64 }
	if err := json.Unmarshal([]byte(out), &row); err != nil {
		t.Fatalf("sql output %q: %v", out, err)
	}
	return info.GetVersion(), row.N
}

// tableExists asks meta, with the admin token, whether the table exists.
func (d *scopeDeployment) tableExists(t *testing.T, table string) bool {
	t.Helper()
	out := d.mustRun(t, d.tokens.admin, "table", "ls")
	for _, f := range strings.Fields(out) {
		if f == table {
			return true
		}
	}
	return false
}

// put puts one new file as token and returns its key.
func (d *scopeDeployment) put(t *testing.T, token, name string) (key, stderr string, code int) {
	t.Helper()
	p := filepath.Join(d.dir, name)
	if err := os.WriteFile(p, []byte("bytes of "+name+" "+randomToken()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runAs(t, d.endpoint, token, "put", "--table", "clips", "--json", "--no-progress", "--checkpoint-dir", filepath.Join(d.dir, "cp"), p)
	if code != 0 {
		return "", errOut, code
	}
	var res struct{ Key string }
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Key == "" {
		t.Fatalf("put output %q: %v", out, err)
	}
	return res.Key, errOut, 0
}

// denied runs a command that the token's scope must refuse: exit status 1,
// "permission denied" in the message, the token not in it, and the table's
// version and rows as they were.
func (d *scopeDeployment) denied(t *testing.T, token string, args ...string) {
	t.Helper()
	v0, n0 := d.state(t, "clips")
	out, errOut, code := runAs(t, d.endpoint, token, args...)
	if code != 1 || !strings.Contains(strings.ToLower(errOut), "permission denied") {
		t.Errorf("lake %s: exit %d, stderr %q; want exit 1 and permission denied\nstdout: %s", strings.Join(args, " "), code, errOut, out)
	}
	if strings.Contains(errOut+out, token) {
		t.Errorf("lake %s: the output quotes the token", strings.Join(args, " "))
	}
	if v, n := d.state(t, "clips"); v != v0 || n != n0 {
		t.Errorf("lake %s was refused but changed the table: version %d → %d, rows %d → %d", strings.Join(args, " "), v0, v, n0, n)
	}
}

// checkScopes is the scope table of DESIGN §12 through d: what a read, a
// write and an admin token may do, and what a call without a token gets.
func checkScopes(t *testing.T, d *scopeDeployment) {
	tk := d.tokens
	d.mustRun(t, tk.admin, "table", "create", "clips")
	adminKey, errOut, code := d.put(t, tk.admin, "a.bin")
	if code != 0 {
		t.Fatalf("admin put: exit %d: %s", code, errOut)
	}

	t.Run("read", func(t *testing.T) {
		if out := d.mustRun(t, tk.read, "sql", "SELECT name FROM clips", "--format", "csv"); !strings.Contains(out, "a.bin") {
			t.Errorf("read sql: %q", out)
		}
		if out := d.mustRun(t, tk.read, "table", "ls"); !strings.Contains(out, "clips") {
			t.Errorf("read table ls: %q", out)
		}
		d.mustRun(t, tk.read, "table", "describe", "clips")
		d.mustRun(t, tk.read, "table", "history", "clips")
		d.mustRun(t, tk.read, "status")
		d.mustRun(t, tk.read, "verify", "--table", "clips")
		got := filepath.Join(d.dir, "got-by-read")
		d.mustRun(t, tk.read, "get", "--table", "clips", "--key", adminKey, "-o", got)
		if b, err := os.ReadFile(got); err != nil || !strings.HasPrefix(string(b), "bytes of a.bin") {
			t.Errorf("read get: %q, %v", b, err)
		}

		d.denied(t, tk.read, "put", "--table", "clips", "--no-progress", "--checkpoint-dir", filepath.Join(d.dir, "cp"), writeFile(t, d.dir, "by-read.bin"))
		d.denied(t, tk.read, "rm", "--table", "clips", "--key", adminKey)
		d.denied(t, tk.read, "table", "create", "by_read")
		d.denied(t, tk.read, "table", "compact", "clips")
		d.denied(t, tk.read, "table", "expire", "clips", "--keep-last", "1")
		d.denied(t, tk.read, "gc", "--grace", "0s")
		if d.tableExists(t, "by_read") {
			t.Error("a refused create made the table")
		}
	})

	t.Run("write", func(t *testing.T) {
		v0, n0 := d.state(t, "clips")
		key, errOut, code := d.put(t, tk.write, "b.bin")
		if code != 0 {
			t.Fatalf("write put: exit %d: %s", code, errOut)
		}
		if v, n := d.state(t, "clips"); v != v0+1 || n != n0+1 {
			t.Fatalf("after a write put: version %d, %d rows; want %d, %d", v, n, v0+1, n0+1)
		}
		d.mustRun(t, tk.write, "rm", "--table", "clips", "--key", key)
		if v, n := d.state(t, "clips"); v != v0+2 || n != n0 {
			t.Fatalf("after a write rm: version %d, %d rows; want %d, %d", v, n, v0+2, n0)
		}
		d.mustRun(t, tk.write, "sql", "SELECT count(*) FROM clips")

		d.denied(t, tk.write, "table", "create", "by_write")
		d.denied(t, tk.write, "table", "compact", "clips")
		d.denied(t, tk.write, "table", "expire", "clips", "--keep-last", "1")
		d.denied(t, tk.write, "gc", "--grace", "0s")
		if d.tableExists(t, "by_write") {
			t.Error("a refused create made the table")
		}
	})

	t.Run("admin", func(t *testing.T) {
		d.mustRun(t, tk.admin, "table", "create", "by_admin")
		if !d.tableExists(t, "by_admin") {
			t.Fatal("the admin's table is not listed")
		}
		key, errOut, code := d.put(t, tk.admin, "c.bin")
		if code != 0 {
			t.Fatalf("admin put: exit %d: %s", code, errOut)
		}
		d.mustRun(t, tk.admin, "rm", "--table", "clips", "--key", key)
		d.mustRun(t, tk.admin, "table", "compact", "clips")
		d.mustRun(t, tk.admin, "table", "expire", "clips", "--keep-last", "1")
		d.mustRun(t, tk.admin, "gc", "--grace", "0s")
		d.mustRun(t, tk.admin, "status")
		d.mustRun(t, tk.admin, "sql", "SELECT count(*) FROM clips")
	})

	t.Run("no token", func(t *testing.T) {
		for _, args := range [][]string{{"table", "ls"}, {"sql", "SELECT 1"}, {"table", "create", "by_nobody"}} {
			_, errOut, code := runAs(t, d.endpoint, "", args...)
			if code != 1 || !strings.Contains(strings.ToLower(errOut), "unauthenticated") {
				t.Errorf("lake %s without a token: exit %d, stderr %q; want exit 1, unauthenticated", strings.Join(args, " "), code, errOut)
			}
		}
		if d.tableExists(t, "by_nobody") {
			t.Error("a call without a token made a table")
		}
	})
}

func writeFile(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("bytes of "+name), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestScopedTokensThroughTheQueryRole: meta and query as processes. Meta
// accepts only a peer token, which is admin; the query role accepts a
// read, a write and an admin token and reaches meta with the peer token.
// Every call a caller's scope does not allow is refused by the query role
// itself (PermissionDenied, nothing changes), though its own token could
// do it; what the scope allows is relayed and works.
func TestScopedTokensThroughTheQueryRole(t *testing.T) {
	dir := t.TempDir()
	tk := newScopeTokens()
	peer := "peer-" + randomToken()
	metaTokens := writeTokenFile(t, dir, "meta-tokens", "# the query role's token", peer+" admin")
	peerFile := writeTokenFile(t, dir, "peer-token", peer)
	queryTokens := writeTokenFile(t, dir, "query-tokens", "# readers", tk.read+" read", "", tk.write+"\twrite", tk.admin)
	env := []string{"AWS_EC2_METADATA_DISABLED=true"}
	m := startLakeEnv(t, env, "serve", "--role=meta", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "meta"),
		"--stage", "file://"+filepath.Join(dir, "stage"), "--token-file", metaTokens)
	q := startLakeEnv(t, env, "serve", "--role=query", "--listen", "127.0.0.1:0", "--meta", m.Addr(), "--data-dir", filepath.Join(dir, "query"),
		"--token-file", queryTokens, "--meta-token-file", peerFile)
	d := &scopeDeployment{endpoint: "grpc://" + q.Addr(), tokens: tk, dir: dir}
	checkScopes(t, d)

	// The client tokens mean nothing to meta itself.
	_, errOut, code := runAs(t, "grpc://"+m.Addr(), tk.admin, "table", "ls")
	if code != 1 || !strings.Contains(strings.ToLower(errOut), "unauthenticated") {
		t.Errorf("a query-role token at meta: exit %d, %q; want unauthenticated", code, errOut)
	}
}

// TestScopedTokensEmbedded: the same scope table through one `lake serve`,
// whose query role reaches the embedded meta with the widest token of the
// file; and at the embedded meta's own listener a read token is refused
// what it is refused at the query role.
func TestScopedTokensEmbedded(t *testing.T) {
	dir := t.TempDir()
	tk := newScopeTokens()
	// The read token first: the query role must not pick it for meta.
	tokens := writeTokenFile(t, dir, "tokens", tk.read+" read", tk.write+" write", tk.admin+" admin")
	p := startLakeEnv(t, []string{"AWS_EC2_METADATA_DISABLED=true"}, "serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0",
		"--data-dir", filepath.Join(dir, "data"), "--stage", "file://"+filepath.Join(dir, "stage"), "--token-file", tokens)
	d := &scopeDeployment{endpoint: "grpc://" + p.Addr(), tokens: tk, dir: dir}
	checkScopes(t, d)

	atMeta := &scopeDeployment{endpoint: "grpc://" + p.RoleAddr("meta"), tokens: tk, dir: dir}
	atMeta.mustRun(t, tk.read, "table", "describe", "clips")
	_, errOut, code := runAs(t, atMeta.endpoint, tk.read, "table", "create", "at_meta")
	if code != 1 || !strings.Contains(strings.ToLower(errOut), "permission denied") {
		t.Errorf("a read token creating a table at meta: exit %d, %q; want permission denied", code, errOut)
	}
	if d.tableExists(t, "at_meta") {
		t.Error("a refused create at meta made the table")
	}
}

// TestTokenFileErrorsNameTheLine: a token file with an unknown scope or a
// line of three fields stops `lake serve` at start, with the line number
// and without the token.
func TestTokenFileErrorsNameTheLine(t *testing.T) {
	dir := t.TempDir()
	tok := "secret-" + randomToken()
	for _, tc := range []struct {
		name, line, want string
	}{
		{"unknown scope", tok + " superuser", "line 3: invalid token: unknown scope"},
		{"three fields", tok + " read write", "line 3: invalid token: 3 fields"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := writeTokenFile(t, t.TempDir(), "tokens", "# ok", "admin-"+randomToken(), tc.line)
			cmd := exec.Command(lakeBin, "serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0",
				"--data-dir", filepath.Join(dir, tc.name), "--stage", "file://"+filepath.Join(dir, "stage"), "--token-file", f)
			cmd.Env = append(os.Environ(), "AWS_EC2_METADATA_DISABLED=true")
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("lake serve with a bad token file: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("output %q does not contain %q", out, tc.want)
			}
			if strings.Contains(string(out), tok) || strings.Contains(string(out), "superuser") {
				t.Errorf("output quotes the line: %s", out)
			}
		})
	}
}
