package s3

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lakedata/lake/internal/s3test"
	"github.com/lakedata/lake/internal/tcpproxy"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/checkpoint"
)

// resumableProtocol lists the tests of the resumable upload protocol
// (DESIGN §7). TestResumableWiring fails when one is gone or renamed, and
// runs those a -run or -skip selection left out.
var resumableProtocol = []struct {
	name string
	fn   func(*testing.T)
}{
	{"TestResumableUploadReusesCompletedParts", TestResumableUploadReusesCompletedParts},
	{"TestResumableUploadRejectsChangedSource", TestResumableUploadRejectsChangedSource},
	{"TestResumableUploadRejectsPartMismatch", TestResumableUploadRejectsPartMismatch},
	{"TestResumableUploadAdoptsCompletedObject", TestResumableUploadAdoptsCompletedObject},
	{"TestCancelResumableUploadAbortsAndRemovesCheckpoint", TestCancelResumableUploadAbortsAndRemovesCheckpoint},
}

// TestResumableWiring keeps the protocol tests wired: each entry of
// resumableProtocol is the top-level test of that name, and whenever this
// test runs, every protocol test runs — those the -run or -skip flags
// leave out run here as subtests — so no selection that runs it can pass
// while running none of them.
func TestResumableWiring(t *testing.T) {
	if len(resumableProtocol) == 0 {
		t.Fatal("no resumable upload protocol tests")
	}
	const pkg = "github.com/lakedata/lake/objects/s3."
	for _, tc := range resumableProtocol {
		if got := runtime.FuncForPC(reflect.ValueOf(tc.fn).Pointer()).Name(); got != pkg+tc.name {
			t.Fatalf("resumableProtocol entry %q runs %s", tc.name, got)
		}
	}
	// matcher returns whether a top-level test name matches the flag's
	// pattern (its part before the first slash), or nil when it is unset.
	matcher := func(flagName string) func(string) bool {
		f := flag.Lookup(flagName)
		if f == nil || f.Value.String() == "" {
			return nil
		}
		top, _, _ := strings.Cut(f.Value.String(), "/")
		re, err := regexp.Compile(top)
		if err != nil {
			t.Fatalf("-%s %q: %v", flagName, f.Value.String(), err)
		}
		return re.MatchString
	}
	run, skip := matcher("test.run"), matcher("test.skip")
	for _, tc := range resumableProtocol {
		if (run == nil || run(tc.name)) && (skip == nil || !skip(tc.name)) {
			continue // runs at the top level
		}
		t.Run(tc.name, tc.fn)
	}
}

// resumeFixture is a store with 5 MiB parts behind a counting proxy, a
// file and a checkpoint session for it.
type resumeFixture struct {
	s      *Store
	direct *s3.Client // to the gateway, not counted
	bucket string
	proxy  *tcpproxy.Proxy
	path   string
	data   []byte
	sess   *checkpoint.Session
	cpPath string
}

func newResumeFixture(t *testing.T, size int, seed byte, conc int) *resumeFixture {
	t.Helper()
	srv := s3test.Shared(t)
	proxy := tcpproxy.Start(t, strings.TrimPrefix(srv.Endpoint, "http://"))
	s, _, bucket := newStore(t, func(c *Config) {
		c.Endpoint = "http://" + proxy.Addr
		c.PartSize = MinPartSize
		c.Concurrency = conc
	})
	dir := t.TempDir()
	f := &resumeFixture{
		s: s, direct: srv.Client(t), bucket: bucket, proxy: proxy,
		path: filepath.Join(dir, "big.bin"), data: randomBytes(size, seed),
		cpPath: filepath.Join(dir, "checkpoints", "big.json"),
	}
	if err := os.WriteFile(f.path, f.data, 0o644); err != nil {
		t.Fatal(err)
	}
	f.sess = f.open(t)
	return f
}

func (f *resumeFixture) open(t *testing.T) *checkpoint.Session {
	t.Helper()
	sess, err := checkpoint.Open(f.cpPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// interrupt runs PutPathResumable and cancels it once at least `parts` parts are
// recorded, returning the checkpoint it left.
func (f *resumeFixture) interrupt(t *testing.T, key string, parts int) *checkpoint.Checkpoint {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, err := f.s.PutPathResumable(ctx, key, f.path, f.sess, objects.PutOptions{
		ContentType: "application/x-test",
		Progress: func(p objects.Progress) {
			if p.Done >= min(int64(parts)*MinPartSize, p.Total) {
				cancel()
			}
		},
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted PutPathResumable = %v, want context.Canceled", err)
	}
	cp, err := f.sess.Load()
	if err != nil {
		t.Fatalf("checkpoint after the interrupted upload: %v", err)
	}
	if len(cp.Parts) < parts || cp.Completed {
		t.Fatalf("interrupted upload left %d parts (completed %v), want at least %d", len(cp.Parts), cp.Completed, parts)
	}
	f.wantNoObject(t, key)
	return cp
}

func (f *resumeFixture) wantNoObject(t *testing.T, key string) {
	t.Helper()
	if _, err := f.s.Stat(t.Context(), key); !errors.Is(err, objects.ErrNotFound) {
		t.Fatalf("Stat(%s) = %v, want ErrNotFound", key, err)
	}
}

func (f *resumeFixture) wantContent(t *testing.T, key string) {
	t.Helper()
	got, err := objects.ReadAll(t.Context(), f.s, key)
	if err != nil || !bytes.Equal(got, f.data) {
		t.Fatalf("read back %d bytes (sha %s), %v; want %d (sha %s)", len(got), hexSHA(got), err, len(f.data), hexSHA(f.data))
	}
	if got := head(t, f.direct, f.bucket, key).Metadata[MetaSHA256]; got != hexSHA(f.data) {
		t.Errorf("metadata sha256 %q, want %s", got, hexSHA(f.data))
	}
}

func (f *resumeFixture) pendingUploads(t *testing.T) int {
	t.Helper()
	out, err := f.direct.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String(f.bucket)})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Uploads)
}

// A resumed upload sends only the parts its checkpoint lacks: the bytes
// that reach the gateway are the rest of the file, not all of it.
func TestResumableUploadReusesCompletedParts(t *testing.T) {
	f := newResumeFixture(t, 23<<20, 21, 2) // parts of 5, 5, 5, 5, 3 MiB
	listPartsPage = 1                       // the resume reads ListParts across pages
	t.Cleanup(func() { listPartsPage = 0 })
	const key = "objects/resume/big.bin"
	cp := f.interrupt(t, key, 2)
	if n := f.pendingUploads(t); n != 1 {
		t.Fatalf("%d pending uploads after the interruption, want 1", n)
	}
	var resumedBytes int64
	for _, p := range cp.Parts {
		resumedBytes += p.Length
	}

	f.proxy.Reset()
	var last objects.Progress
	in, err := f.s.PutPathResumable(t.Context(), key, f.path, f.sess, objects.PutOptions{
		ContentType: "application/x-test",
		Progress:    func(p objects.Progress) { last = p },
	})
	if err != nil {
		t.Fatalf("resumed PutPathResumable: %v", err)
	}
	sent := f.proxy.Sent()
	rest := int64(len(f.data)) - resumedBytes
	t.Logf("resumed %d parts (%d bytes); sent %d bytes for the remaining %d", len(cp.Parts), resumedBytes, sent, rest)
	// The last write may not be counted yet when the response is back.
	if sent < rest-1<<20 || sent > rest+256<<10 {
		t.Errorf("the resumed upload sent %d bytes, want the %d missing ones plus requests", sent, rest)
	}
	if last.ResumedParts != len(cp.Parts) || last.Done != int64(len(f.data)) || last.Total != int64(len(f.data)) {
		t.Errorf("last progress %+v, want %d resumed parts and every byte done", last, len(cp.Parts))
	}
	if in.Key != key || in.Size != int64(len(f.data)) || in.SHA256 != hexSHA(f.data) {
		t.Fatalf("Info %+v", in)
	}
	f.wantContent(t, key)
	if ct := aws.ToString(head(t, f.direct, f.bucket, key).ContentType); ct != "application/x-test" {
		t.Errorf("content type %q", ct)
	}
	wantNoUploads(t, f.direct, f.bucket)
	done, err := f.sess.Load()
	if err != nil || !done.Completed || len(done.Parts) != 5 {
		t.Fatalf("checkpoint after the upload: %+v, %v; want completed with 5 parts", done, err)
	}

	// Once more: the completed upload is found by a HEAD, nothing is sent.
	f.proxy.Reset()
	if in, err := f.s.PutPathResumable(t.Context(), key, f.path, f.sess, objects.PutOptions{}); err != nil || in.SHA256 != hexSHA(f.data) {
		t.Fatalf("PutPathResumable of a completed upload: %+v, %v", in, err)
	}
	if sent := f.proxy.Sent(); sent > 16<<10 {
		t.Errorf("PutPathResumable of a completed upload sent %d bytes", sent)
	}
}

// A file that changed since its upload started is refused before any of
// it is uploaded again, and never becomes an object.
func TestResumableUploadRejectsChangedSource(t *testing.T) {
	f := newResumeFixture(t, 12<<20, 22, 1) // parts of 5, 5, 2 MiB
	const key = "objects/changed/big.bin"
	f.interrupt(t, key, 1)
	fi, err := os.Stat(f.path)
	if err != nil {
		t.Fatal(err)
	}
	mtime := fi.ModTime()
	rewrite := func(data []byte) {
		t.Helper()
		if err := os.WriteFile(f.path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(f.path, time.Time{}, mtime); err != nil {
			t.Fatal(err)
		}
	}
	flipped := func(at int) []byte {
		b := bytes.Clone(f.data)
		b[at] ^= 0xff
		return b
	}

	for _, tc := range []struct {
		name     string
		data     []byte
		want     string
		maxBytes int64 // sent to the gateway
	}{
		// The file's identity differs: refused before any request.
		{"size", append(bytes.Clone(f.data), "more"...), "size changed", 0},
		// Same size and mtime, a finished part differs: refused after
		// ListParts, before any part is sent.
		{"finished part", flipped(100), "part 1 changed", 16 << 10},
		// Same size and mtime, a part still to send differs: the whole
		// file no longer has its SHA-256, so nothing is completed.
		{"pending part", flipped(11 << 20), "SHA-256", int64(len(f.data))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rewrite(tc.data)
			f.proxy.Reset()
			_, err := f.s.PutPathResumable(t.Context(), key, f.path, f.sess, objects.PutOptions{})
			if !errors.Is(err, checkpoint.ErrSourceChanged) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("PutPathResumable of a changed file = %v, want checkpoint.ErrSourceChanged (%s)", err, tc.want)
			}
			if sent := f.proxy.Sent(); sent > tc.maxBytes {
				t.Errorf("sent %d bytes, want at most %d", sent, tc.maxBytes)
			}
			f.wantNoObject(t, key)
		})
	}
	if cp, err := f.sess.Load(); err != nil || cp.Completed {
		t.Fatalf("checkpoint: %v, %v; want it kept, not completed", cp, err)
	}
}

// The parts on S3 must be the checkpoint's exactly; parts S3 has but the
// checkpoint lacks are sent again.
func TestResumableUploadRejectsPartMismatch(t *testing.T) {
	f := newResumeFixture(t, 12<<20, 23, 1)
	const key = "objects/mismatch/big.bin"
	cp := f.interrupt(t, key, 2)

	tampered := *cp
	tampered.Parts = append([]checkpoint.Part(nil), cp.Parts...)
	tampered.Parts[0].ETag = `"0123456789abcdef0123456789abcdef"`
	if err := f.sess.Save(&tampered); err != nil {
		t.Fatal(err)
	}
	f.proxy.Reset()
	_, err := f.s.PutPathResumable(t.Context(), key, f.path, f.sess, objects.PutOptions{})
	if !errors.Is(err, ErrPartMismatch) || !strings.Contains(err.Error(), "part 1 has another ETag") {
		t.Fatalf("PutPathResumable with a tampered ETag = %v, want ErrPartMismatch", err)
	}
	if sent := f.proxy.Sent(); sent > 16<<10 {
		t.Errorf("sent %d bytes, want no part", sent)
	}
	f.wantNoObject(t, key)

	// A checkpoint that lost its last part (as when the process died
	// between the part's upload and its Save) resumes: the part is sent again.
	forgot := *cp
	forgot.Parts = cp.Parts[:len(cp.Parts)-1]
	if err := f.sess.Save(&forgot); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.PutPathResumable(t.Context(), key, f.path, f.sess, objects.PutOptions{}); err != nil {
		t.Fatalf("PutPathResumable with a part S3 has and the checkpoint lacks: %v", err)
	}
	f.wantContent(t, key)
	wantNoUploads(t, f.direct, f.bucket)
}

// A crash after CompleteMultipartUpload but before the checkpoint said so:
// the upload is gone, and the object at its key is verified by its
// SHA-256 and adopted, without uploading anything.
func TestResumableUploadAdoptsCompletedObject(t *testing.T) {
	f := newResumeFixture(t, 12<<20, 24, 2)
	const key = "objects/adopt/big.bin"
	before := f.interrupt(t, key, 3) // every part recorded, not completed
	in, err := f.s.PutPathResumable(t.Context(), key, f.path, f.sess, objects.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.sess.Save(before); err != nil { // the checkpoint as of the crash
		t.Fatal(err)
	}
	f.proxy.Reset()
	again, err := f.s.PutPathResumable(t.Context(), key, f.path, f.sess, objects.PutOptions{})
	if err != nil {
		t.Fatalf("PutPathResumable after Complete without its checkpoint: %v", err)
	}
	if again.SHA256 != in.SHA256 || again.Size != in.Size || again.ETag != in.ETag {
		t.Errorf("adopted %+v, uploaded %+v", again, in)
	}
	if sent := f.proxy.Sent(); sent > 16<<10 {
		t.Errorf("adopting sent %d bytes, want no upload", sent)
	}
	if cp, err := f.sess.Load(); err != nil || !cp.Completed {
		t.Fatalf("checkpoint after adopting: %+v, %v; want completed", cp, err)
	}

	// Complete's own ambiguous answer: the upload is gone (completed
	// behind our back) when Complete is sent; the object is adopted.
	const key2 = "objects/adopt/second.bin"
	f2 := newResumeFixture(t, 12<<20, 25, 2)
	cp := f2.interrupt(t, key2, 3)
	parts := make([]part, len(cp.Parts))
	for i, p := range cp.Parts {
		parts[i] = part{Number: p.Number, Size: p.Length, ETag: p.ETag, Checksum: p.ChecksumSHA256}
	}
	if _, err := f2.s.completeMultipart(t.Context(), cp.Binding.Key, cp.Binding.UploadID, parts, true); err != nil {
		t.Fatal(err)
	}
	r := &resumable{s: f2.s, sess: f2.sess, cp: cp, tr: newTracker(nil, cp.Source.Size)}
	got, err := r.complete(t.Context())
	if err != nil || got.SHA256 != hexSHA(f2.data) {
		t.Fatalf("complete of a completed upload: %+v, %v; want it adopted", got, err)
	}

	// An object at the key that is not the file is not adopted.
	if err := f2.sess.Save(cp); err != nil { // not completed again
		t.Fatal(err)
	}
	if _, err := f2.s.Put(t.Context(), key2, strings.NewReader("something else"), objects.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f2.s.PutPathResumable(t.Context(), key2, f2.path, f2.sess, objects.PutOptions{}); !errors.Is(err, ErrObjectMismatch) {
		t.Fatalf("PutPathResumable over another object = %v, want ErrObjectMismatch", err)
	}
}

// `lake uploads cancel`: Cancel aborts the pending upload, the caller
// removes the checkpoint; a second Cancel succeeds since no object exists.
func TestCancelResumableUploadAbortsAndRemovesCheckpoint(t *testing.T) {
	f := newResumeFixture(t, 12<<20, 26, 1)
	const key = "objects/cancel/big.bin"
	f.interrupt(t, key, 1)
	if n := f.pendingUploads(t); n != 1 {
		t.Fatalf("%d pending uploads, want 1", n)
	}

	// What `lake uploads cancel PATH` does: lock, load, cancel, remove.
	f.sess.Close()
	sess := f.open(t)
	cp, err := sess.Load()
	if err != nil {
		t.Fatal(err)
	}
	other, _, _ := newStore(t, func(c *Config) { c.Prefix = "elsewhere" })
	if err := other.Cancel(t.Context(), cp); !errors.Is(err, checkpoint.ErrBindingMismatch) {
		t.Fatalf("Cancel on another stage = %v, want ErrBindingMismatch", err)
	}
	if err := f.s.Cancel(t.Context(), cp); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	wantNoUploads(t, f.direct, f.bucket)
	f.wantNoObject(t, key)

	// A resume of the cancelled upload says what to do.
	_, err = f.s.PutPathResumable(t.Context(), key, f.path, sess, objects.PutOptions{})
	if !errors.Is(err, ErrUploadGone) || !strings.Contains(err.Error(), "lake uploads cancel") {
		t.Fatalf("PutPathResumable of a cancelled upload = %v, want ErrUploadGone", err)
	}
	if err := sess.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := f.s.Cancel(t.Context(), cp); err != nil {
		t.Fatalf("Cancel again: %v, want success (no upload, no object)", err)
	}

	// With the checkpoint gone the file uploads afresh; cancelling the
	// completed upload then fails: its object exists.
	if _, err := f.s.PutPathResumable(t.Context(), key, f.path, sess, objects.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	f.wantContent(t, key)
	done, err := sess.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.s.Cancel(t.Context(), done); !errors.Is(err, ErrUploadCompleted) {
		t.Fatalf("Cancel of a completed upload = %v, want ErrUploadCompleted", err)
	}
}

// A file changed after it was hashed (same size, other bytes) is caught by
// S3 checking each part against the sum hashed at the start: the upload
// fails as a changed source and no object appears.
func TestFileChangedAfterHashingIsRefused(t *testing.T) {
	f := newResumeFixture(t, 3*MinPartSize+1000, 7, 2)
	afterHash = func(path string) {
		b := append([]byte(nil), f.data...)
		b[len(b)/2] ^= 0xff // a byte of part 2
		fi, err := os.Stat(path)
		if err != nil {
			t.Error(err)
			return
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Error(err)
		}
		os.Chtimes(path, fi.ModTime(), fi.ModTime())
	}
	t.Cleanup(func() { afterHash = nil })
	key := "objects/changed/big.bin"
	_, err := f.s.PutPathResumable(context.Background(), key, f.path, f.sess, objects.PutOptions{})
	if !errors.Is(err, checkpoint.ErrSourceChanged) {
		t.Fatalf("PutPathResumable of a file changed after hashing: %v, want ErrSourceChanged", err)
	}
	f.wantNoObject(t, key)
}
