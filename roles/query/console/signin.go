package console

import (
	"crypto/sha256"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// signInPage shows the sign-in form; an open lake has nothing to sign in
// with and goes straight to the tables.
func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	if c.tokens.Open() {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusOK, "signin", signInData{Next: localPath(r.URL.Query().Get("next"))})
}

type signInData struct {
	Next  string
	Error string
}

// signIn checks the posted token. A right one of any scope starts a
// session (every scope allows what the read-only console does); a wrong
// one is refused with 401 and the form again. The token is never logged,
// echoed or kept: the session holds its scope only.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	next := localPath(r.PostFormValue("next"))
	if c.tokens.Open() {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	host, now := clientHost(r.RemoteAddr), time.Now()
	if ok, wait := c.throttle.allowed(host, now); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
		c.render(w, r, http.StatusTooManyRequests, "signin", signInData{Next: next, Error: "Too many wrong tokens from this address. Wait a minute and try again."})
		return
	}
	tok := strings.TrimSpace(r.PostFormValue("token"))
	scope, ok := c.tokens.Match(tok)
	if tok == "" || !ok {
		c.throttle.failed(host, now)
		c.log.Info("console sign-in refused", "remote", r.RemoteAddr)
		c.render(w, r, http.StatusUnauthorized, "signin", signInData{Next: next, Error: "That token is not valid for this lake. Check it and try again."})
		return
	}
	// A session fixed before sign-in (a cookie set by someone else) is
	// dropped: sign-in always starts a new id.
	if ck, err := r.Cookie(cookieName); err == nil {
		c.sessions.remove(ck.Value)
	}
	id := c.sessions.create(sha256.Sum256([]byte(tok)), scope, time.Now())
	http.SetCookie(w, sessionCookie(r, id, int(sessionLifetime/time.Second)))
	c.log.Info("console sign-in", "scope", scope.String(), "remote", r.RemoteAddr)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// signOut ends the session and clears its cookie.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(cookieName); err == nil {
		c.sessions.remove(ck.Value)
	}
	http.SetCookie(w, sessionCookie(r, "", -1))
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

// localPath keeps a "next" address on the console: a path of its own
// ("/tables/x"), never another host ("//evil", "https://…", "/\evil").
func localPath(p string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.ContainsRune(p, '\\') {
		return "/"
	}
	// Browsers drop tabs and newlines from a Location before they read
	// it, so "/\t/evil.example" would leave for another host: no control
	// character at all.
	for _, c := range p {
		if c < 0x20 || c == 0x7f {
			return "/"
		}
	}
	return p
}
