package httpserve

import (
	"net/http"

	"github.com/lakedata/lake/internal/auth"
	"github.com/lakedata/lake/wire"
)

// guard checks the bearer token of an HTTP request against the token file
// of the role, with the same auth.TokenSet check as the Flight
// interceptors. No tokens: it lets everything through, as Flight does.
type guard struct{ tokens *auth.TokenSet }

func newGuard(tokens []auth.Token) *guard { return &guard{tokens: auth.NewTokenSet(tokens)} }

// open reports whether the guard lets every request through.
func (g *guard) open() bool { return g.tokens.Open() }

// require wraps h so that it runs only for a request whose token has at
// least the scope need. Anything else gets 401 (no or a wrong token) or
// 403 (too narrow a scope) and a one-line reason that never quotes the
// presented value.
func (g *guard) require(need wire.Scope, h http.Handler) http.Handler {
	if g.open() {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scope, err := g.tokens.Bearer(r.Header.Values("Authorization"))
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="lake"`)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if !scope.Allows(need) {
			http.Error(w, "a "+scope.String()+" token may not read this; it needs the "+need.String()+" scope", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}
