package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/internal/s3test"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// s3Env is the environment of a lake process that holds the gateway's
// credentials, and nothing of the user's AWS configuration.
func s3Env(t *testing.T, gw *s3test.Server) []string {
	t.Helper()
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return append(noAWSEnv(empty), "AWS_ACCESS_KEY_ID="+gw.AccessKey, "AWS_SECRET_ACCESS_KEY="+gw.SecretKey, "AWS_REGION="+gw.Region)
}

// noAWSEnv is this process's environment without anything that gives AWS
// credentials, with empty (the file empty) shared AWS files and the
// instance-metadata lookup off.
func noAWSEnv(empty string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "LAKE_TOKEN=") {
			env = append(env, kv)
		}
	}
	return append(env, "AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE="+empty, "AWS_SHARED_CREDENTIALS_FILE="+empty)
}

// runEnv runs a CLI command with exactly env (plus token as $LAKE_TOKEN)
// and returns its stdout, stderr and exit status.
func runEnv(t *testing.T, env []string, endpoint, token string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(lakeBin, append(args, "--endpoint", endpoint)...)
	cmd.Env = append(env, "LAKE_TOKEN="+token)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.ProcessState == nil {
		t.Fatalf("lake %s: %v", strings.Join(args, " "), err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// fetch GETs u with a plain HTTP client: no AWS SDK, no credentials. Its
// errors are not shown, for they would name the URL.
func fetch(t *testing.T, u string) ([]byte, int) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal("GET of the URL failed")
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal("reading the URL's answer failed")
	}
	return b, resp.StatusCode
}

// TestReadURLOnS3: `lake url`, run with a read token and no AWS
// credentials at all, prints a presigned URL that a plain HTTP client
// reads the object with; a key no row has is not found; an expiry above
// --url-max-expiry is refused; the URL stops working when it expires; and
// no URL reaches the service's log or the CLI's stderr.
func TestReadURLOnS3(t *testing.T) {
	gw := s3test.Start(t)
	bucket := gw.NewBucket(t)
	dir := t.TempDir()
	tk := newScopeTokens()
	tokens := writeTokenFile(t, dir, "tokens", tk.read+" read", tk.write+" write", tk.admin+" admin")
	withCreds := s3Env(t, gw)
	p := startLakeEnv(t, withCreds, "serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0", "--log-level", "debug",
		"--data-dir", filepath.Join(dir, "data"), "--stage", "s3://"+bucket+"/lake", "--s3-endpoint", gw.Endpoint,
		"--token-file", tokens, "--url-max-expiry", "1h")
	endpoint := "grpc://" + p.Addr()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	noCreds := noAWSEnv(empty)
	must := func(env []string, token string, args ...string) string {
		t.Helper()
		out, errOut, code := runEnv(t, env, endpoint, token, args...)
		if code != 0 {
			t.Fatalf("lake %s: exit %d\n%s", args[0], code, errOut)
		}
		return out
	}
	must(noCreds, tk.admin, "table", "create", "clips")
	content := make([]byte, 2<<20+17)
	rand.Read(content)
	file := filepath.Join(dir, "clip.mp4")
	if err := os.WriteFile(file, content, 0o644); err != nil {
		t.Fatal(err)
	}
	var put struct{ Key string }
	out := must(withCreds, tk.write, "put", file, "--table", "clips", "--json", "--no-progress", "--checkpoint-dir", filepath.Join(dir, "cp"))
	if err := json.Unmarshal([]byte(out), &put); err != nil || put.Key == "" {
		t.Fatalf("put output %q: %v", out, err)
	}

	var signatures []string
	readURL := func(expires string) string {
		t.Helper()
		args := []string{"url", "--table", "clips", "--key", put.Key}
		if expires != "" {
			args = append(args, "--expires", expires)
		}
		out, errOut, code := runEnv(t, noCreds, endpoint, tk.read, args...)
		if code != 0 {
			t.Fatalf("lake url as a reader without AWS credentials: exit %d\n%s", code, errOut)
		}
		raw := strings.TrimSpace(out)
		u, err := url.Parse(raw)
		if err != nil || u.Query().Get("X-Amz-Signature") == "" || strings.Contains(raw, "\n") {
			t.Fatal("lake url printed something other than one presigned URL")
		}
		sig := u.Query().Get("X-Amz-Signature")
		signatures = append(signatures, sig)
		if strings.Contains(errOut, sig) {
			t.Error("lake url wrote the URL's signature to stderr")
		}
		return raw
	}

	u := readURL("")
	got, code := fetch(t, u)
	if code != http.StatusOK || string(got) != string(content) {
		t.Fatalf("GET of the URL: status %d, %d bytes; want 200 and the object's %d bytes", code, len(got), len(content))
	}
	// The URL is bound to the object: the same signature on another key
	// is refused.
	if _, code := fetch(t, strings.Replace(u, url.PathEscape(filepath.Base(put.Key)), "other.mp4", 1)); code != http.StatusForbidden {
		t.Errorf("the URL made to name another key: status %d, want 403", code)
	}
	// --json says when it expires: 30 minutes from now, within reason.
	var line struct {
		URL       string `json:"url"`
		ExpiresAt string `json:"expires_at"`
	}
	jsonOut, errOut, code := runEnv(t, noCreds, endpoint, tk.read, "url", "--table", "clips", "--key", put.Key, "--expires", "30m", "--json")
	if code != 0 {
		t.Fatalf("lake url --json: exit %d\n%s", code, errOut)
	}
	if err := json.Unmarshal([]byte(jsonOut), &line); err != nil {
		t.Fatal("lake url --json printed no JSON object")
	}
	if at, err := time.Parse(time.RFC3339, line.ExpiresAt); err != nil || at.Before(time.Now().Add(25*time.Minute)) || at.After(time.Now().Add(35*time.Minute)) {
		t.Errorf("expires_at %q, want about 30 minutes from now", line.ExpiresAt)
	}
	if lu, err := url.Parse(line.URL); err == nil {
		signatures = append(signatures, lu.Query().Get("X-Amz-Signature"))
	}

	// A key the table has no row for: not found, whatever the stage
	// holds; a key outside objects/ (the catalog, a data file) is no FILE
	// key at all.
	for key, want := range map[string]string{
		"objects/2026/12/01/nothing-here.bin": "no row of the table has the key",
		"_lake/catalog/clips.json":            "not under objects/",
	} {
		_, errOut, code := runEnv(t, noCreds, endpoint, tk.read, "url", "--table", "clips", "--key", key)
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("url of %s: exit %d, %q; want 1 and %q", key, code, errOut, want)
		}
	}
	// Above --url-max-expiry: refused, with the limit named.
	_, errOut, code = runEnv(t, noCreds, endpoint, tk.read, "url", "--table", "clips", "--key", put.Key, "--expires", "2h")
	if code != 1 || !strings.Contains(errOut, "--url-max-expiry") || !strings.Contains(errOut, "1h0m0s") {
		t.Errorf("--expires 2h with a 1h limit: exit %d, %q; want 1 and the limit", code, errOut)
	}
	// A token of no scope the service knows is refused.
	if _, _, code := runEnv(t, noCreds, endpoint, "not-a-token", "url", "--table", "clips", "--key", put.Key); code != 1 {
		t.Errorf("lake url with an unknown token: exit %d, want 1", code)
	}

	// The URL works until it expires, then never again. Bounded: at most
	// 60 tries half a second apart after the second it was given.
	short := readURL("1s")
	expired := false
	for range 60 {
		time.Sleep(500 * time.Millisecond)
		if _, code := fetch(t, short); code == http.StatusForbidden {
			expired = true
			break
		} else if code != http.StatusOK {
			t.Fatalf("GET of a short URL: status %d, want 200 until it expires, then 403", code)
		}
	}
	if !expired {
		t.Error("a URL given 1 s still worked 30 s later")
	}

	logs := p.output()
	for _, sig := range signatures {
		if sig == "" || strings.Contains(logs, sig) {
			t.Fatal("a URL's signature is in the service's log, or a URL had none")
		}
	}
	if strings.Contains(logs, gw.SecretKey) {
		t.Error("the secret key is in the service's log")
	}
}

// TestReadURLOnLocalStage: on a local stage `lake url` prints the object's
// file:// URL, which reads the object where the stage directory is.
func TestReadURLOnLocalStage(t *testing.T) {
	dir := t.TempDir()
	p := startLakeEnv(t, []string{"AWS_EC2_METADATA_DISABLED=true"}, "serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0",
		"--data-dir", filepath.Join(dir, "data"), "--stage", "file://"+filepath.Join(dir, "stage"))
	endpoint := "grpc://" + p.Addr()
	d := &scopeDeployment{endpoint: endpoint, dir: dir}
	d.mustRun(t, "", "table", "create", "clips")
	key, errOut, code := d.put(t, "", "a.mp4")
	if code != 0 {
		t.Fatalf("put: exit %d\n%s", code, errOut)
	}
	out := strings.TrimSpace(d.mustRun(t, "", "url", "--table", "clips", "--key", key))
	u, err := url.Parse(out)
	if err != nil || u.Scheme != "file" {
		t.Fatalf("lake url on a local stage printed %q, want a file:// URL", out)
	}
	got, err := os.ReadFile(u.Path)
	if err != nil || !strings.HasPrefix(string(got), "bytes of a.mp4 ") {
		t.Fatalf("the file:// URL does not name the object: %v", err)
	}
}

// TestUploadGrantThroughLakeServe: one `lake serve` on S3 whose process
// alone holds the credentials. lake.discover says uploads are presigned;
// a write token, from a test process without AWS credentials, gets a
// grant through the query role, PUTs the parts with plain net/http,
// completes and appends a row with the FILE value; SQL sees it. A read
// token may not ask for a grant. No URL reaches the service's log.
func TestUploadGrantThroughLakeServe(t *testing.T) {
	gw := s3test.Start(t)
	bucket := gw.NewBucket(t)
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// This process opens the stage adapter of a client: no credentials.
	for _, kv := range [][2]string{{"AWS_ACCESS_KEY_ID", ""}, {"AWS_SECRET_ACCESS_KEY", ""}, {"AWS_SESSION_TOKEN", ""}, {"AWS_PROFILE", ""},
		{"AWS_EC2_METADATA_DISABLED", "true"}, {"AWS_CONFIG_FILE", empty}, {"AWS_SHARED_CREDENTIALS_FILE", empty}} {
		t.Setenv(kv[0], kv[1])
	}
	tk := newScopeTokens()
	tokens := writeTokenFile(t, dir, "tokens", tk.read+" read", tk.write+" write", tk.admin+" admin")
	p := startLakeEnv(t, s3Env(t, gw), "serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0", "--log-level", "debug",
		"--data-dir", filepath.Join(dir, "data"), "--stage", "s3://"+bucket+"/lake", "--s3-endpoint", gw.Endpoint, "--token-file", tokens)
	endpoint := "grpc://" + p.Addr()
	ctx := withTimeout(t, 2*time.Minute)
	if _, errOut, code := runEnv(t, noAWSEnv(empty), endpoint, tk.admin, "table", "create", "clips"); code != 0 {
		t.Fatalf("table create: exit %d\n%s", code, errOut)
	}

	cl, err := client.Connect(ctx, endpoint, client.WithToken(tk.write), client.WithCheckpointDir(filepath.Join(dir, "cp")))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if st := cl.Stage(); st.GetUploadMode() != "presigned" || st.GetPartSize() <= 0 {
		t.Fatalf("lake.discover: upload mode %q, part size %d; want presigned and the stage's part size", st.GetUploadMode(), st.GetPartSize())
	}
	partSize := cl.Stage().GetPartSize()
	data := make([]byte, partSize+4321)
	rand.Read(data)
	parts := [][]byte{data[:partSize], data[partSize:]}
	req := &lakepb.UploadGrantRequest{Table: "clips", FileName: "big.bin", Size: int64(len(data)), Sha256: sha256Hex(data)}
	for i, b := range parts {
		req.Parts = append(req.Parts, &lakepb.UploadPart{Number: int32(i + 1), Sha256: sha256Hex(b)})
	}

	dial := func(token string) flight.Client {
		fc, err := flightrpc.DialEndpoint(endpoint, flightrpc.DialOptions{Token: token})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fc.Close() })
		return fc
	}
	var g lakepb.UploadGrant
	if err := flightrpc.Action(ctx, dial(tk.read), wire.ActionUploadGrant, req, &g); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a grant for a read token: %v, want PermissionDenied", err)
	}
	fc := dial(tk.write)
	if err := flightrpc.Action(ctx, fc, wire.ActionUploadGrant, req, &g); err != nil {
		t.Fatal(err)
	}
	var signatures []string
	for _, u := range g.GetUrls() {
		pu, err := url.Parse(u.GetUrl())
		if err != nil {
			t.Fatal("a part URL does not parse")
		}
		signatures = append(signatures, pu.Query().Get("X-Amz-Signature"))
		hreq, err := http.NewRequestWithContext(ctx, http.MethodPut, u.GetUrl(), bytes.NewReader(parts[u.GetNumber()-1]))
		if err != nil {
			t.Fatal("building a PUT failed")
		}
		for k, v := range u.GetHeaders() {
			hreq.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(hreq)
		if err != nil {
			t.Fatal("a PUT failed")
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("PUT of part %d: status %d", u.GetNumber(), resp.StatusCode)
		}
	}
	size := int64(len(data))
	var file lakepb.UploadedFile
	if err := flightrpc.Action(ctx, fc, wire.ActionUploadComplete, &lakepb.UploadCompleteRequest{Table: "clips", Key: g.GetKey(), UploadId: g.GetUploadId(), Size: &size, Sha256: req.Sha256}, &file); err != nil {
		t.Fatal(err)
	}
	v := wire.FileValue{Key: file.GetKey(), Size: file.GetSize(), SHA256: file.GetSha256(), ETag: file.GetEtag(), UploadedAt: time.UnixMicro(file.GetUploadedAtUnixMicros())}
	rec := wiretest.FileRows([]string{"big.bin"}, []wire.FileValue{v})
	defer rec.Release()
	if _, err := cl.Append(ctx, "clips", rec, client.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runEnv(t, noAWSEnv(empty), endpoint, tk.read, "sql", "SELECT file.key AS k, file.sha256 AS s FROM clips", "--format", "csv")
	if code != 0 || !strings.Contains(out, g.GetKey()+","+req.Sha256) {
		t.Fatalf("sql: exit %d\n%s\n%s", code, out, errOut)
	}
	logs := p.output()
	for _, sig := range signatures {
		if sig == "" || strings.Contains(logs, sig) {
			t.Fatal("a part URL's signature is in the service's log, or a URL had none")
		}
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestGetThroughReadURLOnS3: `lake get` with a read token and no AWS
// credentials at all downloads through a read URL, whether the stage's
// uploads are presigned (the default) or direct: the exact bytes, to a
// file and to standard output, of the latest version's row and, with
// --version, of a row deleted since. A key no row has is not found. The
// objects are put by a client that holds the gateway's credentials. No
// URL signature reaches the CLI's stderr or the service's log.
func TestGetThroughReadURLOnS3(t *testing.T) {
	gw := s3test.Start(t)
	for _, mode := range []string{"presigned", "direct"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			tk := newScopeTokens()
			tokens := writeTokenFile(t, dir, "tokens", tk.read+" read", tk.write+" write", tk.admin+" admin")
			withCreds := s3Env(t, gw)
			args := []string{"serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0", "--log-level", "debug",
				"--data-dir", filepath.Join(dir, "data"), "--stage", "s3://" + gw.NewBucket(t) + "/lake", "--s3-endpoint", gw.Endpoint,
				"--token-file", tokens}
			if mode == "direct" {
				args = append(args, "--direct-uploads")
			}
			p := startLakeEnv(t, withCreds, args...)
			endpoint := "grpc://" + p.Addr()
			empty := filepath.Join(dir, "empty")
			if err := os.WriteFile(empty, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			noCreds := noAWSEnv(empty)
			var stderrs []string
			run := func(env []string, token string, args ...string) (string, int) {
				t.Helper()
				out, errOut, code := runEnv(t, env, endpoint, token, args...)
				stderrs = append(stderrs, errOut)
				if code != 0 && code != 1 {
					t.Fatalf("lake %s: exit %d\n%s", strings.Join(args, " "), code, errOut)
				}
				return out, code
			}
			must := func(env []string, token string, args ...string) string {
				t.Helper()
				out, code := run(env, token, args...)
				if code != 0 {
					t.Fatalf("lake %s: exit %d\n%s", strings.Join(args, " "), code, stderrs[len(stderrs)-1])
				}
				return out
			}
			must(noCreds, tk.admin, "table", "create", "clips")
			put := func(name string, size int) (string, []byte) {
				t.Helper()
				content := make([]byte, size)
				rand.Read(content)
				file := filepath.Join(dir, name)
				if err := os.WriteFile(file, content, 0o644); err != nil {
					t.Fatal(err)
				}
				var res struct{ Key string }
				out := must(withCreds, tk.write, "put", file, "--table", "clips", "--json", "--no-progress", "--checkpoint-dir", filepath.Join(dir, "cp"))
				if err := json.Unmarshal([]byte(out), &res); err != nil || res.Key == "" {
					t.Fatalf("put output %q: %v", out, err)
				}
				return res.Key, content
			}
			keyA, a := put("a.mp4", 6<<20+11)                                  // version 1; more than one part
			keyB, b := put("b.mp4", 1234)                                      // version 2
			must(withCreds, tk.write, "rm", "--table", "clips", "--key", keyA) // version 3

			get := func(key string, extra ...string) ([]byte, int) {
				t.Helper()
				out := filepath.Join(dir, "got-"+filepath.Base(key))
				os.Remove(out)
				_, code := run(noCreds, tk.read, append([]string{"get", "--table", "clips", "--key", key, "-o", out}, extra...)...)
				if code != 0 {
					if _, err := os.Stat(out); err == nil {
						t.Errorf("a failed get of %s left %s", key, out)
					}
					return nil, code
				}
				got, err := os.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				return got, code
			}
			if got, code := get(keyB); code != 0 || sha256Hex(got) != sha256Hex(b) {
				t.Errorf("get of b without AWS credentials: exit %d, %d bytes; want b's %d\n%s", code, len(got), len(b), stderrs[len(stderrs)-1])
			}
			if got, code := get(keyA, "--version", "1"); code != 0 || sha256Hex(got) != sha256Hex(a) {
				t.Errorf("get of a at version 1 without AWS credentials: exit %d, %d bytes; want a's %d\n%s", code, len(got), len(a), stderrs[len(stderrs)-1])
			}
			if out, code := run(noCreds, tk.read, "get", "--table", "clips", "--key", keyB, "-o", "-"); code != 0 || sha256Hex([]byte(out)) != sha256Hex(b) {
				t.Errorf("get of b to stdout: exit %d, %d bytes", code, len(out))
			}
			for _, tc := range []struct {
				name string
				key  string
				args []string
				want string
			}{
				{"a deleted row at the latest version", keyA, nil, "no such file in the table"},
				{"a key no row has", "objects/2026/12/01/nothing-here.bin", nil, "no such file in the table"},
				{"b before its row", keyB, []string{"--version", "1"}, "no such file in the table"},
				{"a version never committed", keyB, []string{"--version", "9"}, "version not found"},
			} {
				if _, code := get(tc.key, tc.args...); code != 1 || !strings.Contains(stderrs[len(stderrs)-1], tc.want) {
					t.Errorf("%s: exit %d, %q; want 1 and %q", tc.name, code, stderrs[len(stderrs)-1], tc.want)
				}
			}
			// lake url --version signs a URL for the deleted row's object.
			u := strings.TrimSpace(must(noCreds, tk.read, "url", "--table", "clips", "--key", keyA, "--version", "1"))
			if got, code := fetch(t, u); code != http.StatusOK || sha256Hex(got) != sha256Hex(a) {
				t.Errorf("GET of lake url --version 1 for a: status %d, %d bytes", code, len(got))
			}
			if _, code := run(noCreds, tk.read, "url", "--table", "clips", "--key", keyA); code != 1 {
				t.Errorf("lake url of a at the latest version: exit %d, want 1", code)
			}
			if mode == "direct" {
				// With credentials and direct uploads, get reads the stage itself.
				if out, code := run(withCreds, tk.read, "get", "--table", "clips", "--key", keyA, "--version", "1", "-o", "-"); code != 0 || sha256Hex([]byte(out)) != sha256Hex(a) {
					t.Errorf("get with credentials: exit %d, %d bytes", code, len(out))
				}
			}
			for _, errOut := range stderrs {
				if strings.Contains(errOut, "X-Amz-Signature") {
					t.Fatalf("a URL signature on the CLI's stderr: %q", errOut)
				}
			}
			if strings.Contains(p.output(), "X-Amz-Signature") {
				t.Error("a URL signature is in the service's log")
			}
		})
	}
}
