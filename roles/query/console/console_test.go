package console

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lakedata/lake/internal/auth"
	"github.com/lakedata/lake/wire"
)

const readToken = "read-token-0123456789abcdef"

type rig struct {
	t    *testing.T
	lake *fakeLake
	srv  *httptest.Server
	c    *http.Client // with a cookie jar, not following redirects
}

func newRig(t *testing.T, tokens []auth.Token, objs map[string][]byte) *rig {
	t.Helper()
	l := newFakeLake(t, objs)
	con, err := New(Config{Tokens: tokens, SQL: l.sql, Meta: l, Stage: l.stage})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(con)
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &rig{t: t, lake: l, srv: srv, c: c}
}

func (r *rig) do(req *http.Request) (*http.Response, string) {
	r.t.Helper()
	resp, err := r.c.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatal(err)
	}
	return resp, string(b)
}

func (r *rig) get(path string, header ...string) (*http.Response, string) {
	r.t.Helper()
	req, err := http.NewRequest(http.MethodGet, r.srv.URL+path, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return r.do(req)
}

// post sends form from the console's own origin unless origin says
// otherwise ("-" sends neither Origin nor Referer).
func (r *rig) post(path string, form url.Values, origin string) (*http.Response, string) {
	r.t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	switch origin {
	case "":
		req.Header.Set("Origin", r.srv.URL)
	case "-":
	default:
		req.Header.Set("Origin", origin)
	}
	return r.do(req)
}

func (r *rig) signIn(token string) *http.Response {
	r.t.Helper()
	resp, _ := r.post("/signin", url.Values{"token": {token}, "next": {"/"}}, "")
	return resp
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (r *rig) csrf() string {
	r.t.Helper()
	_, body := r.get("/sql")
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		r.t.Fatalf("no CSRF token on the SQL page:\n%s", body)
	}
	return m[1]
}

func readTokens() []auth.Token { return []auth.Token{{Value: readToken, Scope: wire.ScopeRead}} }

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// TestWithoutSessionNoData: every page redirects to sign-in and the
// object endpoint answers 401, with no table data in any answer.
func TestWithoutSessionNoData(t *testing.T) {
	r := newRig(t, readTokens(), map[string][]byte{"a.webm": randomBytes(1000)})
	key := r.lake.keyOf("a.webm")
	for _, p := range []string{"/", "/tables/clips", "/sql", "/tables/clips/file?key=" + url.QueryEscape(key), "/file?key=" + url.QueryEscape(key)} {
		resp, body := r.get(p)
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/signin?next=") {
			t.Errorf("GET %s without a session: %d to %q, want 303 to /signin", p, resp.StatusCode, resp.Header.Get("Location"))
		}
		if strings.Contains(body, "<table") || strings.Contains(body, "<video") || strings.Contains(body, "uploaded") {
			t.Errorf("GET %s without a session shows table data: %s", p, body)
		}
	}
	resp, body := r.get("/tables/clips/raw?key=" + url.QueryEscape(key))
	if resp.StatusCode != http.StatusUnauthorized || len(body) > 100 {
		t.Errorf("raw object without a session: %d, %d bytes; want 401 and no data", resp.StatusCode, len(body))
	}
	resp, _ = r.post("/sql", url.Values{"q": {"SELECT 1"}}, "")
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST /sql without a session: %d, want 401", resp.StatusCode)
	}
	if q := r.lake.ranQueries(); len(q) != 0 {
		t.Errorf("SQL ran without a session: %q", q)
	}
	r.lake.mu.Lock()
	defer r.lake.mu.Unlock()
	if len(r.lake.actions) != 0 {
		t.Errorf("metadata actions called without a session: %q", r.lake.actions)
	}
}

// TestSignIn: a wrong token is refused with a message and no cookie; the
// right one starts a session in an HttpOnly, SameSite=Strict cookie that
// is not the token, and the pages answer.
func TestSignIn(t *testing.T) {
	r := newRig(t, readTokens(), nil)
	resp, body := r.post("/signin", url.Values{"token": {"wrong-token-0123456789"}}, "")
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "not valid") || len(resp.Cookies()) != 0 {
		t.Fatalf("wrong token: %d, cookies %v, body:\n%s", resp.StatusCode, resp.Cookies(), body)
	}
	if strings.Contains(body, "wrong-token") {
		t.Error("the refusal echoes the token")
	}
	resp = r.signIn(readToken)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", resp.StatusCode)
	}
	cks := resp.Cookies()
	if len(cks) != 1 || !cks[0].HttpOnly || cks[0].SameSite != http.SameSiteStrictMode || cks[0].Path != "/" || cks[0].Secure {
		t.Fatalf("session cookie %+v", cks)
	}
	if strings.Contains(cks[0].Value, readToken) || len(cks[0].Value) < 43 {
		t.Fatalf("the cookie is not a 32-byte random id: %q", cks[0].Value)
	}
	resp, body = r.get("/")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `href="/tables/clips"`) {
		t.Fatalf("table list after sign-in: %d\n%s", resp.StatusCode, body)
	}
	if strings.Contains(body, readToken) {
		t.Error("a page shows the token")
	}
}

// TestPostsAreCSRFSafe: a POST from another origin, or without Origin and
// Referer, or without the session's CSRF token, is refused and runs
// nothing.
func TestPostsAreCSRFSafe(t *testing.T) {
	r := newRig(t, readTokens(), nil)
	if resp, _ := r.post("/signin", url.Values{"token": {readToken}}, "http://evil.example"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("sign-in from another origin: %d, want 403", resp.StatusCode)
	}
	r.signIn(readToken)
	tok := r.csrf()
	cases := []struct {
		name   string
		form   url.Values
		origin string
	}{
		{"other origin", url.Values{"q": {"SELECT 1"}, "csrf": {tok}}, "http://evil.example"},
		{"no origin nor referer", url.Values{"q": {"SELECT 1"}, "csrf": {tok}}, "-"},
		{"no csrf token", url.Values{"q": {"SELECT 1"}}, ""},
		{"wrong csrf token", url.Values{"q": {"SELECT 1"}, "csrf": {tok + "x"}}, ""},
	}
	for _, tc := range cases {
		if resp, _ := r.post("/sql", tc.form, tc.origin); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", tc.name, resp.StatusCode)
		}
	}
	if q := r.lake.ranQueries(); len(q) != 0 {
		t.Fatalf("refused forms ran SQL: %q", q)
	}
	resp, body := r.post("/sql", url.Values{"q": {"SELECT * FROM clips"}, "csrf": {tok}}, "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `class="grid results"`) {
		t.Fatalf("a good form: %d\n%s", resp.StatusCode, body)
	}
	if q := r.lake.ranQueries(); len(q) != 1 || q[0] != "SELECT * FROM clips" {
		t.Fatalf("the statement reached the runner as %q", q)
	}
}

// TestRangeReturnsTheMiddle: a Range request for the middle of an object
// answers 206 with exactly those bytes.
func TestRangeReturnsTheMiddle(t *testing.T) {
	data := randomBytes(300 << 10)
	r := newRig(t, readTokens(), map[string][]byte{"clip.webm": data})
	r.signIn(readToken)
	raw := "/tables/clips/raw?key=" + url.QueryEscape(r.lake.keyOf("clip.webm"))
	resp, body := r.get(raw, "Range", "bytes=100000-199999")
	if resp.StatusCode != http.StatusPartialContent {
		t.Fatalf("range: %d", resp.StatusCode)
	}
	if !bytes.Equal([]byte(body), data[100000:200000]) {
		t.Fatalf("range answered %d bytes, not bytes 100000-199999", len(body))
	}
	if got := resp.Header.Get("Content-Range"); got != "bytes 100000-199999/307200" {
		t.Errorf("Content-Range %q", got)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "video/webm" {
		t.Errorf("Content-Type %q, want video/webm", ct)
	}
	resp, body = r.get(raw)
	if resp.StatusCode != http.StatusOK || !bytes.Equal([]byte(body), data) {
		t.Fatalf("whole object: %d, %d bytes", resp.StatusCode, len(body))
	}
	resp, _ = r.get(raw + "&download=1")
	if cd := resp.Header.Get("Content-Disposition"); cd != `attachment; filename=clip.webm` {
		t.Errorf("download Content-Disposition %q", cd)
	}
}

// TestOnlyRowObjects: an object no row names is not served, nor a key
// outside the objects of the stage, and an HTML object is served as text
// in a sandbox, never as a page.
func TestOnlyRowObjects(t *testing.T) {
	r := newRig(t, readTokens(), map[string][]byte{"page.html": []byte("<script>alert(1)</script>")})
	if err := r.lake.stage.PutIfAbsent(t.Context(), "objects/stray/secret.txt", []byte("secret-content")); err != nil {
		t.Fatal(err)
	}
	r.signIn(readToken)
	for _, key := range []string{"objects/stray/secret.txt", "../../etc/passwd", "tables/x/data.parquet"} {
		resp, body := r.get("/tables/clips/raw?key=" + url.QueryEscape(key))
		if resp.StatusCode == http.StatusOK || strings.Contains(body, "secret-content") {
			t.Errorf("key %q: %d %q", key, resp.StatusCode, body)
		}
	}
	resp, body := r.get("/tables/clips/raw?key=" + url.QueryEscape(r.lake.keyOf("page.html")))
	if resp.StatusCode != http.StatusOK || body != "<script>alert(1)</script>" {
		t.Fatalf("html object: %d %q", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("an HTML object served as %q", ct)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "sandbox") {
		t.Errorf("object CSP %q", csp)
	}
}

// TestPagesRender: the table page shows schema, history chart and rows
// with preview links; a text preview shows the object's start; SQL
// errors are shown.
func TestPagesRender(t *testing.T) {
	r := newRig(t, readTokens(), map[string][]byte{"notes.txt": []byte("hello <b>lake</b>"), "clip.webm": randomBytes(10)})
	r.signIn(readToken)
	resp, body := r.get("/tables/clips")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("table page: %d\n%s", resp.StatusCode, body)
	}
	for _, want := range []string{`id="schema"`, "FILE", `id="history-chart"`, "<polyline", `class="preview video"`, `class="preview text"`} {
		if !strings.Contains(body, want) {
			t.Errorf("table page lacks %q", want)
		}
	}
	if q := r.lake.ranQueries(); len(q) != 1 || q[0] != `SELECT * FROM "clips" LIMIT 51 OFFSET 0` {
		t.Errorf("rows query %q", q)
	}
	_, body = r.get("/tables/clips?version=1&page=2")
	if q := r.lake.ranQueries(); q[len(q)-1] != `SELECT * FROM "clips" AT (VERSION => 1) LIMIT 51 OFFSET 50` {
		t.Errorf("time travel rows query %q", q[len(q)-1])
	}
	if !strings.Contains(body, "at version 1") {
		t.Error("the page of version 1 does not say so")
	}
	_, body = r.get("/tables/clips/file?key=" + url.QueryEscape(r.lake.keyOf("notes.txt")))
	if !strings.Contains(body, "hello &lt;b&gt;lake&lt;/b&gt;") {
		t.Errorf("text preview:\n%s", body)
	}
	_, body = r.get("/tables/clips/file?key=" + url.QueryEscape(r.lake.keyOf("clip.webm")))
	if !strings.Contains(body, `<video id="player"`) {
		t.Errorf("video preview:\n%s", body)
	}
	resp, _ = r.get("/file?key=" + url.QueryEscape(r.lake.keyOf("clip.webm")))
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/tables/clips/file?key=") {
		t.Errorf("/file found %d %q", resp.StatusCode, loc)
	}
	r.lake.sqlErr = wire.ErrNotReadOnly
	resp, body = r.post("/sql", url.Values{"q": {"DROP TABLE clips"}, "csrf": {r.csrf()}}, "")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, wire.ErrNotReadOnly.Error()) {
		t.Errorf("refused statement: %d\n%s", resp.StatusCode, body)
	}
}

// TestOpenLakeNeedsNoSignIn: without tokens the pages answer at once,
// and forms still carry a CSRF token.
func TestOpenLakeNeedsNoSignIn(t *testing.T) {
	r := newRig(t, nil, nil)
	resp, body := r.get("/")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "clips") {
		t.Fatalf("open lake: %d\n%s", resp.StatusCode, body)
	}
	if strings.Contains(body, "Sign out") {
		t.Error("an open lake offers to sign out")
	}
	if resp, _ := r.post("/sql", url.Values{"q": {"SELECT 1"}}, ""); resp.StatusCode != http.StatusForbidden {
		t.Errorf("open lake POST without CSRF token: %d", resp.StatusCode)
	}
	if resp, _ := r.post("/sql", url.Values{"q": {"SELECT 1"}, "csrf": {r.csrf()}}, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("open lake POST with CSRF token: %d", resp.StatusCode)
	}
}

func TestLocalPath(t *testing.T) {
	for in, want := range map[string]string{
		"/tables/x?page=2": "/tables/x?page=2", "": "/", "//evil.example/": "/", "https://evil.example": "/",
		"/\\evil.example": "/", "tables": "/", "/\t/evil.example": "/", "/\n/evil.example": "/", "/\x7f": "/",
	} {
		if got := localPath(in); got != want {
			t.Errorf("localPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPresignedRedirect: on a stage that presigns, the object endpoint
// redirects this browser to the URL meta signed, uncached, and only for a
// key a row names.
func TestPresignedRedirect(t *testing.T) {
	r := newRig(t, readTokens(), map[string][]byte{"clip.webm": randomBytes(100)})
	r.lake.presign = true
	r.signIn(readToken)
	key := r.lake.keyOf("clip.webm")
	resp, _ := r.get("/tables/clips/raw?key=" + url.QueryEscape(key))
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "https://stage.example/"+key+"?X-Amz-Signature=abc" {
		t.Fatalf("presigned object: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "no-store") {
		t.Errorf("the redirect may be cached: %q", cc)
	}
	if resp, _ := r.get("/tables/clips/raw?key=objects/none/x.webm"); resp.StatusCode != http.StatusNotFound || resp.Header.Get("Location") != "" {
		t.Errorf("a key no row names: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// TestScopesApply: an action runs only when the session's scope allows
// it as Flight would; the console never needs more than read.
func TestScopesApply(t *testing.T) {
	read := &session{scope: wire.ScopeRead}
	for _, a := range []string{wire.ActionListTables, wire.ActionDescribeTable, wire.ActionHistory, wire.ActionURL} {
		if !allowed(read, a) {
			t.Errorf("a read session may not call %s", a)
		}
	}
	if allowed(read, wire.ActionGC) || allowed(read, wire.ActionDelete) {
		t.Error("a read session may call admin or write actions")
	}
	if allowed(&session{}, wire.ActionListTables) || allowed(nil, wire.ActionListTables) || allowed(read, "lake.nope") {
		t.Error("no scope, no session or an unknown action is allowed")
	}
}

// TestSignOutEndsTheSession: after sign-out the old cookie opens nothing.
func TestSignOutEndsTheSession(t *testing.T) {
	r := newRig(t, readTokens(), nil)
	r.signIn(readToken)
	u, _ := url.Parse(r.srv.URL)
	old := r.c.Jar.Cookies(u)
	if resp, _ := r.post("/signout", url.Values{"csrf": {r.csrf()}}, ""); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", resp.StatusCode)
	}
	r.c.Jar.SetCookies(u, old)
	if resp, _ := r.get("/"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the signed-out session still opens the tables: %d", resp.StatusCode)
	}
}

// TestSessionsPerTokenAreBounded: one token signing in again and again
// loses its own oldest sessions, never another token's.
func TestSessionsPerTokenAreBounded(t *testing.T) {
	s := newSessionStore(maxSessions)
	now := time.Now()
	other := s.create(sha256.Sum256([]byte("other")), wire.ScopeAdmin, now)
	flooder := sha256.Sum256([]byte("flooder"))
	var first string
	for i := range 3 * maxSessionsPerToken {
		id := s.create(flooder, wire.ScopeRead, now.Add(time.Duration(i)*time.Millisecond))
		if i == 0 {
			first = id
		}
	}
	if n := s.count(flooder, now); n != maxSessionsPerToken {
		t.Errorf("the flooding token holds %d sessions, want %d", n, maxSessionsPerToken)
	}
	if _, ok := s.get(first, now); ok {
		t.Error("the flooding token's oldest session survived")
	}
	if _, ok := s.get(other, now); !ok {
		t.Error("another token's session was pushed out")
	}
}

// TestWrongTokensAreThrottled: after maxSignInFailures wrong tokens from
// one address, that address gets 429 (even with the right token) until
// the window passes; another address is not held back.
func TestWrongTokensAreThrottled(t *testing.T) {
	r := newRig(t, readTokens(), nil)
	for i := range maxSignInFailures {
		if resp, _ := r.post("/signin", url.Values{"token": {"wrong-token-0123456789"}}, ""); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d, want 401", i+1, resp.StatusCode)
		}
	}
	resp := r.signIn(readToken)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || len(resp.Cookies()) != 0 {
		t.Fatalf("the right token after %d wrong ones: %d, Retry-After %q, cookies %v; want 429 and no session",
			maxSignInFailures, resp.StatusCode, resp.Header.Get("Retry-After"), resp.Cookies())
	}

	th := newSignInThrottle()
	now := time.Now()
	for range maxSignInFailures {
		th.failed("10.0.0.1", now)
	}
	if ok, _ := th.allowed("10.0.0.1", now); ok {
		t.Error("the throttled address may try again at once")
	}
	if ok, _ := th.allowed("10.0.0.2", now); !ok {
		t.Error("another address is throttled too")
	}
	if ok, _ := th.allowed("10.0.0.1", now.Add(signInWindow)); !ok {
		t.Error("the address is still throttled after the window")
	}
}
