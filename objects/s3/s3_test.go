package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/lakedata/lake/internal/s3test"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/objectstest"
)

func TestMain(m *testing.M) { os.Exit(s3test.RunShared(m)) }

// newStore opens a store on a fresh bucket of the shared gateway, with
// credentials from the environment (the AWS default chain).
func newStore(t *testing.T, edit func(*Config)) (*Store, *s3test.Server, string) {
	t.Helper()
	srv := s3test.Shared(t)
	bucket := srv.NewBucket(t)
	srv.SetEnv(t)
	cfg := DefaultConfig()
	cfg.Bucket, cfg.Endpoint, cfg.PathStyle = bucket, srv.Endpoint, true
	if edit != nil {
		edit(&cfg)
	}
	s, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, srv, bucket
}

// The store offers resumable uploads, found by the capability's interface.
func TestResumer(t *testing.T) {
	var s objects.Store
	s, _, _ = newStore(t, nil)
	if _, ok := s.(objects.Resumer); !ok {
		t.Fatal("the S3 store is no objects.Resumer")
	}
}

// Close closes the connections the store opened, the one under an open
// reader included (versitygw keeps no idle ones: it answers with
// Connection: close), makes later requests fail without a retry, and may
// run twice.
func TestClose(t *testing.T) {
	s, _, _ := newStore(t, nil)
	data := randomBytes(1<<20, 3)
	if _, err := s.Put(t.Context(), "k", bytes.NewReader(data), objects.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	rc, err := s.Open(t.Context(), "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.ReadFull(rc, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if s.conns.count() == 0 {
		t.Fatal("no connection tracked under an open reader")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := s.conns.count(); n != 0 {
		t.Errorf("%d connections open after Close", n)
	}
	if rest, err := io.ReadAll(rc); err == nil {
		t.Errorf("the reader went on after Close: %d more bytes", len(rest))
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	start := time.Now()
	if _, err := s.Stat(t.Context(), "k"); !errors.Is(err, errClosed) {
		t.Errorf("Stat after Close = %v, want errClosed", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Stat after Close took %v: retried", d)
	}
}

// A file of one part or less is one PutObject, with nothing to resume, so
// the resumable tests upload two parts' worth.
func TestConformance(t *testing.T) {
	objectstest.RunWith(t, func(t *testing.T) objects.Store {
		s, _, _ := newStore(t, nil)
		return s
	}, objectstest.Options{ResumableSize: DefaultPartSize + 7})
}

// The same contract with a prefix, and parts small enough that the larger
// objects of the suite go multipart.
func TestConformancePrefixMultipart(t *testing.T) {
	objectstest.RunWith(t, func(t *testing.T) objects.Store {
		s, _, _ := newStore(t, func(c *Config) {
			c.Prefix = "stage/root"
			c.PartSize = MinPartSize
		})
		return s
	}, objectstest.Options{ResumableSize: MinPartSize + 7})
}

// randomBytes is deterministic so a failure reproduces.
func randomBytes(n int, seed byte) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{seed}).Read(b)
	return b
}

func hexSHA(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// chunkReader hands out data in odd-sized pieces and hides any WriterTo or
// Seeker, as a network stream would.
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

func head(t *testing.T, c *s3.Client, bucket, k string) *s3.HeadObjectOutput {
	t.Helper()
	out, err := c.HeadObject(t.Context(), &s3.HeadObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(k), ChecksumMode: types.ChecksumModeEnabled,
	})
	if err != nil {
		t.Fatalf("HeadObject(%s): %v", k, err)
	}
	return out
}

func wantNoUploads(t *testing.T, c *s3.Client, bucket string) {
	t.Helper()
	out, err := c.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatalf("ListMultipartUploads: %v", err)
	}
	for _, u := range out.Uploads {
		t.Errorf("pending multipart upload of %s (%s)", aws.ToString(u.Key), aws.ToString(u.UploadId))
	}
}

func TestMultipart(t *testing.T) {
	s, srv, bucket := newStore(t, func(c *Config) {
		c.PartSize = MinPartSize
		c.Concurrency = 2
	})
	c := srv.Client(t)
	ctx := t.Context()
	data := randomBytes(12<<20+12345, 1) // three parts: 5 MiB, 5 MiB, the rest
	src := filepath.Join(t.TempDir(), "src.bin")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name     string
		put      func(key string) (objects.Info, error)
		wantMeta bool
	}{
		// From a stream the sum is known only at the end: no metadata.
		{"Put", func(key string) (objects.Info, error) {
			return s.Put(ctx, key, &chunkReader{data: data, chunk: 100_003}, objects.PutOptions{ContentType: "video/mp4"})
		}, false},
		{"PutPath", func(key string) (objects.Info, error) {
			return s.PutPath(ctx, key, src, objects.PutOptions{ContentType: "video/mp4"})
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "objects/" + tc.name + "/src.bin"
			in, err := tc.put(key)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if in.Key != key || in.Size != int64(len(data)) || in.SHA256 != hexSHA(data) {
				t.Fatalf("Info = %+v, want size %d sha %s", in, len(data), hexSHA(data))
			}
			h := head(t, c, bucket, key)
			if !strings.HasSuffix(aws.ToString(h.ETag), `-3"`) || in.ETag != strings.Trim(aws.ToString(h.ETag), `"`) {
				t.Errorf("ETag: Put said %q, HEAD says %s; want a 3-part multipart ETag", in.ETag, aws.ToString(h.ETag))
			}
			if !strings.HasSuffix(aws.ToString(h.ChecksumSHA256), "-3") {
				t.Errorf("checksum %q, want a composite SHA-256 of 3 parts", aws.ToString(h.ChecksumSHA256))
			}
			if got := h.Metadata[MetaSHA256]; tc.wantMeta && got != hexSHA(data) || !tc.wantMeta && got != "" {
				t.Errorf("metadata sha256 = %q (want it: %v)", got, tc.wantMeta)
			}
			if ct := aws.ToString(h.ContentType); ct != "video/mp4" {
				t.Errorf("content type %q", ct)
			}
			got, err := objects.ReadAll(ctx, s, key)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read back %d bytes (sha %s), %v", len(got), hexSHA(got), err)
			}
		})
	}

	// Ranges across part boundaries, from a multipart object.
	const key = "objects/Put/src.bin"
	for _, r := range [][2]int64{{MinPartSize - 10, 20}, {2*MinPartSize - 1, 2}, {0, MinPartSize + 1}, {int64(len(data)) - 5, 100}, {int64(len(data)) - 1, -1}} {
		rc, err := s.Open(ctx, key, r[0], r[1])
		if err != nil {
			t.Fatalf("Open(%d, %d): %v", r[0], r[1], err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		end := int64(len(data))
		if r[1] >= 0 {
			end = min(end, r[0]+r[1])
		}
		if err != nil || !bytes.Equal(got, data[r[0]:end]) {
			t.Fatalf("Open(%d, %d) read %d bytes, %v; want %d", r[0], r[1], len(got), err, end-r[0])
		}
	}
	wantNoUploads(t, c, bucket)
}

// Objects that fit in a part go in one request, with checksum and metadata.
func TestSinglePut(t *testing.T) {
	s, srv, bucket := newStore(t, func(c *Config) { c.PartSize = MinPartSize })
	c := srv.Client(t)
	for _, n := range []int{0, 1, smallBufSize - 1, smallBufSize, smallBufSize + 1, MinPartSize} {
		data := randomBytes(n, 2)
		key := fmt.Sprintf("single/%d", n)
		in, err := s.Put(t.Context(), key, &chunkReader{data: data, chunk: 65536}, objects.PutOptions{})
		if err != nil {
			t.Fatalf("Put %d bytes: %v", n, err)
		}
		if in.Size != int64(n) || in.SHA256 != hexSHA(data) {
			t.Fatalf("Put %d bytes: Info %+v", n, in)
		}
		h := head(t, c, bucket, key)
		sum := sha256.Sum256(data)
		if strings.Contains(aws.ToString(h.ETag), "-") || aws.ToString(h.ChecksumSHA256) != base64.StdEncoding.EncodeToString(sum[:]) {
			t.Errorf("%d bytes: ETag %s, checksum %s; want one request with the object's SHA-256", n, aws.ToString(h.ETag), aws.ToString(h.ChecksumSHA256))
		}
		if got := h.Metadata[MetaSHA256]; got != hexSHA(data) {
			t.Errorf("%d bytes: metadata sha256 = %q, want %s", n, got, hexSHA(data))
		}
	}
	if err := s.PutIfAbsent(t.Context(), "log/1", []byte("record")); err != nil {
		t.Fatal(err)
	}
	if got := head(t, c, bucket, "log/1").Metadata[MetaSHA256]; got != hexSHA([]byte("record")) {
		t.Errorf("PutIfAbsent: metadata sha256 = %q", got)
	}
}

// cancelAfter cancels its context once n bytes have been read, and keeps
// yielding data.
type cancelAfter struct {
	cancel context.CancelFunc
	n      int
	read   int
}

func (r *cancelAfter) Read(p []byte) (int, error) {
	if r.read >= r.n {
		r.cancel()
	}
	k := min(len(p), 64<<10)
	clear(p[:k])
	r.read += k
	return k, nil
}

var errSource = errors.New("source broke")

type failAfter struct{ n int }

func (r *failAfter) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errSource
	}
	k := min(len(p), r.n)
	clear(p[:k])
	r.n -= k
	return k, nil
}

func TestMultipartFailureLeavesNothing(t *testing.T) {
	s, srv, bucket := newStore(t, func(c *Config) { c.PartSize = MinPartSize })
	c := srv.Client(t)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// Cancelled while reading the third part: two are uploaded or on the way.
	_, err := s.Put(ctx, "cancelled", &cancelAfter{cancel: cancel, n: 11 << 20}, objects.PutOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Put = %v, want context.Canceled", err)
	}

	_, err = s.Put(t.Context(), "failed", &failAfter{n: 7 << 20}, objects.PutOptions{})
	if !errors.Is(err, errSource) {
		t.Fatalf("Put = %v, want the source's error", err)
	}

	// PutPath's bytes must hash to what it computed first: a file that
	// changed in between is refused, multipart or not.
	for _, n := range []int{100, 11 << 20} {
		_, err = s.upload(t.Context(), "changed", &chunkReader{data: make([]byte, n), chunk: 1 << 20}, objects.PutOptions{}, hexSHA([]byte("other")), MinPartSize)
		if !errors.Is(err, errChanged) {
			t.Fatalf("upload of %d bytes with a stale hash = %v, want errChanged", n, err)
		}
	}

	wantNoUploads(t, c, bucket)
	for _, k := range []string{"cancelled", "failed", "changed"} {
		if _, err := s.Stat(t.Context(), k); !errors.Is(err, objects.ErrNotFound) {
			t.Errorf("Stat(%s) = %v, want ErrNotFound", k, err)
		}
	}
}

// A multipart Put holds at most Concurrency part buffers and sends at most
// Concurrency parts at a time.
func TestMultipartBounded(t *testing.T) {
	const conc = 2
	s, _, _ := newStore(t, func(c *Config) {
		c.PartSize = MinPartSize
		c.Concurrency = conc
	})
	var inflight, most atomic.Int32
	slow := middleware.InitializeMiddlewareFunc("slowParts", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		if awsmiddleware.GetOperationName(ctx) != "UploadPart" {
			return next.HandleInitialize(ctx, in)
		}
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		// Hold the part until the pipeline is full (or long enough to be
		// sure it never fills), then a little longer, so a reader that
		// could run ahead would.
		for start := time.Now(); most.Load() < conc && time.Since(start) < 5*time.Second; {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
		return next.HandleInitialize(ctx, in)
	})
	s.client = s3.New(s.client.Options(), func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Initialize.Add(slow, middleware.Before)
		})
	})
	var made atomic.Int32
	s.parts.New = func() any {
		made.Add(1)
		b := make([]byte, s.partSize)
		return &b
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // keep the pool from being emptied

	data := randomBytes(31<<20, 3) // 7 parts
	in, err := s.Put(t.Context(), "bounded", &chunkReader{data: data, chunk: 1 << 20}, objects.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if in.SHA256 != hexSHA(data) {
		t.Fatalf("SHA256 %s, want %s", in.SHA256, hexSHA(data))
	}
	if m := most.Load(); m != conc {
		t.Errorf("%d parts in flight at most, want %d", m, conc)
	}
	if n := made.Load(); n > conc {
		t.Errorf("%d part buffers made, want at most %d", n, conc)
	}
}

// The building blocks of resumable uploads: parts as uploaded are parts as
// listed, across pages, and a conditional Complete refuses an existing key.
func TestMultipartSteps(t *testing.T) {
	s, srv, bucket := newStore(t, nil)
	ctx := t.Context()
	listPartsPage = 2
	t.Cleanup(func() { listPartsPage = 0 })

	const k = "objects/steps.bin"
	id, err := s.createMultipart(ctx, k, "application/octet-stream", hexSHA([]byte("whatever")))
	if err != nil {
		t.Fatal(err)
	}
	var sent []part
	var all []byte
	for i, n := range []int{MinPartSize, MinPartSize, MinPartSize, MinPartSize, 10} {
		data := randomBytes(n, byte(10+i))
		p, err := s.uploadPart(ctx, k, id, int32(i+1), data, nil)
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, p)
		all = append(all, data...)
	}
	listed, err := s.listParts(ctx, k, id)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(listed, sent) {
		t.Fatalf("listParts = %+v\nuploaded    %+v", listed, sent)
	}
	if _, err := s.Put(ctx, k, strings.NewReader("taken"), objects.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.completeMultipart(ctx, k, id, listed, true); !errors.Is(mapErr(err), objects.ErrExists) {
		t.Fatalf("conditional complete over an existing key = %v, want ErrExists", err)
	}
	if err := s.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	if _, err := s.completeMultipart(ctx, k, id, listed, true); err != nil {
		t.Fatalf("complete: %v", err)
	}
	if got, err := objects.ReadAll(ctx, s, k); err != nil || !bytes.Equal(got, all) {
		t.Fatalf("read back %d bytes, %v; want %d", len(got), err, len(all))
	}
	wantNoUploads(t, srv.Client(t), bucket)
}

func TestOpenRangeEdges(t *testing.T) {
	s, _, _ := newStore(t, nil)
	ctx := t.Context()
	data := randomBytes(100, 4)
	for _, k := range []string{"r", "empty"} {
		d := data
		if k == "empty" {
			d = nil
		}
		if _, err := s.Put(ctx, k, bytes.NewReader(d), objects.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		key         string
		off, length int64
		want        []byte
		err         error
	}{
		{"r", 10, math.MaxInt64, data[10:], nil}, // no overflow in the Range header
		{"r", 100, 0, nil, nil},
		{"r", 101, 0, nil, objects.ErrInvalidRange},
		{"r", -1, 10, nil, objects.ErrInvalidRange},
		{"empty", 0, -1, nil, nil},
		{"empty", 0, 10, nil, nil},
		{"empty", 1, -1, nil, objects.ErrInvalidRange},
		{"missing", 0, 0, nil, objects.ErrNotFound},
		{"missing", 5, 10, nil, objects.ErrNotFound},
	} {
		rc, err := s.Open(ctx, tc.key, tc.off, tc.length)
		if tc.err != nil {
			if err == nil {
				rc.Close()
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("Open(%s, %d, %d) = %v, want %v", tc.key, tc.off, tc.length, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Open(%s, %d, %d): %v", tc.key, tc.off, tc.length, err)
			continue
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, tc.want) {
			t.Errorf("Open(%s, %d, %d) read %d bytes, %v; want %d", tc.key, tc.off, tc.length, len(got), err, len(tc.want))
		}
	}
}

// The AWS default chain supplies credentials and region; a wrong secret
// fails without showing up in the error.
func TestDefaultCredentialChain(t *testing.T) {
	srv := s3test.Shared(t)
	bucket := srv.NewBucket(t)
	srv.SetEnv(t)
	cfg := DefaultConfig()
	cfg.Bucket, cfg.Endpoint, cfg.PathStyle = bucket, srv.Endpoint, true // no Region, no credentials
	s, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s.Region() != srv.Region {
		t.Errorf("Region() = %q, want %q from AWS_REGION", s.Region(), srv.Region)
	}
	if _, err := s.Put(t.Context(), "k", bytes.NewReader([]byte("x")), objects.PutOptions{}); err != nil {
		t.Fatalf("Put with credentials from the environment: %v", err)
	}

	const wrong = "WRONGwrongWRONGwrongWRONGwrongWRONGwrong"
	t.Setenv("AWS_SECRET_ACCESS_KEY", wrong)
	bad, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.Put(t.Context(), "k2", bytes.NewReader([]byte("x")), objects.PutOptions{})
	if err == nil {
		t.Fatal("Put with a wrong secret succeeded")
	}
	for _, secret := range []string{wrong, srv.SecretKey, srv.AccessKey} {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("error reveals a credential: %v", err)
		}
	}
	if _, err := bad.Stat(t.Context(), "k"); err == nil || errors.Is(err, objects.ErrNotFound) {
		t.Fatalf("Stat with a wrong secret = %v, want an error that is not ErrNotFound", err)
	}

	t.Setenv("AWS_REGION", "")
	cfg.Endpoint = ""
	if _, err := Open(t.Context(), cfg); err == nil {
		t.Error("Open for AWS without any region succeeded")
	}
}

// A store with a prefix sees and touches only keys under it.
func TestPrefixIsolation(t *testing.T) {
	s, srv, bucket := newStore(t, func(c *Config) { c.Prefix = "stage" })
	c := srv.Client(t)
	ctx := t.Context()
	outside := []string{"k", "stag", "stage-x/k", "stagek", "other/stage/k"}
	for _, k := range outside {
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), Body: strings.NewReader("outside")}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"k", "x/k"} {
		if _, err := s.Put(ctx, k, strings.NewReader("inside"), objects.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutIfAbsent(ctx, "log/1", []byte("inside")); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for in, err := range s.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, in.Key)
	}
	if want := []string{"k", "log/1", "x/k"}; !slices.Equal(keys, want) {
		t.Fatalf("List = %q, want %q", keys, want)
	}
	if got, err := objects.ReadAll(ctx, s, "k"); err != nil || string(got) != "inside" {
		t.Fatalf("ReadAll(k) = %q, %v", got, err)
	}
	if _, err := s.Stat(ctx, "stagek"); !errors.Is(err, objects.ErrNotFound) {
		t.Fatalf("Stat(stagek) = %v, want ErrNotFound", err)
	}
	for _, k := range []string{"k", "x/k", "log/1", "other/stage/k"} {
		if err := s.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	// Everything outside is untouched; nothing of the store's is left.
	out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, o := range out.Contents {
		all = append(all, aws.ToString(o.Key))
	}
	slices.Sort(outside)
	if !slices.Equal(all, outside) {
		t.Fatalf("bucket holds %q, want only %q", all, outside)
	}
}

func TestConfigValidate(t *testing.T) {
	good := DefaultConfig()
	good.Bucket = "b"
	if err := good.Validate(); err != nil {
		t.Fatalf("default config with a bucket: %v", err)
	}
	for _, tc := range []struct {
		field string
		edit  func(*Config)
	}{
		{"Bucket", func(c *Config) { c.Bucket = "" }},
		{"Bucket", func(c *Config) { c.Bucket = "a/b" }},
		{"Prefix", func(c *Config) { c.Prefix = "/p" }},
		{"Prefix", func(c *Config) { c.Prefix = "p/" }},
		{"Prefix", func(c *Config) { c.Prefix = "a/../b" }},
		{"Endpoint", func(c *Config) { c.Endpoint = "127.0.0.1:7070" }},
		{"Endpoint", func(c *Config) { c.Endpoint = "ftp://host" }},
		{"Endpoint", func(c *Config) { c.Endpoint = "http://user:secret@host" }},
		{"PartSize", func(c *Config) { c.PartSize = MinPartSize - 1 }},
		{"PartSize", func(c *Config) { c.PartSize = MaxPartSize + 1 }},
		{"Concurrency", func(c *Config) { c.Concurrency = 0 }},
	} {
		c := good
		tc.edit(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: Validate = %v, want an error about %s", c, err, tc.field)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("Validate repeats a credential: %v", err)
		}
		if _, err := Open(t.Context(), c); err == nil {
			t.Errorf("Open(%+v) succeeded", c)
		}
	}
	// Several bad fields are all reported.
	if err := (Config{}).Validate(); err == nil || !strings.Contains(err.Error(), "Bucket") || !strings.Contains(err.Error(), "PartSize") || !strings.Contains(err.Error(), "Concurrency") {
		t.Errorf("Validate of a zero Config = %v", err)
	}
}

func TestPartSizeFor(t *testing.T) {
	for _, tc := range []struct{ part, size, want int64 }{
		{16 << 20, 0, 16 << 20},
		{16 << 20, 16 << 20 * MaxParts, 16 << 20},
		{16 << 20, 16<<20*MaxParts + 1, 17 << 20},
		{5 << 20, 1 << 40, 105 << 20},     // 1 TiB
		{5 << 20, 5 << 40, 525 << 20},     // 5 TiB, the largest S3 object
		{5 << 20, 100 << 40, MaxPartSize}, // too big for S3 at all
	} {
		if got := partSizeFor(tc.part, tc.size); got != tc.want {
			t.Errorf("partSizeFor(%d, %d) = %d, want %d", tc.part, tc.size, got, tc.want)
		}
		if got := partSizeFor(tc.part, tc.size); got < MaxPartSize && got*MaxParts < tc.size || got%(1<<20) != 0 {
			t.Errorf("partSizeFor(%d, %d) = %d: too small", tc.part, tc.size, got)
		}
	}
}
