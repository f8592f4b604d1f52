package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/internal/s3test"
)

// consoleLake is one `lake serve` (both roles, a local stage) with its
// HTTP listener, and so the web console, on a loopback port.
type consoleLake struct {
	p        *proc
	dir      string
	endpoint string // Flight
	base     string // the console: http://127.0.0.1:port
}

// consoleSetup says how to start a console lake: the token file's lines
// (none: an open lake), and extra serve flags and environment (an S3
// stage and its credentials).
type consoleSetup struct {
	tokens []string
	args   []string
	env    []string
}

// startConsoleLake starts lake serve with --http-listen 127.0.0.1:0 as
// setup says and waits until the console answers.
func startConsoleLake(t testing.TB, setup consoleSetup) *consoleLake {
	t.Helper()
	dir := t.TempDir()
	args := []string{"serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
		"--data-dir", filepath.Join(dir, "data")}
	if len(setup.tokens) > 0 {
		path := filepath.Join(dir, "tokens")
		if err := os.WriteFile(path, []byte(strings.Join(setup.tokens, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--token-file", path)
	}
	args = append(args, setup.args...)
	p := startLakeEnv(t, setup.env, args...)
	if p.HTTPAddr() == "" {
		t.Fatalf("lake serve logged no HTTP listen address:\n%s", p.output())
	}
	l := &consoleLake{p: p, dir: dir, endpoint: "grpc://" + p.Addr(), base: "http://" + p.HTTPAddr()}
	// The listener answers 503 until the roles are open and the
	// console is mounted.
	ctx := withTimeout(t, 30*time.Second)
	for {
		resp, err := http.Get(l.base + "/static/console.css")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return l
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the console at %s did not answer: %v\n%s", l.base, err, p.output())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (l *consoleLake) client(t testing.TB, token string) *client.Client {
	t.Helper()
	var opts []client.Option
	if token != "" {
		opts = append(opts, client.WithToken(token))
	}
	c, err := client.Connect(withTimeout(t, time.Minute), l.endpoint, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// chromiumPath finds Debian's chromium. Without it a developer's run
// skips the browser tests, saying so; CI installs it (.ci/run), so there
// a missing browser fails.
func chromiumPath(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed; .ci/run installs it (apt-get install -y chromium)")
	}
	t.Skip("chromium is not installed (apt-get install -y chromium): skipping the browser tests")
	return ""
}

// newBrowser starts a headless chromium of its own, with a fresh profile
// and nothing reaching beyond loopback: no first-run, sync, component or
// background fetches, and every host name but 127.0.0.1 unresolvable.
func newBrowser(t testing.TB) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.NoSandbox, // the tests may run as root
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-client-side-phishing-detection", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("no-pings", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("mute-audio", true),
		chromedp.Flag("autoplay-policy", "no-user-gesture-required"),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first Run starts the browser, on a context without a deadline
	// (a deadline there would stop the browser with it).
	if _, err := chromedp.Run(ctx, chromedp.Location()); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// browse runs steps in the browser, bounded by a minute (a wait, not a
// measurement: nothing asserts how fast).
func browse(t testing.TB, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// get runs one step that answers a value, bounded as browse is.
func get[T any](t testing.TB, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// artifactDir is where screenshots go: $LAKE_TEST_ARTIFACTS/<test> when
// set (.ci/run sets it), else a temporary directory of the test.
func artifactDir(t testing.TB) string {
	t.Helper()
	root := os.Getenv("LAKE_TEST_ARTIFACTS")
	if root == "" {
		return t.TempDir()
	}
	dir := filepath.Join(root, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func screenshot(t testing.TB, ctx context.Context, dir, name string) {
	t.Helper()
	buf := get(t, ctx, chromedp.FullScreenshot(100))
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", path)
}

// responses records the status of every response the browser receives
// whose URL match accepts (DevTools network events), redirects included.
type responses struct {
	mu     sync.Mutex
	status []int64
}

func recordResponses(ctx context.Context, match func(url string) bool) *responses {
	r := &responses{}
	note := func(resp *network.Response) {
		if resp != nil && match(resp.URL) {
			r.mu.Lock()
			r.status = append(r.status, resp.Status)
			r.mu.Unlock()
		}
	}
	chromedp.Listen(ctx, func(ev any) {
		switch e := ev.(type) {
		case *network.EventResponseReceived:
			note(e.Response)
		case *network.EventRequestWillBeSent:
			note(e.RedirectResponse)
		}
	})
	return r
}

func (r *responses) all() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int64(nil), r.status...)
}

func (r *responses) count(status int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.status {
		if s == status {
			n++
		}
	}
	return n
}

// testPNG is a small image for the thumbnail.
func testPNG(t testing.TB) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 64, 48))
	for x := range 64 {
		for y := range 48 {
			img.Set(x, y, color.RGBA{uint8(x * 4), uint8(y * 5), 180, 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// consoleTable fills table clips: the committed test video, then an
// image and a JSON document, one version each. It returns the keys by
// file name.
func consoleTable(t testing.TB, l *consoleLake, c *client.Client) map[string]string {
	t.Helper()
	ctx := withTimeout(t, time.Minute)
	if _, err := c.CreateTable(ctx, "clips", nil, false); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"frame.png": testPNG(t), "notes.json": []byte(`{"camera":"north","shots":[1,2,3]}`)}
	keys := map[string]string{}
	put := func(path string) {
		res, err := c.PutFile(ctx, "clips", path, client.PutOptions{})
		if err != nil {
			t.Fatalf("put %s: %v", path, err)
		}
		keys[filepath.Base(path)] = res.File.Key
	}
	put(filepath.Join("testdata", "clip.webm"))
	for _, name := range []string{"frame.png", "notes.json"} {
		path := filepath.Join(l.dir, name)
		if err := os.WriteFile(path, files[name], 0o644); err != nil {
			t.Fatal(err)
		}
		put(path)
	}
	return keys
}

// TestConsoleInBrowser drives the console in headless chromium against a
// real lake serve with scoped tokens: a wrong token is refused, a read
// token signs in, the table list, the table page and an SQL grid
// (time travel, and a refused write) render, the image thumbnail loads,
// the JSON preview shows, and the video plays and seeks (readyState ≥ 3
// after the seek, with 206 answers seen by the browser). Screenshots of
// each step are artifacts.
func TestConsoleInBrowser(t *testing.T) {
	ctx := newBrowser(t)
	tk := newScopeTokens()
	l := startConsoleLake(t, consoleSetup{tokens: []string{tk.read + " read", tk.write + " write", tk.admin + " admin"}})
	keys := consoleTable(t, l, l.client(t, tk.admin))
	shots := artifactDir(t)
	raw := recordResponses(ctx, func(u string) bool { return strings.Contains(u, "/raw?") })
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }

	t.Run("wrong token refused", func(t *testing.T) {
		browse(t, ctx, chromedp.Navigate(l.base+"/tables/clips"), chromedp.WaitVisible(css("#token")))
		if loc := get(t, ctx, chromedp.Location()); !strings.HasPrefix(loc, l.base+"/signin") {
			t.Fatalf("without a session the table page went to %s, not the sign-in page", loc)
		}
		browse(t, ctx,
			chromedp.SendKeys(css("#token"), "not-"+tk.read),
			chromedp.Click(css("#signin")),
			chromedp.WaitVisible(css("#signin-error")),
		)
		if msg := get(t, ctx, chromedp.Text(css("#signin-error"))); !strings.Contains(msg, "not valid") {
			t.Fatalf("the refusal says %q", msg)
		}
		screenshot(t, ctx, shots, "signin-refused")
	})

	t.Run("table list", func(t *testing.T) {
		browse(t, ctx,
			chromedp.SetValue(css("#token"), tk.read),
			chromedp.Click(css("#signin")),
			chromedp.WaitVisible(css("#schema")), // back on the page asked for
			chromedp.Navigate(l.base+"/"),
			chromedp.WaitVisible(css("#tables")),
		)
		list := get(t, ctx, chromedp.Text(css("#tables tbody")))
		if !strings.Contains(list, "clips") || !strings.Contains(list, "3") {
			t.Fatalf("the table list reads %q", list)
		}
		screenshot(t, ctx, shots, "tables")
	})

	t.Run("table page", func(t *testing.T) {
		browse(t, ctx, chromedp.Navigate(l.base+"/tables/clips"), chromedp.WaitVisible(css("#history-chart")))
		if n := get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#history-chart circle").length`)); n != 4 {
			t.Errorf("the history chart has %d points, want 4 (versions 0 to 3)", n)
		}
		// The thumbnail is the image object itself, 64 px wide.
		get(t, ctx, chromedp.Poll[bool](`(() => { const i = document.querySelector("img.thumb"); return i && i.complete && i.naturalWidth === 64; })()`))
		screenshot(t, ctx, shots, "table")
	})

	t.Run("sql grid", func(t *testing.T) {
		runSQL := func(q string, wait string) {
			t.Helper()
			browse(t, ctx,
				chromedp.Navigate(l.base+"/sql"),
				chromedp.WaitVisible(css("#q")),
				chromedp.SetValue(css("#q"), q),
				chromedp.Click(css("#run")),
				chromedp.WaitVisible(css(wait)),
			)
		}
		runSQL("SELECT name, file FROM clips AT (VERSION => 1) ORDER BY name", "table.results")
		rows := get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("table.results tbody tr").length`))
		first := get(t, ctx, chromedp.Text(css("table.results tbody td")))
		if rows != 1 || first != "clip.webm" {
			t.Fatalf("SELECT at version 1: %d rows, first %q; want clip.webm alone", rows, first)
		}
		screenshot(t, ctx, shots, "sql")
		runSQL("DROP TABLE clips", "#sql-error")
		if refused := get(t, ctx, chromedp.Text(css("#sql-error"))); !strings.Contains(refused, "read-only") {
			t.Fatalf("DROP TABLE answered %q", refused)
		}
		runSQL("SELECT count(*) AS n FROM clips", "table.results")
		if n := get(t, ctx, chromedp.Text(css("table.results tbody td"))); n != "3" {
			t.Fatalf("count(*) after the refused DROP: %q", n)
		}
	})

	t.Run("json preview", func(t *testing.T) {
		browse(t, ctx,
			chromedp.Navigate(l.base+"/tables/clips/file?key="+url.QueryEscape(keys["notes.json"])),
			chromedp.WaitVisible(css("#text")),
		)
		if text := get(t, ctx, chromedp.Text(css("#text"))); !strings.Contains(text, `"camera": "north"`) {
			t.Fatalf("JSON preview %q", text)
		}
	})

	t.Run("video plays and seeks", func(t *testing.T) {
		before := raw.count(http.StatusPartialContent)
		browse(t, ctx,
			chromedp.Navigate(l.base+"/tables/clips/file?key="+url.QueryEscape(keys["clip.webm"])),
			chromedp.WaitReady(css("#player")),
		)
		got := playAndSeek(t, ctx)
		if got.Tag != "VIDEO" || got.Ready < 3 || got.Time < 2.4 || !got.Played || got.Seeking {
			t.Fatalf("after the seek: %+v; want a played VIDEO at 2.5 s with readyState >= 3", got)
		}
		if raw.count(http.StatusPartialContent) == before {
			t.Fatalf("the browser saw no 206 answer for the video (statuses %v)", raw.all())
		}
		screenshot(t, ctx, shots, "video")
	})

	t.Run("no session no data", func(t *testing.T) {
		plain := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := plain.Get(l.base + "/tables/clips/raw?key=" + url.QueryEscape(keys["clip.webm"]))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || len(body) > 100 {
			t.Fatalf("raw object without a session: %d, %d bytes; want 401 and no data", resp.StatusCode, len(body))
		}
		for _, p := range []string{"/", "/tables/clips", "/sql"} {
			resp, err := plain.Get(l.base + p)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusSeeOther || bytes.Contains(body, []byte("<table")) {
				t.Fatalf("GET %s without a session: %d\n%s", p, resp.StatusCode, body)
			}
		}
	})

	t.Run("range returns the middle", func(t *testing.T) {
		want, err := os.ReadFile(filepath.Join("testdata", "clip.webm"))
		if err != nil {
			t.Fatal(err)
		}
		hc := signedInClient(t, l, tk.read)
		req, _ := http.NewRequest(http.MethodGet, l.base+"/tables/clips/raw?key="+url.QueryEscape(keys["clip.webm"]), nil)
		req.Header.Set("Range", "bytes=40000-79999")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(got, want[40000:80000]) {
			t.Fatalf("Range bytes=40000-79999: %d with %d bytes; want 206 with exactly those 40000", resp.StatusCode, len(got))
		}
	})
}

// videoState is what playAndSeek found.
type videoState struct {
	Tag     string  `json:"tag"`
	Ready   int     `json:"ready"`
	Time    float64 `json:"time"`
	Played  bool    `json:"played"`
	Seeking bool    `json:"seeking"`
}

// playAndSeek plays the page's #player (muted), pauses it, seeks to
// 2.5 s and waits until the element can play there (readyState >= 3). A
// media error fails it.
func playAndSeek(t testing.TB, ctx context.Context) videoState {
	t.Helper()
	return get(t, ctx, chromedp.Evaluate[videoState](`(async () => {
		const v = document.getElementById("player");
		v.muted = true;
		const once = (name) => new Promise((ok, fail) => {
			v.addEventListener(name, ok, {once: true});
			v.addEventListener("error", () => fail(new Error("media error " + (v.error && v.error.code))), {once: true});
		});
		if (v.readyState < 1) await once("loadedmetadata");
		await v.play();
		const played = !v.paused;
		v.pause();
		const seeked = once("seeked");
		v.currentTime = 2.5;
		await seeked;
		if (v.readyState < 3) await once("canplay");
		return {tag: v.tagName, ready: v.readyState, time: v.currentTime, played: played, seeking: v.seeking};
	})()`, chromedp.EvalAwaitPromise))
}

// signedInClient is an HTTP client with a console session of token,
// signed in through the form as a browser does (Origin included).
func signedInClient(t testing.TB, l *consoleLake, token string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	req, _ := http.NewRequest(http.MethodPost, l.base+"/signin", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", l.base)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-in: %d", resp.StatusCode)
	}
	return hc
}

// signInBrowser signs the browser in with token through the form.
func signInBrowser(t testing.TB, ctx context.Context, l *consoleLake, token string) {
	t.Helper()
	browse(t, ctx,
		chromedp.Navigate(l.base+"/signin"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SetValue(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("#tables")),
	)
}

// TestConsoleVideoOnS3: on an S3 stage (versitygw on loopback) the
// console answers a video row's object with a redirect to the URL the
// metadata service presigned, and the browser plays and seeks it through
// the gateway's 206 answers; the URL reaches no log line.
func TestConsoleVideoOnS3(t *testing.T) {
	ctx := newBrowser(t)
	gw := s3test.Start(t)
	bucket := gw.NewBucket(t)
	withCreds := s3Env(t, gw)
	tk := newScopeTokens()
	l := startConsoleLake(t, consoleSetup{
		tokens: []string{tk.read + " read", tk.write + " write", tk.admin + " admin"},
		args:   []string{"--stage", "s3://" + bucket + "/lake", "--s3-endpoint", gw.Endpoint},
		env:    withCreds,
	})
	if _, err := l.client(t, tk.admin).CreateTable(withTimeout(t, time.Minute), "clips", nil, false); err != nil {
		t.Fatal(err)
	}
	clip, err := filepath.Abs(filepath.Join("testdata", "clip.webm"))
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runEnv(t, withCreds, l.endpoint, tk.write, "put", clip, "--table", "clips", "--json", "--no-progress",
		"--checkpoint-dir", filepath.Join(l.dir, "cp"))
	var put struct{ Key string }
	if code != 0 || json.Unmarshal([]byte(out), &put) != nil || put.Key == "" {
		t.Fatalf("put: exit %d, output %q\n%s", code, out, errOut)
	}
	raw := recordResponses(ctx, func(u string) bool { return strings.Contains(u, "/raw?") })
	stage := recordResponses(ctx, func(u string) bool { return strings.HasPrefix(u, gw.Endpoint+"/") })

	signInBrowser(t, ctx, l, tk.read)
	browse(t, ctx,
		chromedp.Navigate(l.base+"/tables/clips/file?key="+url.QueryEscape(put.Key)),
		chromedp.WaitReady(chromedp.CSS("#player")),
	)
	got := playAndSeek(t, ctx)
	if got.Tag != "VIDEO" || got.Ready < 3 || got.Time < 2.4 || !got.Played || got.Seeking {
		t.Fatalf("after the seek: %+v; want a played VIDEO at 2.5 s with readyState >= 3", got)
	}
	if raw.count(http.StatusFound) == 0 || stage.count(http.StatusPartialContent) == 0 {
		t.Fatalf("console answers %v, stage answers %v; want a redirect to the stage and 206s from it", raw.all(), stage.all())
	}
	screenshot(t, ctx, artifactDir(t), "video-s3")
	if strings.Contains(l.p.output(), "X-Amz-Signature") {
		t.Fatal("a presigned URL reached the lake log")
	}
}
