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
)

// session is what a session id stands for. It holds the token's scope,
// never the token.
type session struct {
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

// create starts a session of scope and returns its id.
func (s *sessionStore) create(scope wire.Scope, now time.Time) string {
	id := randomToken()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.byID) >= s.max {
		s.evict(now)
	}
	s.byID[sha256.Sum256([]byte(id))] = &session{scope: scope, csrf: randomToken(), expires: now.Add(sessionLifetime)}
	return id
}

// evict drops expired sessions, and when none had expired the one that
// expires first. Called with mu held.
func (s *sessionStore) evict(now time.Time) {
	var oldest [sha256.Size]byte
	var oldestAt time.Time
	for k, v := range s.byID {
		if now.After(v.expires) {
			delete(s.byID, k)
			continue
		}
		if oldestAt.IsZero() || v.expires.Before(oldestAt) {
			oldest, oldestAt = k, v.expires
		}
	}
	if len(s.byID) >= s.max {
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
