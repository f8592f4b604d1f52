package auth_test

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/lakedata/lake/internal/auth"
)

func TestLoadTokens(t *testing.T) {
	const (
		a = "0123456789abcdef"                 // exactly MinTokenBytes
		b = "tok-b-5e1f2a7c9d3b8e4f6a0c1d2e3f" // longer
	)
	cases := []struct {
		name    string
		content string
		mode    os.FileMode
		want    []string
		wantErr string // substring of the error; "" means success
	}{
		{name: "one token", content: a + "\n", mode: 0o600, want: []string{a}},
		{name: "no trailing newline", content: a, mode: 0o600, want: []string{a}},
		{name: "two tokens", content: a + "\n" + b + "\n", mode: 0o600, want: []string{a, b}},
		{name: "comments blanks and whitespace", content: "# rotated 2025-01\n\n  " + a + "  \n\t# old: none\r\n\t" + b + "\r\n\n", mode: 0o600, want: []string{a, b}},
		{name: "duplicates collapse", content: a + "\n" + a + "\n", mode: 0o600, want: []string{a}},
		{name: "read-only owner", content: a, mode: 0o400, want: []string{a}},
		{name: "empty file", content: "", mode: 0o600, wantErr: "holds no token"},
		{name: "only comments", content: "# nothing here\n\n   \n", mode: 0o600, wantErr: "holds no token"},
		{name: "short token", content: a + "\nshort-secret\n", mode: 0o600, wantErr: "line 2: invalid token: the token is 12 bytes, at least 16"},
		{name: "space inside", content: "0123456789 abcdef", mode: 0o600, wantErr: "line 1: invalid token: the token contains spaces"},
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
				// Errors name lines, never tokens.
				for _, line := range strings.Split(tc.content, "\n") {
					if line = strings.TrimSpace(line); len(line) > 3 && !strings.HasPrefix(line, "#") && strings.Contains(err.Error(), line) {
						t.Fatalf("err quotes a token: %v", err)
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
