package console

import (
	"crypto/sha256"
	"crypto/subtle"

	"github.com/lakedata/lake/internal/auth"
	"github.com/lakedata/lake/wire"
)

// tokenSet checks a signed-in token the way the Flight interceptors do:
// SHA-256 digests compared in constant time against every accepted token,
// so timing tells neither which token matched nor its length.
type tokenSet struct {
	digests [][sha256.Size]byte
	scopes  []wire.Scope
}

func newTokenSet(tokens []auth.Token) *tokenSet {
	s := &tokenSet{}
	for _, t := range tokens {
		s.digests = append(s.digests, sha256.Sum256([]byte(t.Value)))
		s.scopes = append(s.scopes, t.Scope)
	}
	return s
}

// open reports a lake without tokens: no sign-in, every call allowed.
func (s *tokenSet) open() bool { return len(s.digests) == 0 }

// match returns the scope of tok, false when no accepted token is tok.
func (s *tokenSet) match(tok string) (wire.Scope, bool) {
	d := sha256.Sum256([]byte(tok))
	found, scope := 0, 0
	for i := range s.digests {
		eq := subtle.ConstantTimeCompare(d[:], s.digests[i][:])
		found |= eq
		scope = subtle.ConstantTimeSelect(eq, int(s.scopes[i]), scope)
	}
	return wire.Scope(scope), found == 1
}
