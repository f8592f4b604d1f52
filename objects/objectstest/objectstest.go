package objectstest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/checkpoint"
	"github.com/lakedata/lake/wire"
)

// Run runs the conformance suite against the backend built by newStore,
// which must return a fresh, empty store for each call; each subtest gets its
// own. newStore should register its own cleanup with t.
func Run(t *testing.T, newStore func(t *testing.T) objects.Store) {
	RunWith(t, newStore, Options{})
}

// Options are the backend-specific parts of the suite.
type Options struct {
	// PlantNonRegular, when set, puts an entry of the given kind at key in
	// s behind the store's back, the way someone with access to its
	// storage could (see NonRegular for target). It may create the
	// directories on the way, and may t.Skip a kind the backend's storage
	// cannot hold. Backends without such entries (S3) leave it nil, and
	// the NonRegular test is skipped.
	PlantNonRegular func(t *testing.T, s objects.Store, kind NonRegular, key, target string)

	// ResumableSize is the size of the files the resumable tests upload:
	// large enough that the backend's PutPathResumable takes more than
	// one request, so it can be interrupted and resumed (S3: more than
	// one part). Zero means 2 MiB + 7 bytes.
	ResumableSize int
}

// NonRegular is a kind of entry that is not an object: Stat and Open of
// its key must fail with objects.ErrNotRegular, List must not report it,
// and whatever it points at must stay unread and unchanged.
type NonRegular int

const (
	// LinkToKey: a symbolic link at key to the object at target, a key of
	// the same store.
	LinkToKey NonRegular = iota
	// LinkOutside: a symbolic link at key to target, an absolute path of a
	// file outside the store.
	LinkOutside
	// LinkedDir: key's parent directory is a symbolic link to target's
	// parent directory; both keys have the same last segment, so key
	// leads to target's object.
	LinkedDir
	// NamedPipe: a FIFO at key; target is empty.
	NamedPipe
)

func (k NonRegular) String() string {
	switch k {
	case LinkToKey:
		return "LinkToKey"
	case LinkOutside:
		return "LinkOutside"
	case LinkedDir:
		return "LinkedDir"
	case NamedPipe:
		return "NamedPipe"
	}
	return fmt.Sprintf("NonRegular(%d)", int(k))
}

// RunWith is Run with backend-specific options.
func RunWith(t *testing.T, newStore func(t *testing.T) objects.Store, o Options) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s objects.Store)
	}{
		{"PutOpen", testPutOpen},
		{"PutEmpty", testPutEmpty},
		{"PutReplaces", testPutReplaces},
		{"PutCancelled", testPutCancelled},
		{"PutReaderError", testPutReaderError},
		{"PutPath", testPutPath},
		{"PutPathSmall", testPutPathSmall},
		{"Resumable", resumable(testResumable)},
		{"ResumableResume", resumable(func(t *testing.T, s objects.Store, r objects.Resumer) {
			testResumableResume(t, s, r, o.resumableSize())
		})},
		{"ResumableUploadsCancel", resumable(func(t *testing.T, s objects.Store, r objects.Resumer) {
			testResumableUploadsCancel(t, s, r, o.resumableSize())
		})},
		{"Close", testClose},
		{"OpenRange", testOpenRange},
		{"NotFound", testNotFound},
		{"PutIfAbsent", testPutIfAbsent},
		{"PutIfAbsentRace", testPutIfAbsentRace},
		{"List", testList},
		{"Delete", testDelete},
		{"InvalidKeys", testInvalidKeys},
		{"Large", testLarge},
		{"ConcurrentPuts", testConcurrentPuts},
		{"NonRegular", func(t *testing.T, s objects.Store) { testNonRegular(t, s, o.PlantNonRegular) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

func (o Options) resumableSize() int {
	if o.ResumableSize > 0 {
		return o.ResumableSize
	}
	return 2<<20 + 7
}

// randomBytes is deterministic so a failure reproduces.
func randomBytes(n int, seed uint64) []byte {
	var s [32]byte
	s[0] = byte(seed)
	s[1] = byte(seed >> 8)
	b := make([]byte, n)
	rand.NewChaCha8(s).Read(b)
	return b
}

func sha(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func put(t *testing.T, s objects.Store, key string, data []byte) objects.Info {
	t.Helper()
	in, err := s.Put(t.Context(), key, bytes.NewReader(data), objects.PutOptions{})
	if err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
	return in
}

func mustRead(t *testing.T, s objects.Store, key string) []byte {
	t.Helper()
	b, err := objects.ReadAll(t.Context(), s, key)
	if err != nil {
		t.Fatalf("ReadAll(%q): %v", key, err)
	}
	return b
}

func wantContent(t *testing.T, s objects.Store, key string, want []byte) {
	t.Helper()
	if got := mustRead(t, s, key); !bytes.Equal(got, want) {
		t.Fatalf("%q holds %d bytes (sha %.12s), want %d bytes (sha %.12s)", key, len(got), sha(got), len(want), sha(want))
	}
}

func wantNotFound(t *testing.T, s objects.Store, key string) {
	t.Helper()
	if in, err := s.Stat(t.Context(), key); !errors.Is(err, objects.ErrNotFound) {
		t.Fatalf("Stat(%q) = %+v, %v; want ErrNotFound", key, in, err)
	}
}

// checkInfo checks what Put and PutPath promise.
func checkInfo(t *testing.T, got objects.Info, key string, data []byte) {
	t.Helper()
	if got.Key != key || got.Size != int64(len(data)) || got.SHA256 != sha(data) {
		t.Fatalf("Info = {Key %q Size %d SHA256 %s}, want {%q %d %s}", got.Key, got.Size, got.SHA256, key, len(data), sha(data))
	}
}

func testPutOpen(t *testing.T, s objects.Store) {
	const key = "a/b/c.txt"
	data := []byte("hello, stage\n")
	in := put(t, s, key, data)
	checkInfo(t, in, key, data)
	wantContent(t, s, key, data)

	st, err := s.Stat(t.Context(), key)
	if err != nil {
		t.Fatalf("Stat: %v", err)
	}
	if st.Key != key || st.Size != int64(len(data)) || st.ModTime.IsZero() {
		t.Fatalf("Stat = %+v", st)
	}
	if st.SHA256 != "" && st.SHA256 != in.SHA256 {
		t.Fatalf("Stat SHA256 %s, Put said %s", st.SHA256, in.SHA256)
	}
	// An ETag is optional, but when both report one it names the same object.
	if st.ETag != "" && in.ETag != "" && st.ETag != in.ETag {
		t.Fatalf("Stat ETag %q, Put ETag %q", st.ETag, in.ETag)
	}
}

func testPutEmpty(t *testing.T, s objects.Store) {
	in := put(t, s, "empty", nil)
	checkInfo(t, in, "empty", nil)
	wantContent(t, s, "empty", nil)
	st, err := s.Stat(t.Context(), "empty")
	if err != nil || st.Size != 0 {
		t.Fatalf("Stat = %+v, %v; want size 0", st, err)
	}
}

func testPutReplaces(t *testing.T, s objects.Store) {
	put(t, s, "k", []byte("first version, the longer one"))
	v2 := []byte("second")
	checkInfo(t, put(t, s, "k", v2), "k", v2)
	wantContent(t, s, "k", v2)
	if st, err := s.Stat(t.Context(), "k"); err != nil || st.Size != int64(len(v2)) {
		t.Fatalf("Stat = %+v, %v; want size %d", st, err, len(v2))
	}
}

// cancelReader cancels its Put's context once after bytes have been read,
// then keeps yielding data, so only the store's own ctx check can stop it.
type cancelReader struct {
	cancel       context.CancelFunc
	after, total int
	n            int
}

func (r *cancelReader) Read(p []byte) (int, error) {
	if r.n >= r.total {
		return 0, io.EOF
	}
	if r.n >= r.after {
		r.cancel()
	}
	k := min(len(p), 64<<10, r.total-r.n)
	for i := range p[:k] {
		p[i] = 'x'
	}
	r.n += k
	return k, nil
}

func testPutCancelled(t *testing.T, s objects.Store) {
	t.Run("midway", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		r := &cancelReader{cancel: cancel, after: 256 << 10, total: 4 << 20}
		_, err := s.Put(ctx, "cancelled", r, objects.PutOptions{})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Put = %v, want context.Canceled", err)
		}
		wantNotFound(t, s, "cancelled")
	})
	t.Run("before", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := s.Put(ctx, "cancelled", bytes.NewReader([]byte("x")), objects.PutOptions{})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Put = %v, want context.Canceled", err)
		}
		wantNotFound(t, s, "cancelled")
	})
	t.Run("replacing", func(t *testing.T) {
		old := []byte("old content")
		put(t, s, "kept", old)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		r := &cancelReader{cancel: cancel, after: 128 << 10, total: 2 << 20}
		if _, err := s.Put(ctx, "kept", r, objects.PutOptions{}); !errors.Is(err, context.Canceled) {
			t.Fatalf("Put = %v, want context.Canceled", err)
		}
		wantContent(t, s, "kept", old)
	})
}

var errBoom = errors.New("objectstest: source failed")

// failReader yields n bytes, then errBoom.
type failReader struct{ n int }

func (r *failReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, errBoom
	}
	k := min(len(p), r.n)
	clear(p[:k])
	r.n -= k
	return k, nil
}

func testPutReaderError(t *testing.T, s objects.Store) {
	_, err := s.Put(t.Context(), "failed", &failReader{n: 100 << 10}, objects.PutOptions{})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Put = %v, want the reader's error", err)
	}
	wantNotFound(t, s, "failed")

	old := []byte("survivor")
	put(t, s, "kept", old)
	if _, err := s.Put(t.Context(), "kept", &failReader{n: 10}, objects.PutOptions{}); !errors.Is(err, errBoom) {
		t.Fatalf("Put = %v, want the reader's error", err)
	}
	wantContent(t, s, "kept", old)
}

func testPutPath(t *testing.T, s objects.Store) {
	dir := t.TempDir()
	src := filepath.Join(dir, "upload.bin")
	data := randomBytes(300<<10+7, 1)
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	const key = "objects/2026/01/x/upload.bin"
	var pr progressRecorder
	in, err := s.PutPath(t.Context(), key, src, objects.PutOptions{ContentType: "application/octet-stream", Progress: pr.record})
	if err != nil {
		t.Fatalf("PutPath: %v", err)
	}
	checkInfo(t, in, key, data)
	wantContent(t, s, key, data)
	pr.check(t, int64(len(data)))

	if _, err := s.PutPath(t.Context(), "other", filepath.Join(dir, "missing"), objects.PutOptions{}); err == nil {
		t.Fatal("PutPath of a missing file succeeded")
	}
	wantNotFound(t, s, "other")
}

// Small files, the bulk of a directory put: PutPath, and PutPathResumable
// where the backend has it, store the bytes under a key of the minted
// form, with the size and SHA-256 in the Info and an ETag that, when both
// report one, Stat agrees with. An empty file too.
func testPutPathSmall(t *testing.T, s objects.Store) {
	dir := t.TempDir()
	for i, size := range []int{64 << 10, 0, 1} {
		src := filepath.Join(dir, fmt.Sprintf("img%d.jpg", i))
		data := randomBytes(size, uint64(20+i))
		if err := os.WriteFile(src, data, 0o644); err != nil {
			t.Fatal(err)
		}
		check := func(how, key string, in objects.Info) {
			t.Helper()
			checkInfo(t, in, key, data)
			wantContent(t, s, key, data)
			st, err := s.Stat(t.Context(), key)
			if err != nil {
				t.Fatalf("%s: Stat: %v", how, err)
			}
			if st.Size != int64(size) || st.ETag != "" && in.ETag != "" && st.ETag != in.ETag {
				t.Fatalf("%s of %d bytes: Stat = %+v, the put said %+v", how, size, st, in)
			}
		}
		key := objects.NewObjectKey(filepath.Base(src), time.Now())
		in, err := s.PutPath(t.Context(), key, src, objects.PutOptions{ContentType: "image/jpeg"})
		if err != nil {
			t.Fatalf("PutPath of %d bytes: %v", size, err)
		}
		check("PutPath", key, in)

		r, ok := s.(objects.Resumer)
		if !ok {
			continue
		}
		sess := openSession(t, filepath.Join(dir, "checkpoints"), fmt.Sprintf("img%d.json", i))
		key = objects.NewObjectKey(filepath.Base(src), time.Now())
		if in, err = r.PutPathResumable(t.Context(), key, src, sess, objects.PutOptions{ContentType: "image/jpeg"}); err != nil {
			t.Fatalf("PutPathResumable of %d bytes: %v", size, err)
		}
		check("PutPathResumable", key, in)
		if err := sess.Remove(); err != nil {
			t.Fatal(err)
		}
	}
}

// resumable runs fn only against a backend that offers objects.Resumer.
func resumable(fn func(t *testing.T, s objects.Store, r objects.Resumer)) func(t *testing.T, s objects.Store) {
	return func(t *testing.T, s objects.Store) {
		r, ok := s.(objects.Resumer)
		if !ok {
			t.Skip("the backend has no resumable uploads (objects.Resumer)")
		}
		fn(t, s, r)
	}
}

// openSession opens a checkpoint session under dir, closed at the end of
// the test.
func openSession(t *testing.T, dir, name string) *checkpoint.Session {
	t.Helper()
	sess, err := checkpoint.Open(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// A resumable upload that runs through: the object, a checkpoint left for
// the caller, and the same call again returns the same object.
func testResumable(t *testing.T, s objects.Store, r objects.Resumer) {
	dir := t.TempDir()
	src := filepath.Join(dir, "upload.bin")
	data := randomBytes(300<<10+7, 1)
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sess := openSession(t, filepath.Join(dir, "checkpoints"), "upload.json")
	const key = "objects/2026/01/y/upload.bin"
	var pr progressRecorder
	in, err := r.PutPathResumable(t.Context(), key, src, sess, objects.PutOptions{ContentType: "application/octet-stream", Progress: pr.record})
	if err != nil {
		t.Fatalf("PutPathResumable: %v", err)
	}
	checkInfo(t, in, key, data)
	wantContent(t, s, key, data)
	pr.check(t, int64(len(data)))
	// The same call again, before the caller removes the checkpoint: the
	// same object, the upload found completed.
	in, err = r.PutPathResumable(t.Context(), key, src, sess, objects.PutOptions{ContentType: "application/octet-stream"})
	if err != nil {
		t.Fatalf("PutPathResumable again: %v", err)
	}
	checkInfo(t, in, key, data)
	wantContent(t, s, key, data)
	if err := sess.Remove(); err != nil {
		t.Fatal(err)
	}

	if _, err := r.PutPathResumable(t.Context(), "other", filepath.Join(dir, "missing"), sess, objects.PutOptions{}); err == nil {
		t.Fatal("PutPathResumable of a missing file succeeded")
	}
	wantNotFound(t, s, "other")
	if _, err := r.PutPathResumable(t.Context(), "bad/../key", src, sess, objects.PutOptions{}); !errors.Is(err, wire.ErrInvalidKey) {
		t.Fatalf("PutPathResumable of an invalid key = %v, want wire.ErrInvalidKey", err)
	}
}

// A resumable upload cancelled from its progress report leaves nothing at
// the key; the same call with the same checkpoint session then completes
// it.
func testResumableResume(t *testing.T, s objects.Store, r objects.Resumer, size int) {
	dir := t.TempDir()
	src := filepath.Join(dir, "resume.bin")
	data := randomBytes(size, 7)
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sess := openSession(t, filepath.Join(dir, "checkpoints"), "resume.json")
	const key = "objects/2026/01/z/resume.bin"

	interrupt(t, r, key, src, sess)
	wantNotFound(t, s, key)

	var pr progressRecorder
	in, err := r.PutPathResumable(t.Context(), key, src, sess, objects.PutOptions{Progress: pr.record})
	if err != nil {
		t.Fatalf("PutPathResumable after the cancelled one: %v", err)
	}
	checkInfo(t, in, key, data)
	wantContent(t, s, key, data)
	pr.check(t, int64(len(data)))
	if err := sess.Remove(); err != nil {
		t.Fatal(err)
	}
}

// interrupt runs a resumable upload and cancels it from its first
// progress report.
func interrupt(t *testing.T, r objects.Resumer, key, src string, sess *checkpoint.Session) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, err := r.PutPathResumable(ctx, key, src, sess, objects.PutOptions{Progress: func(objects.Progress) { cancel() }})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("PutPathResumable cancelled from its progress = %v, want context.Canceled", err)
	}
}

// Uploads lists an interrupted upload of this stage, and only those;
// Cancel gives it up, after which the same upload starts over.
func testResumableUploadsCancel(t *testing.T, s objects.Store, r objects.Resumer, size int) {
	dir := t.TempDir()
	cpDir := filepath.Join(dir, "checkpoints")
	src := filepath.Join(dir, "cancel.bin")
	data := randomBytes(size, 9)
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	const key = "objects/2026/01/c/cancel.bin"

	if got, err := r.Uploads(t.Context(), filepath.Join(dir, "missing")); err != nil || len(got) != 0 {
		t.Fatalf("Uploads of a missing dir = %+v, %v; want none", got, err)
	}
	sess, err := checkpoint.Open(filepath.Join(cpDir, "cancel.json"))
	if err != nil {
		t.Fatal(err)
	}
	interrupt(t, r, key, src, sess)
	cp, err := sess.Load()
	if err != nil {
		t.Fatalf("checkpoint of the interrupted upload: %v", err)
	}
	uploads := func() []checkpoint.Entry {
		t.Helper()
		got, err := r.Uploads(t.Context(), cpDir)
		if err != nil {
			t.Fatalf("Uploads: %v", err)
		}
		return got
	}
	if got := uploads(); len(got) != 1 || !got[0].Locked || got[0].Checkpoint == nil || got[0].Checkpoint.Binding != cp.Binding {
		t.Fatalf("Uploads while the session is open = %+v, want the upload, locked", got)
	}
	if err := sess.Close(); err != nil {
		t.Fatal(err)
	}

	// A checkpoint of another stage, and one that cannot be read, are not
	// this stage's uploads; Cancel refuses the former.
	other := *cp
	other.Binding.Bucket += "-other"
	otherSess := openSession(t, cpDir, "other.json")
	if err := otherSess.Save(&other); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cpDir, "corrupt.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Cancel(t.Context(), &other); !errors.Is(err, checkpoint.ErrBindingMismatch) {
		t.Fatalf("Cancel of another stage's upload = %v, want checkpoint.ErrBindingMismatch", err)
	}
	got := uploads()
	if len(got) != 1 || got[0].Locked || got[0].Checkpoint == nil || got[0].Checkpoint.Binding != cp.Binding {
		t.Fatalf("Uploads = %+v, want only the interrupted upload of this stage, not locked", got)
	}

	// What `lake uploads cancel` does: lock, load, cancel, remove.
	sess = openSession(t, cpDir, "cancel.json")
	if err := r.Cancel(t.Context(), cp); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	if err := r.Cancel(t.Context(), cp); err != nil {
		t.Fatalf("Cancel of a cancelled upload: %v", err)
	}
	if err := sess.Remove(); err != nil {
		t.Fatal(err)
	}
	wantNotFound(t, s, key)
	if got := uploads(); len(got) != 0 {
		t.Fatalf("Uploads after Cancel = %+v, want none", got)
	}

	// The same put starts over and completes; its upload can no longer
	// be cancelled.
	var pr progressRecorder
	in, err := r.PutPathResumable(t.Context(), key, src, sess, objects.PutOptions{Progress: pr.record})
	if err != nil {
		t.Fatalf("PutPathResumable after Cancel: %v", err)
	}
	checkInfo(t, in, key, data)
	wantContent(t, s, key, data)
	pr.check(t, int64(len(data)))
	done, err := sess.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Cancel(t.Context(), done); err == nil {
		t.Fatal("Cancel of a completed upload succeeded")
	}
	wantContent(t, s, key, data)
}

// Close releases the store; a second Close is not an error.
func testClose(t *testing.T, s objects.Store) {
	put(t, s, "k", []byte("v"))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// progressRecorder checks the reports of one upload.
type progressRecorder struct {
	mu    sync.Mutex
	calls []objects.Progress
}

func (r *progressRecorder) record(p objects.Progress) {
	r.mu.Lock()
	r.calls = append(r.calls, p)
	r.mu.Unlock()
}

// check requires at least one report, Done never decreasing, Total the
// file's size, and a last report of every byte.
func (r *progressRecorder) check(t *testing.T, size int64) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.calls) == 0 {
		t.Fatal("no progress reported")
	}
	var done int64
	for i, p := range r.calls {
		if p.Done < done || p.Total != size {
			t.Fatalf("progress report %d: %+v after Done %d, want Total %d", i, p, done, size)
		}
		done = p.Done
	}
	if done != size {
		t.Fatalf("last progress report says %d bytes done, want %d", done, size)
	}
}

func testOpenRange(t *testing.T, s objects.Store) {
	data := randomBytes(1000, 2)
	put(t, s, "r", data)
	for _, tc := range []struct {
		off, length int64
		want        []byte
	}{
		{0, -1, data},
		{100, 200, data[100:300]},
		{100, -1, data[100:]},
		{900, 500, data[900:]},
		{999, 1, data[999:]},
		{0, 0, nil},
		{1000, -1, nil},
		{1000, 10, nil},
	} {
		rc, err := s.Open(t.Context(), "r", tc.off, tc.length)
		if err != nil {
			t.Fatalf("Open(%d, %d): %v", tc.off, tc.length, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("Open(%d, %d): read: %v", tc.off, tc.length, err)
		}
		if !bytes.Equal(got, tc.want) {
			t.Fatalf("Open(%d, %d) read %d bytes, want %d", tc.off, tc.length, len(got), len(tc.want))
		}
	}
	for _, tc := range []struct{ off, length int64 }{{1001, -1}, {1001, 5}, {1 << 40, 1}} {
		rc, err := s.Open(t.Context(), "r", tc.off, tc.length)
		if err == nil {
			rc.Close()
		}
		if !errors.Is(err, objects.ErrInvalidRange) {
			t.Fatalf("Open(%d, %d) = %v, want ErrInvalidRange", tc.off, tc.length, err)
		}
	}
}

func testNotFound(t *testing.T, s objects.Store) {
	put(t, s, "dir/obj", []byte("x"))
	// "dir" is only a prefix and "dir/obj/deeper" would sit below an object:
	// neither is a key, whatever the backend's layout.
	for _, key := range []string{"missing", "no/such/key", "dir", "dir/obj/deeper"} {
		rc, err := s.Open(t.Context(), key, 0, -1)
		if err == nil {
			rc.Close()
		}
		if !errors.Is(err, objects.ErrNotFound) {
			t.Errorf("Open(%q) = %v, want ErrNotFound", key, err)
		}
		if _, err := s.Stat(t.Context(), key); !errors.Is(err, objects.ErrNotFound) {
			t.Errorf("Stat(%q) = %v, want ErrNotFound", key, err)
		}
	}
}

func testPutIfAbsent(t *testing.T, s objects.Store) {
	const key = "_lake/tables/t1/log/00000000000000000001.json"
	first := []byte(`{"version":1}`)
	if err := s.PutIfAbsent(t.Context(), key, first); err != nil {
		t.Fatalf("first PutIfAbsent: %v", err)
	}
	if err := s.PutIfAbsent(t.Context(), key, []byte(`{"version":1,"other":true}`)); !errors.Is(err, objects.ErrExists) {
		t.Fatalf("second PutIfAbsent = %v, want ErrExists", err)
	}
	wantContent(t, s, key, first)
	if st, err := s.Stat(t.Context(), key); err != nil || st.Size != int64(len(first)) {
		t.Fatalf("Stat = %+v, %v", st, err)
	}

	put(t, s, "by-put", []byte("put"))
	if err := s.PutIfAbsent(t.Context(), "by-put", []byte("pia")); !errors.Is(err, objects.ErrExists) {
		t.Fatalf("PutIfAbsent over Put = %v, want ErrExists", err)
	}
	wantContent(t, s, "by-put", []byte("put"))

	if err := s.PutIfAbsent(t.Context(), "empty-record", nil); err != nil {
		t.Fatalf("PutIfAbsent of no bytes: %v", err)
	}
	wantContent(t, s, "empty-record", nil)
}

func testPutIfAbsentRace(t *testing.T, s objects.Store) {
	const key, n = "race/00000000000000000002.json", 16
	var (
		wins   atomic.Int32
		winner atomic.Int32
		wg     sync.WaitGroup
		start  = make(chan struct{})
		errs   = make([]error, n)
	)
	payload := func(i int) []byte {
		return fmt.Appendf(nil, "writer %02d %s", i, bytes.Repeat([]byte{'a' + byte(i)}, 100*i))
	}
	for i := range n {
		wg.Go(func() {
			<-start
			err := s.PutIfAbsent(t.Context(), key, payload(i))
			if err == nil {
				wins.Add(1)
				winner.Store(int32(i))
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	if w := wins.Load(); w != 1 {
		t.Fatalf("%d winners, want exactly 1 (errors: %v)", w, errs)
	}
	for i, err := range errs {
		if err != nil && !errors.Is(err, objects.ErrExists) {
			t.Errorf("writer %d: %v, want ErrExists", i, err)
		}
	}
	wantContent(t, s, key, payload(int(winner.Load())))
}

func listKeys(t *testing.T, s objects.Store, prefix string) []string {
	t.Helper()
	keys := []string{}
	for in, err := range s.List(t.Context(), prefix) {
		if err != nil {
			t.Fatalf("List(%q): %v", prefix, err)
		}
		if in.SHA256 != "" {
			t.Errorf("List(%q) gave SHA256 for %q", prefix, in.Key)
		}
		keys = append(keys, in.Key)
	}
	return keys
}

func testList(t *testing.T, s objects.Store) {
	// No key is also a directory of others: the local backend cannot hold
	// both "a/b" and "a/b/c".
	all := []string{"a.txt", "a/a", "a/b.txt", "a/b/c", "a/b/d/e", "a/bc", "b/x", "zz"}
	sizes := map[string]int{}
	for i, k := range slices.Backward(all) { // out of order on purpose
		data := bytes.Repeat([]byte{'x'}, i+1)
		if i%2 == 0 {
			if err := s.PutIfAbsent(t.Context(), k, data); err != nil {
				t.Fatal(err)
			}
		} else {
			put(t, s, k, data)
		}
		sizes[k] = len(data)
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", all},
		{"a", all[:6]},
		{"a/", all[1:6]},
		// byte order: '.' < '/' < 'c', unlike a directory walk.
		{"a/b", []string{"a/b.txt", "a/b/c", "a/b/d/e", "a/bc"}},
		{"a/b/", []string{"a/b/c", "a/b/d/e"}},
		{"a/b/d/e", []string{"a/b/d/e"}},
		{"a/b/d/e/", []string{}},
		{"a/b/c/", []string{}},
		{"zz", []string{"zz"}},
		{"zzz", []string{}},
		{"nothing/here/", []string{}},
		{"/a", []string{}},
		{"a//", []string{}},
		{"../", []string{}},
		{"./a", []string{}},
	} {
		if got := listKeys(t, s, tc.prefix); !slices.Equal(got, tc.want) {
			t.Errorf("List(%q) = %q, want %q", tc.prefix, got, tc.want)
		}
	}
	for in, err := range s.List(t.Context(), "") {
		if err != nil {
			t.Fatal(err)
		}
		if in.Size != int64(sizes[in.Key]) || in.ModTime.IsZero() {
			t.Errorf("List: %+v, want size %d and a ModTime", in, sizes[in.Key])
		}
	}
	// Stopping early must be safe.
	n := 0
	for range s.List(t.Context(), "") {
		n++
		if n == 2 {
			break
		}
	}
}

func testDelete(t *testing.T, s objects.Store) {
	put(t, s, "d/e/f", []byte("1"))
	put(t, s, "d/e/g", []byte("2"))
	put(t, s, "d/x/y", []byte("3"))
	if err := s.Delete(t.Context(), "d/e/f"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	wantNotFound(t, s, "d/e/f")
	wantContent(t, s, "d/e/g", []byte("2"))
	if err := s.Delete(t.Context(), "d/e/f"); err != nil {
		t.Fatalf("Delete again: %v", err)
	}
	if err := s.Delete(t.Context(), "never/was"); err != nil {
		t.Fatalf("Delete of a missing key: %v", err)
	}
	// A prefix is not an object; deleting it must not touch what is below.
	if err := s.Delete(t.Context(), "d/x"); err != nil {
		t.Fatalf("Delete of a prefix: %v", err)
	}
	wantContent(t, s, "d/x/y", []byte("3"))

	for _, k := range []string{"d/e/g", "d/x/y"} {
		if err := s.Delete(t.Context(), k); err != nil {
			t.Fatal(err)
		}
	}
	if got := listKeys(t, s, ""); len(got) != 0 {
		t.Fatalf("after deleting everything, List = %q", got)
	}
	// The key's prefix may have gone with the last object; writing there
	// again must work.
	put(t, s, "d/e/f", []byte("again"))
	wantContent(t, s, "d/e/f", []byte("again"))
}

// InvalidKeys are keys every backend must refuse with wire.ErrInvalidKey.
var InvalidKeys = []string{
	"", "/abs", "a/../b", "../a", "a/..", "a//b", "a/", `a\b`, "a\x00b", "a\nb",
	"./a", "a/.", ".", "..", "\xffbad", strings.Repeat("k", wire.MaxKeyLen+1),
}

func testInvalidKeys(t *testing.T, s objects.Store) {
	ctx := t.Context()
	src := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(src, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, key := range InvalidKeys {
		check := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, wire.ErrInvalidKey) {
				t.Errorf("%s(%q) = %v, want wire.ErrInvalidKey", op, key, err)
			}
		}
		_, err := s.Put(ctx, key, bytes.NewReader([]byte("x")), objects.PutOptions{})
		check("Put", err)
		_, err = s.PutPath(ctx, key, src, objects.PutOptions{})
		check("PutPath", err)
		check("PutIfAbsent", s.PutIfAbsent(ctx, key, []byte("x")))
		rc, err := s.Open(ctx, key, 0, -1)
		if err == nil {
			rc.Close()
		}
		check("Open", err)
		_, err = s.Stat(ctx, key)
		check("Stat", err)
		check("Delete", s.Delete(ctx, key))
	}
	if got := listKeys(t, s, ""); len(got) != 0 {
		t.Fatalf("invalid keys left objects: %q", got)
	}
}

// chunkReader hands out data in odd-sized pieces, as a network would.
type chunkReader struct {
	data  []byte
	chunk int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.chunk)], r.data)
	r.data = r.data[n:]
	return n, nil
}

func testLarge(t *testing.T, s objects.Store) {
	data := randomBytes(8<<20+12345, 3)
	const key = "big/object.bin"
	in, err := s.Put(t.Context(), key, &chunkReader{data: data, chunk: 77777}, objects.PutOptions{})
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	checkInfo(t, in, key, data)
	wantContent(t, s, key, data)

	// A range across a 1 MiB boundary, where copy buffers and parts split.
	off, n := int64(1<<20-1000), int64(5000)
	rc, err := s.Open(t.Context(), key, off, n)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(got, data[off:off+n]) {
		t.Fatalf("ranged read: %d bytes, err %v; want %d matching bytes", len(got), err, n)
	}
}

func testConcurrentPuts(t *testing.T, s objects.Store) {
	const n = 16
	key := func(i int) string { return fmt.Sprintf("c/%02d/obj", i) }
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = s.Put(t.Context(), key(i), bytes.NewReader(randomBytes(10000+i, uint64(100+i))), objects.PutOptions{})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Put %d: %v", i, err)
		}
	}
	if got := listKeys(t, s, "c/"); len(got) != n {
		t.Fatalf("List(c/) = %d keys, want %d", len(got), n)
	}
	for i := range n {
		wantContent(t, s, key(i), randomBytes(10000+i, uint64(100+i)))
	}
}

// testNonRegular plants entries the store did not write, pointing at a
// catalog record of the store and at a file outside it, and checks that
// none of them passes for an object: a metadata node stats a FILE value's
// key before committing it, and a reader opens it.
func testNonRegular(t *testing.T, s objects.Store, plant func(*testing.T, objects.Store, NonRegular, string, string)) {
	if plant == nil {
		t.Skip("the backend holds only objects it wrote")
	}
	const catalog = "_lake/catalog/t.json"
	record := []byte(`{"table":"t","secret":"not an object"}`)
	if err := s.PutIfAbsent(t.Context(), catalog, record); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "outside.bin")
	secret := []byte("a file outside the store")
	if err := os.WriteFile(outside, secret, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		kind        NonRegular
		key, target string
	}{
		{LinkToKey, "objects/nr/link/t.json", catalog},
		{LinkOutside, "objects/nr/out/outside.bin", outside},
		{LinkedDir, "objects/nr/dir/t.json", catalog},
		{NamedPipe, "objects/nr/pipe/fifo", ""},
	} {
		t.Run(tc.kind.String(), func(t *testing.T) {
			plant(t, s, tc.kind, tc.key, tc.target)
			if in, err := s.Stat(t.Context(), tc.key); !errors.Is(err, objects.ErrNotRegular) {
				t.Errorf("Stat(%q) = %+v, %v; want ErrNotRegular", tc.key, in, err)
			}
			WantOpenRefused(t, s, tc.key, objects.ErrNotRegular)
			for _, prefix := range []string{"", "objects/", path.Dir(tc.key) + "/", tc.key} {
				for _, k := range listKeys(t, s, prefix) {
					if strings.HasPrefix(k, "objects/nr/") {
						t.Errorf("List(%q) reports %q", prefix, k)
					}
				}
			}
		})
	}
	// The store's own record is untouched and still its only key.
	wantContent(t, s, catalog, record)
	if got := listKeys(t, s, ""); !slices.Equal(got, []string{catalog}) {
		t.Errorf("List = %q, want only %q", got, catalog)
	}
	if got, err := os.ReadFile(outside); err != nil || !bytes.Equal(got, secret) {
		t.Errorf("the file outside the store: %q, %v", got, err)
	}
}

// WantOpenRefused requires s.Open(key) to fail with want, and quickly: a
// named pipe opened for reading would wait for a writer forever. Backend
// tests use it for the entries they plant themselves.
func WantOpenRefused(t *testing.T, s objects.Store, key string, want error) {
	t.Helper()
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		rc, err := s.Open(t.Context(), key, 0, -1)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer rc.Close()
		b, _ := io.ReadAll(rc)
		done <- result{data: b}
	}()
	select {
	case r := <-done:
		if r.err == nil {
			t.Errorf("Open(%q) served %d bytes %.40q, want %v", key, len(r.data), r.data, want)
		} else if !errors.Is(r.err, want) {
			t.Errorf("Open(%q) = %v, want %v", key, r.err, want)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("Open(%q) still blocked after 10s, want %v at once", key, want)
	}
}
