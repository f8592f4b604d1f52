package auth_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/lakedata/lake/internal/auth"
	"github.com/lakedata/lake/wire"
)

func admin(values ...string) []auth.Token { return auth.AdminTokens(values) }

func TestLoadTokens(t *testing.T) {
	const (
		a = "0123456789abcdef"                 // exactly MinTokenBytes
		b = "tok-b-5e1f2a7c9d3b8e4f6a0c1d2e3f" // longer
		c = "tok-c-4b1d2e3f5a6b7c8d9e0f1a2b3c"
		d = "tok-d-9f8e7d6c5b4a3f2e1d0c9b8a7f"
	)
	cases := []struct {
		name    string
		content string
		mode    os.FileMode
		want    []auth.Token
		wantErr string // substring of the error; "" means success
	}{
		{name: "one token", content: a + "\n", mode: 0o600, want: admin(a)},
		{name: "no trailing newline", content: a, mode: 0o600, want: admin(a)},
		{name: "two tokens", content: a + "\n" + b + "\n", mode: 0o600, want: admin(a, b)},
		{name: "comments blanks and whitespace", content: "# rotated 2025-01\n\n  " + a + "  \n\t# old: none\r\n\t" + b + "\r\n\n", mode: 0o600, want: admin(a, b)},
		{name: "duplicates collapse", content: a + "\n" + a + "\n", mode: 0o600, want: admin(a)},
		{name: "read-only owner", content: a, mode: 0o400, want: admin(a)},
		{name: "scopes", content: a + " read\n" + b + "\twrite\n" + c + "  admin \r\n" + d + "\n", mode: 0o600,
			want: []auth.Token{{Value: a, Scope: wire.ScopeRead}, {Value: b, Scope: wire.ScopeWrite}, {Value: c, Scope: wire.ScopeAdmin}, {Value: d, Scope: wire.ScopeAdmin}}},
		{name: "a scoped duplicate collapses", content: a + " write\n" + a + "\t write\n", mode: 0o600, want: []auth.Token{{Value: a, Scope: wire.ScopeWrite}}},
		{name: "one token, two scopes", content: a + " read\n# note\n" + a + " admin\n", mode: 0o600, wantErr: "line 3: invalid token: the token of line 1 again, with another scope"},
		{name: "bare token is admin, so a read twin conflicts", content: a + "\n" + a + " read\n", mode: 0o600, wantErr: "line 2: invalid token: the token of line 1 again"},
		{name: "unknown scope", content: a + "\n" + b + " readonly\n", mode: 0o600, wantErr: "line 2: invalid token: unknown scope; a line is TOKEN or TOKEN SCOPE, SCOPE one of read, write, admin"},
		{name: "scope is case-sensitive", content: a + " Admin\n", mode: 0o600, wantErr: "line 1: invalid token: unknown scope"},
		{name: "three fields", content: "# c\n\n" + a + " read write\n", mode: 0o600, wantErr: "line 3: invalid token: 3 fields; a line is TOKEN or TOKEN SCOPE"},
		{name: "a token with a space in it", content: "0123456789 abcdef", mode: 0o600, wantErr: "line 1: invalid token: unknown scope"},
		{name: "short scoped token", content: "short-secret read\n", mode: 0o600, wantErr: "line 1: invalid token: the token is 12 bytes"},
		{name: "scope alone is a short token", content: "admin\n", mode: 0o600, wantErr: "line 1: invalid token: the token is 5 bytes"},
		{name: "empty file", content: "", mode: 0o600, wantErr: "holds no token"},
		{name: "only comments", content: "# nothing here\n\n   \n", mode: 0o600, wantErr: "holds no token"},
		{name: "short token", content: a + "\nshort-secret\n", mode: 0o600, wantErr: "line 2: invalid token: the token is 12 bytes, at least 16"},
		{name: "control byte inside", content: "0123456789\vabcdef", mode: 0o600, wantErr: "line 1: invalid token: the token contains spaces"},
		{name: "non-ASCII", content: "0123456789abcdéf", mode: 0o600, wantErr: "printable ASCII"},
		{name: "group readable", content: a, mode: 0o640, wantErr: "chmod 600"},
		{name: "world readable", content: a, mode: 0o644, wantErr: "accessible by group or others (mode 0644)"},
		{name: "group writable", content: a, mode: 0o620, wantErr: "chmod 600"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if runtime.GOOS == "windows" && tc.mode&0o077 != 0 {
				t.Skip("no Unix permissions")
			}
			path := filepath.Join(t.TempDir(), "tokens")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			// Chmod after the write: WriteFile's mode is filtered by umask.
			if err := os.Chmod(path, tc.mode); err != nil {
				t.Fatal(err)
			}
			got, err := auth.LoadTokens(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				// Errors name lines, never tokens nor a word that is not a scope.
				for _, line := range strings.Split(tc.content, "\n") {
					if line = strings.TrimSpace(line); strings.HasPrefix(line, "#") {
						continue
					}
					for _, f := range strings.Fields(line) {
						if _, scope := auth.ParseScope(f); !scope && len(f) > 3 && strings.Contains(err.Error(), f) {
							t.Fatalf("err quotes %q of a line: %v", f, err)
						}
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("tokens = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLoadTokensMissingFileOrDirectory(t *testing.T) {
	dir := t.TempDir()
	if _, err := auth.LoadTokens(filepath.Join(dir, "nope")); err == nil || !os.IsNotExist(unwrapAll(err)) {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := auth.LoadTokens(dir); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Fatalf("directory: %v", err)
	}
}

func TestLoadTokensTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(strings.Repeat("#\n", 1<<20)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.LoadTokens(path); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("err = %v", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

func TestTokenPrintsNoValue(t *testing.T) {
	tok := auth.Token{Value: "secret-value-0123456789", Scope: wire.ScopeWrite}
	for _, s := range []string{fmt.Sprint(tok), fmt.Sprintf("%v %+v %#v %s", tok, tok, tok, tok), fmt.Sprint([]auth.Token{tok})} {
		if strings.Contains(s, "secret") {
			t.Fatalf("a printed Token shows its value: %s", s)
		}
		if !strings.Contains(s, "write") {
			t.Fatalf("a printed Token does not show its scope: %s", s)
		}
	}
}

func TestWidest(t *testing.T) {
	r, w1, w2, a := auth.Token{Value: "r", Scope: wire.ScopeRead}, auth.Token{Value: "w1", Scope: wire.ScopeWrite},
		auth.Token{Value: "w2", Scope: wire.ScopeWrite}, auth.Token{Value: "a", Scope: wire.ScopeAdmin}
	cases := []struct {
		in   []auth.Token
		want string
	}{
		{nil, ""},
		{[]auth.Token{r}, "r"},
		{[]auth.Token{r, w1, w2}, "w1"},
		{[]auth.Token{w1, r, a, w2}, "a"},
	}
	for _, tc := range cases {
		got, ok := auth.Widest(tc.in)
		if got.Value != tc.want || ok != (tc.want != "") {
			t.Errorf("Widest(%v) = %q, %v; want %q", tc.in, got.Value, ok, tc.want)
		}
	}
}
