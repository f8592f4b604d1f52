package presigned_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakedata/lake/internal/s3test"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/checkpoint"
	"github.com/lakedata/lake/objects/presigned"
	"github.com/lakedata/lake/objects/s3"
)

func TestMain(m *testing.M) { os.Exit(s3test.RunShared(m)) }

const partSize = 5 << 20

// stage is an S3 stage on versitygw with its granter.
type stage struct {
	s      *s3.Store
	g      *granter
	bucket string
}

func newStage(t *testing.T) *stage {
	t.Helper()
	srv := s3test.Shared(t)
	bucket := srv.NewBucket(t)
	srv.SetEnv(t)
	cfg := s3.DefaultConfig()
	cfg.Bucket, cfg.Endpoint, cfg.PathStyle, cfg.PartSize = bucket, srv.Endpoint, true, partSize
	s, err := s3.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &stage{s: s, g: newGranter(s), bucket: bucket}
}

func (st *stage) options(name string) presigned.Options {
	return presigned.Options{Table: "files", FileName: name, ContentType: "application/octet-stream",
		Bucket: st.bucket, PartSize: partSize, CommitID: "0195a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"}
}

// check reads the object back and compares it with data.
func (st *stage) check(t *testing.T, res presigned.Result, data []byte) {
	t.Helper()
	f := res.File
	if f == nil || f.GetSize() != int64(len(data)) || f.GetSha256() != hexSum(data) {
		t.Fatalf("uploaded file %v, want %d bytes of sha256 %s", f, len(data), hexSum(data))
	}
	got, err := objects.ReadAll(t.Context(), st.s, f.GetKey())
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the object at %s differs from the file (%v)", f.GetKey(), err)
	}
}

func randomFile(t *testing.T, size int, seed uint64) (string, []byte) {
	t.Helper()
	data := make([]byte, size)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	p := filepath.Join(t.TempDir(), "data.bin")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p, data
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func rawSum(h string) [32]byte {
	var s [32]byte
	hex.Decode(s[:], []byte(h))
	return s
}

func digestOf(sums [][32]byte) string {
	h := sha256.New()
	for _, s := range sums {
		h.Write(s[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func openSession(t *testing.T, dir string) *checkpoint.Session {
	t.Helper()
	sess, err := checkpoint.Open(filepath.Join(dir, "cp.json"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// A file of three parts uploads with hashing overlapped (one grant
// without a sum) and a granted checkpoint; one of one part and an empty
// one are hashed first and sent in a single PUT, which leaves no
// checkpoint. Run again once the stage holds them, each is answered with
// the object already there and sends nothing.
func TestUpload(t *testing.T) {
	st := newStage(t)
	up := presigned.New(st.g, nil)
	for _, tc := range []struct {
		name string
		size int
	}{{"three parts", 2*partSize + 1234}, {"one part", 300 << 10}, {"empty", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			path, data := randomFile(t, tc.size, uint64(tc.size))
			sess := openSession(t, t.TempDir())
			var last objects.Progress
			var mu sync.Mutex
			steps := map[presigned.Step]int{}
			o := st.options("data.bin")
			o.Progress = func(p objects.Progress) { last = p }
			o.Step = func(s presigned.Step) {
				mu.Lock()
				steps[s]++
				mu.Unlock()
			}
			res, err := up.PutFile(t.Context(), path, sess, o)
			if err != nil {
				t.Fatal(err)
			}
			parts := max(1, (tc.size+partSize-1)/partSize)
			multipart := parts > 1
			saved, completed := parts, 1
			if !multipart {
				saved, completed = 0, 0 // a single PUT has no checkpoint to save into
			}
			if steps[presigned.StepPartUploaded] != parts || steps[presigned.StepPartSaved] != saved || steps[presigned.StepCompleted] != completed {
				t.Errorf("steps %v for %d parts", steps, parts)
			}
			st.check(t, res, data)
			if res.Deduplicated || res.BytesSent != int64(tc.size) || last.Done != int64(tc.size) || last.Total != int64(tc.size) {
				t.Fatalf("result %+v, last progress %+v; want %d bytes sent and done", res, last, tc.size)
			}
			if multipart {
				cp, err := sess.Load()
				if err != nil || cp.Kind != checkpoint.KindGranted || !cp.Completed || cp.SHA256 != hexSum(data) {
					t.Fatalf("checkpoint after the upload: %+v, %v", cp, err)
				}
				noSecrets(t, sess)
			} else if cp, err := sess.Load(); !errors.Is(err, checkpoint.ErrNoCheckpoint) {
				t.Fatalf("a single PUT left a checkpoint: %+v, %v", cp, err)
			}

			before := st.g.grants.Load()
			again, err := up.PutFile(t.Context(), path, nil, o)
			if err != nil {
				t.Fatal(err)
			}
			if !again.Deduplicated || again.BytesSent != 0 || again.File.GetKey() != res.File.GetKey() {
				t.Fatalf("the same file again: %+v, want the first object, nothing sent", again)
			}
			if n := st.g.grants.Load() - before; tc.size > partSize && n != 2 || tc.size <= partSize && n != 1 {
				t.Errorf("%d grants for the second upload (hash_first costs one more for a file of several parts)", n)
			}
		})
	}
}

// noSecrets fails if the saved checkpoint holds anything like a URL.
func noSecrets(t *testing.T, sess *checkpoint.Session) {
	t.Helper()
	cp, err := sess.Load()
	if err != nil {
		t.Fatal(err)
	}
	b, err := checkpoint.Encode(cp)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"http", "X-Amz-", "x-amz-", "Signature"} {
		if bytes.Contains(b, []byte(s)) {
			t.Fatalf("the checkpoint holds %q:\n%s", s, b)
		}
	}
}

// An upload cancelled after its first part resumes from its checkpoint:
// it asks which parts the stage holds, re-reads the file, and PUTs only
// the others.
func TestResumeSendsOnlyMissingParts(t *testing.T) {
	st := newStage(t)
	up := presigned.New(st.g, nil)
	path, data := randomFile(t, 3*partSize+77, 3)
	dir := t.TempDir()
	sess := openSession(t, dir)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	o := st.options("data.bin")
	o.Concurrency = 1
	o.Progress = func(p objects.Progress) {
		if p.Done >= partSize {
			cancel()
		}
	}
	if _, err := up.PutFile(ctx, path, sess, o); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled upload: %v, want context.Canceled", err)
	}
	cp, err := sess.Load()
	if err != nil || cp.Kind != checkpoint.KindGranted || len(cp.Parts) == 0 || cp.Completed || cp.SHA256 != "" {
		t.Fatalf("checkpoint of the cancelled upload: %+v, %v", cp, err)
	}
	noSecrets(t, sess)
	sess.Close()

	sess = openSession(t, dir)
	var resumed int
	o.Concurrency, o.Progress = 0, func(p objects.Progress) { resumed = p.ResumedParts }
	res, err := up.PutFile(t.Context(), path, sess, o)
	if err != nil {
		t.Fatal(err)
	}
	st.check(t, res, data)
	if res.ResumedParts < 1 || resumed != res.ResumedParts || res.BytesSent != int64(len(data))-int64(res.ResumedParts)*partSize {
		t.Fatalf("resume: %d parts held, %d bytes sent of %d", res.ResumedParts, res.BytesSent, len(data))
	}
	if st.g.lists.Load() != 1 {
		t.Errorf("the resume listed the held parts %d times, want once", st.g.lists.Load())
	}
	noSecrets(t, sess)

	// Completed: run again, it completes again and sends nothing.
	again, err := up.PutFile(t.Context(), path, sess, o)
	if err != nil || again.File.GetKey() != res.File.GetKey() || again.BytesSent != 0 {
		t.Fatalf("a completed checkpoint again: %+v, %v", again, err)
	}
}

// A file changed between an interrupted upload and its resume is refused
// before anything is sent.
func TestResumeSourceChanged(t *testing.T) {
	st := newStage(t)
	up := presigned.New(st.g, nil)
	path, _ := randomFile(t, 2*partSize+5, 4)
	dir := t.TempDir()
	sess := openSession(t, dir)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	o := st.options("data.bin")
	o.Concurrency = 1
	o.Progress = func(p objects.Progress) {
		if p.Done > 0 {
			cancel()
		}
	}
	if _, err := up.PutFile(ctx, path, sess, o); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled upload: %v", err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	o.Progress = nil
	_, err := up.PutFile(t.Context(), path, sess, o)
	if !errors.Is(err, checkpoint.ErrSourceChanged) {
		t.Fatalf("resume of a changed file: %v, want ErrSourceChanged", err)
	}
}

// slowPuts delays the first PUT of every part by delay before sending
// it, so its URL can expire on the way, and counts the bytes of PUTs
// answered 200. fake, when set, answers instead of S3 (a fault).
type slowPuts struct {
	delay time.Duration
	fake  func(n int) *http.Response // n: PUTs so far

	mu   sync.Mutex
	seen map[string]bool // part numbers delayed once
	puts int
	sent atomic.Int64
}

func (s *slowPuts) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPut {
		return http.DefaultTransport.RoundTrip(req)
	}
	s.mu.Lock()
	s.puts++
	n := s.puts
	part := req.URL.Query().Get("partNumber")
	first := !s.seen[part]
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	s.seen[part] = true
	s.mu.Unlock()
	if s.fake != nil {
		if resp := s.fake(n); resp != nil {
			req.Body.Close()
			return resp, nil
		}
	}
	if first && s.delay > 0 {
		time.Sleep(s.delay)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusOK {
		s.sent.Add(req.ContentLength)
	}
	return resp, err
}

// URLs of one second, used through a path so slow they expire before the
// PUT reaches S3: S3 refuses them as expired, the uploader renews each
// once and the upload succeeds.
func TestShortURLsRenewed(t *testing.T) {
	st := newStage(t)
	tr := &slowPuts{delay: 1500 * time.Millisecond}
	up := presigned.New(st.g, &http.Client{Transport: tr})
	path, data := randomFile(t, 2*partSize+99, 5)
	o := st.options("data.bin")
	o.URLLifetime = time.Second
	res, err := up.PutFile(t.Context(), path, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	st.check(t, res, data)
	// Each part: renewed before use (a 1 s URL never has a second left),
	// then again after S3's refusal.
	if r := st.g.renews.Load(); r < 6 {
		t.Errorf("%d renewals for 3 parts, want at least 6", r)
	}
	if tr.puts != 6 {
		t.Errorf("%d PUTs for 3 parts, want 6: S3 refuses each first one as expired", tr.puts)
	}
	if tr.sent.Load() != int64(len(data)) || res.BytesSent != int64(len(data)) {
		t.Errorf("%d bytes accepted by S3, %d reported, want %d", tr.sent.Load(), res.BytesSent, len(data))
	}
}

// expiredAnswer is S3's refusal of an expired presigned URL.
func expiredAnswer() *http.Response {
	body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>`
	return &http.Response{StatusCode: http.StatusForbidden, Header: http.Header{"Content-Type": {"application/xml"}},
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body))}
}

// A 403 saying the URL expired makes the uploader renew that URL once and
// try again; a second such answer fails the upload, naming S3's code and
// not the URL.
func TestExpiredAnswerRenewsOnce(t *testing.T) {
	st := newStage(t)
	path, data := randomFile(t, 100<<10, 6)
	o := st.options("data.bin")
	o.NoDedup = true

	once := &slowPuts{fake: func(n int) *http.Response {
		if n == 1 {
			return expiredAnswer()
		}
		return nil
	}}
	res, err := presigned.New(st.g, &http.Client{Transport: once}).PutFile(t.Context(), path, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	st.check(t, res, data)
	if r := st.g.renews.Load(); r != 1 {
		t.Errorf("%d renewals after one expired answer, want 1 (the grant signed the first URL)", r)
	}

	st.g.renews.Store(0)
	always := &slowPuts{fake: func(int) *http.Response { return expiredAnswer() }}
	_, err = presigned.New(st.g, &http.Client{Transport: always}).PutFile(t.Context(), path, nil, o)
	var pe *presigned.PartError
	if !errors.As(err, &pe) || pe.Status != http.StatusForbidden || pe.Code != "AccessDenied" {
		t.Fatalf("always expired: %v, want a PartError 403 AccessDenied", err)
	}
	if strings.Contains(err.Error(), "http") || strings.Contains(err.Error(), "X-Amz") {
		t.Fatalf("the error quotes the URL: %v", err)
	}
	if r := st.g.renews.Load(); r != 1 {
		t.Errorf("%d renewals, want exactly 1", r)
	}
}

// A stream of several parts uploads, spooled for its size.
func TestPutReader(t *testing.T) {
	st := newStage(t)
	_, data := randomFile(t, partSize+3, 7)
	res, err := presigned.New(st.g, nil).PutReader(t.Context(), bytes.NewReader(data), st.options("stream.bin"))
	if err != nil {
		t.Fatal(err)
	}
	st.check(t, res, data)
}

// A part PUT answered 503 is tried again after a pause; one that keeps
// failing gives up after a bounded number of tries.
func TestPutRetriesServerErrors(t *testing.T) {
	st := newStage(t)
	path, data := randomFile(t, 1000, 8)
	o := st.options("data.bin")
	o.NoDedup = true
	unavailable := func() *http.Response {
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(`<Error><Code>SlowDown</Code></Error>`))}
	}
	flaky := &slowPuts{fake: func(n int) *http.Response {
		if n <= 2 {
			return unavailable()
		}
		return nil
	}}
	res, err := presigned.New(st.g, &http.Client{Transport: flaky}).PutFile(t.Context(), path, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	st.check(t, res, data)
	if flaky.puts != 3 {
		t.Errorf("%d PUTs, want 3", flaky.puts)
	}
	down := &slowPuts{fake: func(int) *http.Response { return unavailable() }}
	_, err = presigned.New(st.g, &http.Client{Transport: down}).PutFile(t.Context(), path, nil, o)
	var pe *presigned.PartError
	if !errors.As(err, &pe) || pe.Code != "SlowDown" || down.puts != 4 {
		t.Fatalf("always 503: %v after %d PUTs, want a PartError SlowDown after 4", err, down.puts)
	}
}

// Another file of a size the stage holds is answered hash_first: it is
// hashed whole, granted with its sums (URLs for the first parts with the
// grant, the rest renewed in batches) and uploaded.
func TestHashFirstThenUpload(t *testing.T) {
	st := newStage(t)
	up := presigned.New(st.g, nil)
	size := 3*partSize + 1
	first, _ := randomFile(t, size, 10)
	if _, err := up.PutFile(t.Context(), first, nil, st.options("a.bin")); err != nil {
		t.Fatal(err)
	}
	path, data := randomFile(t, size, 11)
	grants, renews := st.g.grants.Load(), st.g.renews.Load()
	o := st.options("b.bin")
	o.Concurrency = 1 // the grant signs 2 URLs, a renewal the other 2
	res, err := up.PutFile(t.Context(), path, openSession(t, t.TempDir()), o)
	if err != nil {
		t.Fatal(err)
	}
	st.check(t, res, data)
	if res.Deduplicated || res.BytesSent != int64(size) {
		t.Fatalf("result %+v, want every byte sent", res)
	}
	if g, r := st.g.grants.Load()-grants, st.g.renews.Load()-renews; g != 2 || r != 1 {
		t.Errorf("%d grants and %d renewals, want 2 (hash_first, then with sums) and 1 (parts 3 and 4 together)", g, r)
	}
}

// TestDedupKeepsTheCommitID: an interrupted upload whose checkpoint holds
// a commit id, resumed after its multipart upload went (gc swept it) and
// answered with an object the stage already holds, keeps that commit id
// in its checkpoint — now the record of the answered object — so a crash
// before the append cannot make the next run commit under a new id.
func TestDedupKeepsTheCommitID(t *testing.T) {
	st := newStage(t)
	up := presigned.New(st.g, nil)
	path, data := randomFile(t, 3*partSize+5, 11)
	dir := t.TempDir()
	sess := openSession(t, dir)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	o := st.options("data.bin")
	o.Concurrency = 1
	o.Progress = func(p objects.Progress) {
		if p.Done >= partSize {
			cancel()
		}
	}
	if _, err := up.PutFile(ctx, path, sess, o); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled upload: %v, want context.Canceled", err)
	}
	cp, err := sess.Load()
	if err != nil || cp.Kind != checkpoint.KindGranted {
		t.Fatalf("checkpoint of the cancelled upload: %+v, %v", cp, err)
	}
	const commitID = "0195a1b2-c3d4-7e5f-8a9b-0c1d2e3f0001"
	cp.CommitID, cp.Table = commitID, o.Table // as the client records it before its append
	if err := sess.Save(cp); err != nil {
		t.Fatal(err)
	}
	key, _ := presigned.GrantedKey(cp.Binding)
	if err := st.s.AbortGrant(t.Context(), key, cp.Binding.UploadID); err != nil {
		t.Fatal(err)
	}
	// The same content, put by someone else meanwhile.
	other := filepath.Join(t.TempDir(), "copy.bin")
	if err := os.WriteFile(other, data, 0o600); err != nil {
		t.Fatal(err)
	}
	first, err := up.PutFile(t.Context(), other, nil, st.options("copy.bin"))
	if err != nil {
		t.Fatal(err)
	}

	o.Progress = nil
	res, err := up.PutFile(t.Context(), path, sess, o)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Deduplicated || res.File.GetKey() != first.File.GetKey() {
		t.Fatalf("the resumed upload: %+v, want the other put's object", res)
	}
	cp, err = sess.Load()
	if err != nil || cp.Kind != checkpoint.KindSingle || cp.CommitID != commitID || cp.Binding.Key != first.File.GetKey() || cp.SHA256 != hexSum(data) {
		t.Fatalf("checkpoint after the deduplicated resume: %+v, %v; want a single record of %s with commit id %s", cp, err, first.File.GetKey(), commitID)
	}
	noSecrets(t, sess)
}

// A file of one part goes in one PUT: a single-PUT grant, no multipart
// upload started, no renewal, no listing; the object holds the bytes and
// the completion answers its sum. A PUT whose answer is lost (the object
// landed, the uploader saw a failure) is tried again, finds the key
// written (412) and completes.
func TestOnePartIsOnePut(t *testing.T) {
	st := newStage(t)
	path, data := randomFile(t, 64<<10, 21)
	tr := &slowPuts{}
	res, err := presigned.New(st.g, &http.Client{Transport: tr}).PutFile(t.Context(), path, openSession(t, t.TempDir()), st.options("small.bin"))
	if err != nil {
		t.Fatal(err)
	}
	st.check(t, res, data)
	if tr.puts != 1 || st.g.singles.Load() != 1 || st.g.multiparts.Load() != 0 || st.g.renews.Load() != 0 || st.g.lists.Load() != 0 {
		t.Errorf("%d PUTs, %d single-PUT and %d multipart grants, %d renewals, %d listings; want 1, 1, 0, 0, 0",
			tr.puts, st.g.singles.Load(), st.g.multiparts.Load(), st.g.renews.Load(), st.g.lists.Load())
	}
	if res.BytesSent != int64(len(data)) || res.Deduplicated {
		t.Errorf("result %+v, want every byte sent", res)
	}
	if left := pendingUploads(t, st); left != 0 {
		t.Errorf("%d multipart uploads pending", left)
	}

	// The first PUT lands, its answer is lost: the retry meets 412.
	path2, data2 := randomFile(t, 1000, 22)
	lost := &lostAnswer{}
	o := st.options("lost.bin")
	o.NoDedup = true
	res, err = presigned.New(st.g, &http.Client{Transport: lost}).PutFile(t.Context(), path2, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	st.check(t, res, data2)
	if lost.puts != 2 || lost.status[1] != http.StatusPreconditionFailed {
		t.Errorf("%d PUTs answered %v, want 2: the lost one, then 412", lost.puts, lost.status)
	}
}

// lostAnswer sends every PUT to S3 but turns the first one's answer into
// a network failure, and records the status of each.
type lostAnswer struct {
	mu     sync.Mutex
	puts   int
	status []int
}

func (l *lostAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if req.Method != http.MethodPut || err != nil {
		return resp, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.puts++
	l.status = append(l.status, resp.StatusCode)
	if l.puts == 1 {
		resp.Body.Close()
		return nil, errors.New("connection reset")
	}
	return resp, nil
}

// pendingUploads counts the multipart uploads the stage holds.
func pendingUploads(t *testing.T, st *stage) int {
	t.Helper()
	n := 0
	for _, err := range st.s.Leftovers(t.Context(), time.Now().Add(time.Hour)) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}
