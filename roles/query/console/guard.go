package console

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"net/url"
	"time"

	"github.com/lakedata/lake/wire"
)

// maxFormBytes bounds a posted form: the SQL text (at most 1 MiB, the
// query role's own bound) and a little more.
const maxFormBytes = 1<<20 + 64<<10

type sessionKey struct{}

// sessionOf is the session signedIn found for r.
func sessionOf(r *http.Request) *session {
	s, _ := r.Context().Value(sessionKey{}).(*session)
	return s
}

// currentSession returns r's live session. On an open lake a request
// without one gets a new one, cookie and all, since there is nothing to
// sign in with; it still needs the session for its CSRF token.
func (c *Console) currentSession(w http.ResponseWriter, r *http.Request) (*session, bool) {
	now := time.Now()
	if ck, err := r.Cookie(cookieName); err == nil {
		if s, ok := c.sessions.get(ck.Value, now); ok {
			return s, true
		}
	}
	if !c.tokens.Open() {
		return nil, false
	}
	id := c.sessions.create([sha256.Size]byte{}, wire.ScopeAdmin, now)
	http.SetCookie(w, sessionCookie(r, id, int(sessionLifetime/time.Second)))
	s, _ := c.sessions.get(id, now)
	return s, true
}

// signedIn runs next with the request's session; without one a page
// answers 303 to the sign-in page, which comes back here afterwards.
func (c *Console) signedIn(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok := c.currentSession(w, r)
		if !ok {
			if r.Method != http.MethodGet {
				http.Error(w, "sign in first", http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, "/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, s)))
	}
}

// signedInData is signedIn for endpoints a page loads (object bytes):
// without a session they answer 401 and nothing else.
func (c *Console) signedInData(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok := c.currentSession(w, r)
		if !ok {
			w.Header().Set("Cache-Control", "no-store")
			http.Error(w, "sign in first", http.StatusUnauthorized)
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, s)))
	}
}

// sameOrigin refuses a POST that does not come from a page of the
// console: its Origin, or when a browser sends none its Referer, must be
// the console's own scheme and host. Together with SameSite=Strict and
// the form's CSRF token this keeps other sites' forms out, sign-in's
// included (which has no session yet).
func (c *Console) sameOrigin(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !fromOwnOrigin(r) {
			http.Error(w, "refused: the form was not sent from this console", http.StatusForbidden)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		// A form trickled in byte by byte must not hold the connection:
		// the body has a minute to arrive.
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(formReadTimeout))
		next(w, r)
	}
}

// formReadTimeout is how long a POSTed form may take to arrive.
const formReadTimeout = time.Minute

func fromOwnOrigin(r *http.Request) bool {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	own := scheme + "://" + r.Host
	if o := r.Header.Get("Origin"); o != "" {
		return o == own
	}
	ref, err := url.Parse(r.Header.Get("Referer"))
	if err != nil || ref.Host == "" {
		return false
	}
	return ref.Scheme+"://"+ref.Host == own
}

// csrf refuses a POST whose form does not carry its session's CSRF
// token.
func (c *Console) csrf(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := sessionOf(r)
		if s == nil || subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(s.csrf)) != 1 {
			http.Error(w, "refused: the form's CSRF token is missing or stale; reload the page", http.StatusForbidden)
			return
		}
		next(w, r)
	}
}

// allowed reports whether the session's scope allows the action, as the
// Flight interceptors decide it (wire's action table).
func allowed(s *session, action string) bool {
	a, ok := wire.LookupAction(action)
	return ok && s != nil && s.scope.Allows(a.Scope)
}
