package server

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lakedata/lake/internal/auth"
	"github.com/lakedata/lake/wire"
)

// TestMetaDialPresentsTheWidestToken: with no --meta-token-file a role
// reaches meta with the widest-scoped token of its own file, so a file
// that lists a read token first does not leave the query role unable to
// relay a caller's write; --meta-token-file wins when given.
func TestMetaDialPresentsTheWidestToken(t *testing.T) {
	r, w, a := auth.Token{Value: "read-token-0123456789", Scope: wire.ScopeRead},
		auth.Token{Value: "write-token-0123456789", Scope: wire.ScopeWrite},
		auth.Token{Value: "admin-token-0123456789", Scope: wire.ScopeAdmin}
	cases := []struct {
		tokens []auth.Token
		want   string
	}{
		{nil, ""},
		{[]auth.Token{r}, r.Value},
		{[]auth.Token{r, w}, w.Value},
		{[]auth.Token{r, w, a}, a.Value},
	}
	for _, tc := range cases {
		d, err := metaDial(Config{}, tc.tokens)
		if err != nil || d.Token != tc.want {
			t.Errorf("metaDial(%v): token of scope %v, %v; want the one of %q", tc.tokens, d.Token != "", err, tc.want)
		}
	}
	file := filepath.Join(t.TempDir(), "meta-token")
	if err := os.WriteFile(file, []byte("peer-token-0123456789 read\n"+a.Value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := metaDial(Config{MetaTokenFile: file}, []auth.Token{a})
	if err != nil || d.Token != "peer-token-0123456789" {
		t.Fatalf("metaDial with --meta-token-file: %v; want its first token", err)
	}
}
