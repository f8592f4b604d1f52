package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/internal/s3test"
	"github.com/lakedata/lake/internal/tcpproxy"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// grantRig is a lake serve on versitygw whose clients hold no AWS
// credentials: every upload goes through upload grants (DESIGN §12). The
// service reaches the gateway through a counting proxy, and so do the
// part URLs it signs, so the proxy counts every byte a client sends to
// the stage.
type grantRig struct {
	gw       *s3test.Server
	bucket   string
	proxy    *tcpproxy.Proxy
	lake     *proc
	endpoint string
	tokens   scopeTokens
	noCreds  []string // a client's environment: no AWS credentials at all
	dir      string
	cpDir    string
}

func newGrantRig(t *testing.T, serveArgs ...string) *grantRig {
	t.Helper()
	gw := s3test.Start(t)
	r := &grantRig{gw: gw, bucket: gw.NewBucket(t), dir: t.TempDir(), tokens: newScopeTokens()}
	r.proxy = tcpproxy.Start(t, strings.TrimPrefix(gw.Endpoint, "http://"))
	r.cpDir = filepath.Join(r.dir, "checkpoints")
	tokens := writeTokenFile(t, r.dir, "tokens", r.tokens.read+" read", r.tokens.write+" write", r.tokens.admin+" admin")
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0",
		"--data-dir", filepath.Join(r.dir, "data"), "--stage", "s3://" + r.bucket + "/lake",
		"--s3-endpoint", "http://" + r.proxy.Addr, "--token-file", tokens}, serveArgs...)
	r.lake = startLakeEnv(t, s3Env(t, gw), args...)
	r.endpoint = "grpc://" + r.lake.Addr()
	empty := filepath.Join(r.dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r.noCreds = noAWSEnv(empty)
	r.must(t, r.tokens.admin, "table", "create", "clips")
	return r
}

// must runs the CLI without AWS credentials and fails the test unless it
// exits 0; it returns stdout.
func (r *grantRig) must(t *testing.T, token string, args ...string) string {
	t.Helper()
	out, errOut, code := runEnv(t, r.noCreds, r.endpoint, token, args...)
	if code != 0 {
		t.Fatalf("lake %s: exit %d\n%s", strings.Join(args, " "), code, errOut)
	}
	return out
}

// grantPut is what `lake put --json` prints.
type grantPut struct {
	Key          string `json:"key"`
	Size         int64  `json:"size"`
	SHA256       string `json:"sha256"`
	Deduplicated bool   `json:"deduplicated"`
	BytesSent    int64  `json:"bytes_sent"`
}

// put runs `lake put` into clips with a write token and no AWS
// credentials, and returns its answer and the bytes the proxy counted
// meanwhile.
func (r *grantRig) put(t *testing.T, path, name string) (grantPut, int64) {
	t.Helper()
	return r.putInto(t, "clips", path, name)
}

// putInto is put into table.
func (r *grantRig) putInto(t *testing.T, table, path, name string) (grantPut, int64) {
	t.Helper()
	before := settle(r.proxy)
	out := r.must(t, r.tokens.write, "put", path, "--table", table, "--name", name, "--json", "--no-progress", "--checkpoint-dir", r.cpDir)
	sent := settle(r.proxy) - before
	var res grantPut
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Key == "" {
		t.Fatalf("put output %q: %v", out, err)
	}
	return res, sent
}

// objectSHA256 reads the object at key (relative to the stage) with the
// gateway's own credentials; "" when it does not exist.
func (r *grantRig) objectSHA256(t *testing.T, key string) string {
	t.Helper()
	out, err := r.gw.Client(t).GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(r.bucket), Key: aws.String("lake/" + key)})
	if err != nil {
		if strings.Contains(err.Error(), "NoSuchKey") {
			return ""
		}
		t.Fatal(err)
	}
	defer out.Body.Close()
	h := sha256.New()
	if _, err := io.Copy(h, out.Body); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// pendingUploads counts the bucket's unfinished multipart uploads.
func (r *grantRig) pendingUploads(t *testing.T) int {
	t.Helper()
	mpu, err := r.gw.Client(t).ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: aws.String(r.bucket)})
	if err != nil {
		t.Fatal(err)
	}
	return len(mpu.Uploads)
}

// writeRandom writes size pseudo-random bytes (seeded: fast, and a file
// of its own for each seed) to path and returns their SHA-256.
func writeRandom(t testing.TB, path string, size int64, seed uint64) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	src := mrand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), 1})
	if _, err := io.CopyN(io.MultiWriter(f, h), src, size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// checkpointParts returns how many finished parts the one upload
// checkpoint in dir records, and its bytes; -1 while there is none.
func checkpointParts(dir string) (int, []byte) {
	paths, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(paths) != 1 {
		return -1, nil
	}
	raw, err := os.ReadFile(paths[0])
	if err != nil {
		return -1, nil
	}
	var cp struct {
		Parts []json.RawMessage `json:"parts"`
	}
	if json.Unmarshal(raw, &cp) != nil {
		return -1, nil
	}
	return len(cp.Parts), raw
}

// killPutAfterParts starts `lake put file` without AWS credentials and
// SIGKILLs it once its checkpoint records parts finished parts; it
// returns the checkpoint's bytes as they were then.
func (r *grantRig) killPutAfterParts(t *testing.T, file string, parts int) []byte {
	t.Helper()
	cmd := exec.Command(lakeBin, "put", file, "--table", "clips", "--no-progress", "--checkpoint-dir", r.cpDir, "--endpoint", r.endpoint)
	cmd.Env = append(r.noCreds, "LAKE_TOKEN="+r.tokens.write)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if n, b := checkpointParts(r.cpDir); n >= parts {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-exited
			return b
		}
		select {
		case err := <-exited:
			t.Fatalf("the put ended (%v) before %d parts were checkpointed:\n%s", err, parts, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint with %d parts after 3 minutes:\n%s", parts, stderr.String())
		}
	}
}

// TestPresignedUploadCancelWithoutCredentials: `lake uploads cancel` of
// an interrupted put through grants, run without AWS credentials, has the
// service abort the multipart upload and removes the checkpoint.
func TestPresignedUploadCancelWithoutCredentials(t *testing.T) {
	r := newGrantRig(t)
	file := filepath.Join(r.dir, "cancelled.bin")
	writeRandom(t, file, 80<<20, 3)
	r.killPutAfterParts(t, file, 1)
	if n := r.pendingUploads(t); n != 1 {
		t.Fatalf("%d multipart uploads pending after the kill, want 1", n)
	}
	ls := exec.Command(lakeBin, "uploads", "ls", "--checkpoint-dir", r.cpDir)
	ls.Env = r.noCreds
	if out, err := ls.CombinedOutput(); err != nil || !strings.Contains(string(out), file) {
		t.Fatalf("uploads ls does not list the interrupted put (%v):\n%s", err, out)
	}
	if _, errOut, code := runEnv(t, r.noCreds, r.endpoint, r.tokens.read, "uploads", "cancel", file, "--checkpoint-dir", r.cpDir); code != 1 || !strings.Contains(strings.ToLower(errOut), "permission denied") {
		t.Fatalf("uploads cancel with a read token: exit %d, %s", code, errOut)
	}
	r.must(t, r.tokens.write, "uploads", "cancel", file, "--checkpoint-dir", r.cpDir)
	if n := r.pendingUploads(t); n != 0 {
		t.Fatalf("%d multipart uploads pending after the cancel", n)
	}
	if left, _ := filepath.Glob(filepath.Join(r.cpDir, "*.json")); len(left) != 0 {
		t.Fatalf("checkpoints left after the cancel: %v", left)
	}
}

// TestPresignedPutResumesAfterSIGKILLWithoutCredentials: a 512 MiB put by
// a client with no AWS credentials is SIGKILLed once half its parts are
// checkpointed; the same command again commits one row whose object
// matches the file, sends at most 60 % of the file again, leaves no
// multipart upload pending, and the checkpoint it resumed from held no
// credential, token or URL.
func TestPresignedPutResumesAfterSIGKILLWithoutCredentials(t *testing.T) {
	r := newGrantRig(t)
	const size = 512 << 20
	file := filepath.Join(r.dir, "film.mp4")
	want := writeRandom(t, file, size, 512)

	raw := r.killPutAfterParts(t, file, size/(16<<20)/2)
	firstRun := settle(r.proxy)
	// The checkpoint is the user's file: it names the upload, never a
	// way into the stage.
	if _, latest := checkpointParts(r.cpDir); latest != nil {
		raw = latest
	}
	for _, secret := range []string{"http", "X-Amz", "Signature", r.gw.AccessKey, r.gw.SecretKey, r.tokens.write} {
		if strings.Contains(string(raw), secret) {
			t.Fatalf("the upload checkpoint holds %q", secret)
		}
	}

	res, resent := r.put(t, file, "film.mp4")
	t.Logf("first run sent %d bytes before the kill; the resumed run sent %d bytes (%.1f %% of the file)", firstRun, resent, 100*float64(resent)/size)
	if resent > size*6/10 {
		t.Fatalf("the resumed put sent %d bytes, more than 60 %% of %d", resent, size)
	}
	if res.SHA256 != want || res.Size != size {
		t.Fatalf("the row says %d bytes, sha256 %s; the file has %d, %s", res.Size, res.SHA256, size, want)
	}
	if got := r.objectSHA256(t, res.Key); got != want {
		t.Fatalf("the object at %s has sha256 %q, the file %s", res.Key, got, want)
	}
	csv := r.must(t, r.tokens.read, "sql", "SELECT count(*) AS n, min(file.sha256) AS s FROM clips", "--format", "csv")
	if !strings.Contains(csv, "1,"+want) {
		t.Fatalf("the table holds:\n%s", csv)
	}
	if n := r.pendingUploads(t); n != 0 {
		t.Fatalf("%d multipart uploads pending after the put", n)
	}
	if left, _ := filepath.Glob(filepath.Join(r.cpDir, "*.json")); len(left) != 0 {
		t.Fatalf("checkpoints left after the put: %v", left)
	}
	if strings.Contains(r.lake.output(), "X-Amz-Signature") {
		t.Fatal("a presigned URL is in the service's log")
	}
}

// TestDedupSharesObjectsUntilNoRowNeedsThem: the same content put again
// under another name, into another table, sends almost nothing and shares
// the key; the object survives gc while one retained row names it and is
// freed once none does. Both a multipart file and a one-part file.
func TestDedupSharesObjectsUntilNoRowNeedsThem(t *testing.T) {
	r := newGrantRig(t)
	r.must(t, r.tokens.admin, "table", "create", "others")
	for i, size := range []int64{40<<20 + 123, 3<<20 + 7} {
		file := filepath.Join(r.dir, "orig.bin")
		want := writeRandom(t, file, size, uint64(100+i))
		first, sent := r.put(t, file, "a.bin")
		if first.Deduplicated || sent < size {
			t.Fatalf("size %d: the first put sent %d bytes (deduplicated %v)", size, sent, first.Deduplicated)
		}
		copyPath := filepath.Join(r.dir, "copy.bin")
		if err := os.Rename(file, copyPath); err != nil {
			t.Fatal(err)
		}
		second, sent := r.putInto(t, "others", copyPath, "b.bin")
		t.Logf("size %d: the second put sent %d bytes", size, sent)
		if !second.Deduplicated || second.Key != first.Key || sent >= 1<<20 {
			t.Fatalf("size %d: the second put: key %s (first %s), deduplicated %v, %d bytes sent", size, second.Key, first.Key, second.Deduplicated, sent)
		}
		if second.SHA256 != want {
			t.Fatalf("size %d: the deduplicated row claims %s, the file is %s", size, second.SHA256, want)
		}
		// A third row in clips shares the key: a --where that selects
		// only one of the two is refused (a delete goes by key), and
		// nothing changes.
		if third, _ := r.put(t, copyPath, "c.bin"); third.Key != first.Key {
			t.Fatalf("size %d: the third put got key %s, not %s", size, third.Key, first.Key)
		}
		if _, errOut, code := runEnv(t, r.noCreds, r.endpoint, r.tokens.write, "rm", "--table", "clips", "--where", "name = 'a.bin'"); code == 0 || !strings.Contains(errOut, "name the same objects") {
			t.Fatalf("size %d: rm --where of one of two rows sharing a key: exit %d, %s", size, code, errOut)
		}
		if csv := r.must(t, r.tokens.read, "sql", "SELECT count(*) AS n FROM clips", "--format", "csv"); !strings.Contains(csv, "\n2") {
			t.Fatalf("size %d: the refused rm changed clips:\n%s", size, csv)
		}

		collect := func() {
			t.Helper()
			for _, table := range []string{"clips", "others"} {
				r.must(t, r.tokens.admin, "table", "expire", table, "--keep-last", "1")
			}
			r.must(t, r.tokens.admin, "gc", "--grace", "0s")
		}
		r.must(t, r.tokens.write, "rm", "--table", "clips", "--key", first.Key)
		collect()
		if got := r.objectSHA256(t, first.Key); got != want {
			t.Fatalf("size %d: gc freed an object a retained row names (now %q)", size, got)
		}
		r.must(t, r.tokens.write, "rm", "--table", "others", "--where", "name = 'b.bin'")
		collect()
		if got := r.objectSHA256(t, first.Key); got != "" {
			t.Fatalf("size %d: the object no row names survived gc", size)
		}
		// Freed objects are no dedup target any more: the content is sent
		// again, to a new key.
		again, sent := r.put(t, copyPath, "d.bin")
		if again.Deduplicated || again.Key == first.Key || sent < size {
			t.Fatalf("size %d: a put after gc: key %s, deduplicated %v, %d bytes sent", size, again.Key, again.Deduplicated, sent)
		}
		r.must(t, r.tokens.write, "rm", "--table", "clips", "--key", again.Key)
		if err := os.Remove(copyPath); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPresignedPartURLsRenewDuringALongUpload: with part URLs that work 5
// s, an upload paced to last several times that succeeds. The file has
// the size of one put before, so the grant comes after the whole file is
// hashed and signs URLs for parts that wait their turn well past 5 s.
func TestPresignedPartURLsRenewDuringALongUpload(t *testing.T) {
	r := newGrantRig(t, "--upload-url-expiry", "5s")
	const size = 96 << 20 // 6 parts: more than the client sends at once
	first := filepath.Join(r.dir, "first.bin")
	writeRandom(t, first, size, 7)
	r.put(t, first, "first.bin")

	second := filepath.Join(r.dir, "second.bin")
	want := writeRandom(t, second, size, 8)
	r.proxy.SetRate(8 << 20)
	start := time.Now()
	res, sent := r.put(t, second, "second.bin")
	took := time.Since(start)
	r.proxy.SetRate(0)
	t.Logf("the paced put took %v and sent %d bytes", took, sent)
	if took < 10*time.Second {
		t.Fatalf("the paced put took %v: too short to outlast 5 s URLs twice", took)
	}
	if res.Deduplicated || res.SHA256 != want {
		t.Fatalf("the paced put: %+v, want sha256 %s", res, want)
	}
	if got := r.objectSHA256(t, res.Key); got != want {
		t.Fatalf("the object has sha256 %q, the file %s", got, want)
	}
}

// TestDedupCannotBePoisoned: a client that uploads its own bytes through
// a grant while claiming the SHA-256 of someone else's file never makes
// the genuine file's put land on its object, and its bytes put honestly
// (under their true sum) are not reused under the false one either.
func TestDedupCannotBePoisoned(t *testing.T) {
	r := newGrantRig(t)
	const size = 20<<20 + 5 // two parts
	genuine := filepath.Join(r.dir, "genuine.bin")
	genuineSum := writeRandom(t, genuine, size, 1)
	forgedPath := filepath.Join(r.dir, "forged.bin")
	forgedSum := writeRandom(t, forgedPath, size, 2)
	forged, err := os.ReadFile(forgedPath)
	if err != nil {
		t.Fatal(err)
	}
	liarKey := r.forgeUpload(t, forged, genuineSum)

	res, sent := r.put(t, genuine, "genuine.bin")
	if res.Deduplicated || res.Key == liarKey || sent < size {
		t.Fatalf("the genuine put landed on the forged object: key %s (forged %s), deduplicated %v, %d bytes sent", res.Key, liarKey, res.Deduplicated, sent)
	}
	if got := r.objectSHA256(t, res.Key); got != genuineSum {
		t.Fatalf("the genuine row's object has sha256 %s, want %s", got, genuineSum)
	}
	res, sent = r.put(t, forgedPath, "forged.bin")
	if res.Deduplicated || res.Key == liarKey || sent < size || res.SHA256 != forgedSum {
		t.Fatalf("the forged bytes put honestly: key %s (forged %s), deduplicated %v, sha256 %s (want %s), %d bytes sent",
			res.Key, liarKey, res.Deduplicated, res.SHA256, forgedSum, sent)
	}
}

// forgeUpload uploads data through a grant exactly as a client would,
// except that it claims claimed as the file's SHA-256, and returns the
// completed object's key.
func (r *grantRig) forgeUpload(t *testing.T, data []byte, claimed string) string {
	t.Helper()
	ctx := withTimeout(t, 2*time.Minute)
	fc, err := flightrpc.DialEndpoint(r.endpoint, flightrpc.DialOptions{Token: r.tokens.write})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	var stage lakepb.StageDescriptor
	if err := flightrpc.Action(ctx, fc, wire.ActionDiscover, &lakepb.DiscoverRequest{}, &stage); err != nil {
		t.Fatal(err)
	}
	partSize := int(stage.GetPartSize())
	req := &lakepb.UploadGrantRequest{Table: "clips", FileName: "forged.bin", Size: int64(len(data)), Sha256: claimed}
	var parts [][]byte
	digest := sha256.New()
	for off := 0; off < len(data); off += partSize {
		b := data[off:min(len(data), off+partSize)]
		sum := sha256.Sum256(b)
		digest.Write(sum[:])
		parts = append(parts, b)
		req.Parts = append(req.Parts, &lakepb.UploadPart{Number: int32(len(parts)), Sha256: hex.EncodeToString(sum[:])})
	}
	req.PartDigest = hex.EncodeToString(digest.Sum(nil))
	var g lakepb.UploadGrant
	if err := flightrpc.Action(ctx, fc, wire.ActionUploadGrant, req, &g); err != nil {
		t.Fatal(err)
	}
	if g.GetExisting() != nil || g.GetKey() == "" {
		t.Fatalf("the forged grant: existing %v, key %q", g.GetExisting(), g.GetKey())
	}
	for _, u := range g.GetUrls() {
		putPart(t, ctx, u, parts[u.GetNumber()-1])
	}
	size := int64(len(data))
	var file lakepb.UploadedFile
	if err := flightrpc.Action(ctx, fc, wire.ActionUploadComplete, &lakepb.UploadCompleteRequest{
		Table: "clips", Key: g.GetKey(), UploadId: g.GetUploadId(), Size: &size, Sha256: claimed,
	}, &file); err != nil {
		t.Fatal(err)
	}
	return file.GetKey()
}

// putPart PUTs one part to its presigned URL with the signed headers.
func putPart(t *testing.T, ctx context.Context, u *lakepb.PartUrl, body []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u.GetUrl(), bytes.NewReader(body))
	if err != nil {
		t.Fatal("building a PUT failed") // the error would quote the URL
	}
	for k, v := range u.GetHeaders() {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal("a part PUT failed")
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT of part %d: status %d", u.GetNumber(), resp.StatusCode)
	}
}
