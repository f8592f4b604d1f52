package e2e

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/lakedata/lake/client"
)

// consoleLake is one `lake serve` (both roles, a local stage) with its
// HTTP listener, and so the web console, on a loopback port.
type consoleLake struct {
	p        *proc
	dir      string
	endpoint string // Flight
	base     string // the console: http://127.0.0.1:port
}

var httpListenLine = regexp.MustCompile(`msg="http listening".* http_addr=(\S+)`)

// startConsoleLake starts lake serve with --http-listen 127.0.0.1:0 and
// the token file holding lines (none: an open lake), and waits until the
// console answers.
func startConsoleLake(t testing.TB, lines ...string) *consoleLake {
	t.Helper()
	dir := t.TempDir()
	args := []string{"serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
		"--data-dir", filepath.Join(dir, "data")}
	if len(lines) > 0 {
		path := filepath.Join(dir, "tokens")
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--token-file", path)
	}
	p := startLake(t, args...)
	m := httpListenLine.FindStringSubmatch(p.output())
	if m == nil {
		t.Fatalf("lake serve logged no HTTP listen address:\n%s", p.output())
	}
	l := &consoleLake{p: p, dir: dir, endpoint: "grpc://" + p.Addr(), base: "http://" + m[1]}
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
// whose URL contains part (DevTools network events).
type responses struct {
	mu     sync.Mutex
	status []int64
}

func recordResponses(ctx context.Context, part string) *responses {
	r := &responses{}
	chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventResponseReceived); ok && strings.Contains(e.Response.URL, part) {
			r.mu.Lock()
			r.status = append(r.status, e.Response.Status)
			r.mu.Unlock()
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
