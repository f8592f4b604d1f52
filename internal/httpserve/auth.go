package httpserve

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/lakedata/lake/internal/auth"
	"github.com/lakedata/lake/wire"
)

// guard checks the bearer token of an HTTP request against the token file
// of the role, as auth's interceptors check a Flight call's. No tokens: it
// lets everything through, as Flight does.
type guard struct {
	digests [][sha256.Size]byte
	scopes  []wire.Scope
}

func newGuard(tokens []auth.Token) *guard {
	g := &guard{digests: make([][sha256.Size]byte, len(tokens)), scopes: make([]wire.Scope, len(tokens))}
	for i, t := range tokens {
		g.digests[i] = sha256.Sum256([]byte(t.Value))
		g.scopes[i] = t.Scope
	}
	return g
}

// open reports whether the guard lets every request through.
func (g *guard) open() bool { return len(g.digests) == 0 }

// require wraps h so that it runs only for a request whose token has at
// least the scope need. Anything else gets 401 (no or a wrong token) or
// 403 (too narrow a scope) and a one-line reason that never quotes the
// presented value.
func (g *guard) require(need wire.Scope, h http.Handler) http.Handler {
	if g.open() {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scope, reason := g.check(r)
		if reason != "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="lake"`)
			http.Error(w, reason, http.StatusUnauthorized)
			return
		}
		if !scope.Allows(need) {
			http.Error(w, "a "+scope.String()+" token may not read this; it needs the "+need.String()+" scope", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// check authenticates r: its scope, or the reason it is refused.
func (g *guard) check(r *http.Request) (wire.Scope, string) {
	vals := r.Header.Values("Authorization")
	switch {
	case len(vals) == 0:
		return 0, `missing "Authorization: Bearer <token>" header`
	case len(vals) > 1:
		return 0, "more than one Authorization header"
	}
	scheme, tok, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return 0, "the authorization scheme must be Bearer"
	}
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return 0, "empty bearer token"
	}
	scope, found := g.match(tok)
	if !found {
		return 0, "invalid bearer token"
	}
	return scope, ""
}

// match compares digests of tok with every accepted token, without an
// early exit, so timing tells neither which token matched nor a token's
// length (the way auth's verifier does).
func (g *guard) match(tok string) (wire.Scope, bool) {
	d := sha256.Sum256([]byte(tok))
	found, scope := 0, 0
	for i := range g.digests {
		eq := subtle.ConstantTimeCompare(d[:], g.digests[i][:])
		found |= eq
		scope = subtle.ConstantTimeSelect(eq, int(g.scopes[i]), scope)
	}
	return wire.Scope(scope), found == 1
}
