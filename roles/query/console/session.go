package console

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"sync"
	"time"

	"github.com/lakedata/lake/wire"
)

// Sessions live in the console's memory only: a restart signs everyone
// out, which is the safe failure.
const (
	cookieName      = "lake_console"
	sessionLifetime = 12 * time.Hour
	// maxSessions bounds the store; an open lake makes a session per
	// visitor, so a flood of visitors must not grow it without end.
	maxSessions = 10000
	// maxSessionsPerToken bounds the sessions of one token: signing in
	// costs nothing, so without it one token's holder could fill the store
	// and push everyone else's sessions out.
	maxSessionsPerToken = 64
)

// session is what a session id stands for. It holds the token's scope,
// never the token.
type session struct {
	owner   [sha256.Size]byte // the SHA-256 of the token signed in with; zero on an open lake
	scope   wire.Scope
	csrf    string // the token every form of the session carries
	expires time.Time
}

// sessionStore maps the SHA-256 of a session id to its session, so the
// ids themselves are not kept.
type sessionStore struct {
	mu   sync.Mutex
	byID map[[sha256.Size]byte]*session
	max  int
}

func newSessionStore(max int) *sessionStore {
	return &sessionStore{byID: map[[sha256.Size]byte]*session{}, max: max}
}

// randomToken is 32 bytes from crypto/rand, base64url without padding.
func randomToken() string {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// create starts a session of scope for the token whose SHA-256 is owner
// and returns its id. A token past maxSessionsPerToken loses its own
// oldest session, so other tokens' sessions stay.
func (s *sessionStore) create(owner [sha256.Size]byte, scope wire.Scope, now time.Time) string {
	id := randomToken()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.count(owner, now) >= maxSessionsPerToken {
		s.evict(now, &owner)
	}
	if len(s.byID) >= s.max {
		s.evict(now, nil)
	}
	s.byID[sha256.Sum256([]byte(id))] = &session{owner: owner, scope: scope, csrf: randomToken(), expires: now.Add(sessionLifetime)}
	return id
}

// count is how many live sessions owner has. Called with mu held.
func (s *sessionStore) count(owner [sha256.Size]byte, now time.Time) int {
	n := 0
	for _, v := range s.byID {
		if v.owner == owner && !now.After(v.expires) {
			n++
		}
	}
	return n
}

// evict drops expired sessions, and when that made no room the one that
// expires first — of owner's sessions when owner is set, else of all.
// Called with mu held.
func (s *sessionStore) evict(now time.Time, owner *[sha256.Size]byte) {
	var oldest [sha256.Size]byte
	var oldestAt time.Time
	for k, v := range s.byID {
		if now.After(v.expires) {
			delete(s.byID, k)
			continue
		}
		if owner != nil && v.owner != *owner {
			continue
		}
		if oldestAt.IsZero() || v.expires.Before(oldestAt) {
			oldest, oldestAt = k, v.expires
		}
	}
	full := len(s.byID) >= s.max
	if owner != nil {
		full = s.count(*owner, now) >= maxSessionsPerToken
	}
	if full && !oldestAt.IsZero() {
		delete(s.byID, oldest)
	}
}

// get returns the live session of id.
func (s *sessionStore) get(id string, now time.Time) (*session, bool) {
	if id == "" {
		return nil, false
	}
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.byID[k]
	if !ok {
		return nil, false
	}
	if now.After(v.expires) {
		delete(s.byID, k)
		return nil, false
	}
	return v, true
}

func (s *sessionStore) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, sha256.Sum256([]byte(id)))
}

// sessionCookie is the cookie that carries id: HttpOnly (no script reads
// it), SameSite=Strict (no other site's request carries it), Secure when
// the console is served over TLS, for the whole console.
func sessionCookie(r *http.Request, id string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name: cookieName, Value: id, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	}
}
