package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"strings"

	"github.com/lakedata/lake/wire"
)

// TokenSet is the tokens a role accepts, with their scopes: the one check
// behind every door of a role (the Flight interceptors, the HTTP
// endpoints, the console's sign-in). It holds the SHA-256 of each token,
// not the token, and compares digests, so the comparison is
// length-independent and timing reveals neither a token's bytes nor its
// length.
type TokenSet struct {
	digests [][sha256.Size]byte
	scopes  []wire.Scope
}

// NewTokenSet makes the set of tokens.
func NewTokenSet(tokens []Token) *TokenSet {
	s := &TokenSet{digests: make([][sha256.Size]byte, len(tokens)), scopes: make([]wire.Scope, len(tokens))}
	for i, t := range tokens {
		s.digests[i] = sha256.Sum256([]byte(t.Value))
		s.scopes[i] = t.Scope
	}
	return s
}

// Open reports a role without tokens: every caller is let in, as admin.
func (s *TokenSet) Open() bool { return len(s.digests) == 0 }

// Match compares tok with every accepted token, without an early exit, so
// the time taken does not tell which token (if any) matched, and returns
// the matching token's scope.
func (s *TokenSet) Match(tok string) (wire.Scope, bool) {
	d := sha256.Sum256([]byte(tok))
	found, scope := 0, 0
	for i := range s.digests {
		eq := subtle.ConstantTimeCompare(d[:], s.digests[i][:])
		found |= eq
		scope = subtle.ConstantTimeSelect(eq, int(s.scopes[i]), scope)
	}
	return wire.Scope(scope), found == 1
}

// Bearer authenticates the values of a request's authorization header
// (HTTP) or metadata (gRPC): the scope of its token, or ErrUnauthenticated.
// Every rejection reason is its own message, so an operator can tell a
// missing header from a wrong token, but none quotes the presented value.
func (s *TokenSet) Bearer(vals []string) (wire.Scope, error) {
	switch {
	case len(vals) == 0:
		return 0, unauthenticated(`missing "authorization: Bearer <token>"`)
	case len(vals) > 1:
		// Two headers make it ambiguous which one a proxy or a log saw.
		return 0, unauthenticated("more than one authorization value")
	}
	scheme, tok, ok := strings.Cut(vals[0], " ")
	// Auth schemes are case-insensitive (RFC 9110 §11.1).
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return 0, unauthenticated("the authorization scheme must be Bearer")
	}
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return 0, unauthenticated("empty bearer token")
	}
	scope, ok := s.Match(tok)
	if !ok {
		return 0, unauthenticated("invalid bearer token")
	}
	return scope, nil
}
