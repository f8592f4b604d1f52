package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakedata/lake/internal/s3test"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/s3"
	"github.com/lakedata/lake/roles/meta"
	"github.com/lakedata/lake/wire"
)

// s3URLFixture is a metadata service on an S3 stage (versitygw) that alone
// holds the gateway's credentials: the client connected to it has none.
type s3URLFixture struct {
	gw     *s3test.Server
	bucket string
	store  *s3.Store // the service's
	c      *Client
}

func newS3URLFixture(t *testing.T) *s3URLFixture {
	t.Helper()
	gw := s3test.Start(t)
	gw.SetEnv(t)
	bucket := gw.NewBucket(t)
	sc := s3.DefaultConfig()
	sc.Bucket, sc.Prefix, sc.Endpoint, sc.PathStyle = bucket, "lake", gw.Endpoint, true
	store, err := s3.Open(t.Context(), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	cfg := meta.DefaultConfig()
	cfg.Listen, cfg.DataDir = "127.0.0.1:0", filepath.Join(t.TempDir(), "data")
	cfg.Stage, cfg.StageURI = store, "s3://"+bucket+"/lake"
	svc, err := meta.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := svc.Close(context.Background()); err != nil {
			t.Errorf("close meta: %v", err)
		}
	})
	// From here on this process has no AWS credentials; the service's
	// store resolved them when it opened.
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	c, err := Connect(context.Background(), "grpc://"+svc.Addr().String(), WithCheckpointDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.CreateTable(context.Background(), "clips", wire.DefaultSchema(), false); err != nil {
		t.Fatal(err)
	}
	return &s3URLFixture{gw: gw, bucket: bucket, store: store, c: c}
}

// putRow stores content in the stage with the service's credentials and
// appends a row for it whose FILE value records sha (the content's own
// SHA-256 when sha is "").
func (f *s3URLFixture) putRow(t *testing.T, name string, content []byte, sha string) wire.FileValue {
	t.Helper()
	key := objects.NewObjectKey(name, time.Now())
	info, err := f.store.Put(t.Context(), key, bytes.NewReader(content), objects.PutOptions{ContentType: "video/mp4"})
	if err != nil {
		t.Fatal(err)
	}
	if sha == "" {
		sum := sha256.Sum256(content)
		sha = hex.EncodeToString(sum[:])
	}
	v := wire.FileValue{Key: key, Size: info.Size, SHA256: sha, ContentType: "video/mp4", ETag: info.ETag, UploadedAt: info.ModTime}
	rec := wiretest.FileRow(name, v)
	defer rec.Release()
	if _, err := f.c.Append(t.Context(), "clips", rec, AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	return v
}

func readAllURL(t *testing.T, c *Client, key string, o URLReadOptions) ([]byte, wire.FileValue, error) {
	t.Helper()
	rc, v, err := c.OpenURL(t.Context(), "clips", key, o)
	if err != nil {
		return nil, v, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return b, v, err
}

// OpenURL reads a row's bytes through a read URL with no AWS credentials
// at all, at the latest version and at a past one (a row deleted since);
// a key no row has is ErrFileNotFound, a version never committed
// ErrVersionNotFound.
func TestOpenURLOnS3(t *testing.T) {
	f := newS3URLFixture(t)
	a := make([]byte, 3<<20+5)
	rand.Read(a)
	va := f.putRow(t, "a.mp4", a, "") // version 1
	vb := f.putRow(t, "b.mp4", []byte("bytes of b"), "")
	if _, err := f.c.Delete(t.Context(), "clips", []string{va.Key}, DeleteOptions{}); err != nil { // version 3
		t.Fatal(err)
	}
	// The client's own stage access has no credentials: the direct path
	// cannot read the row.
	if _, err := f.c.FindFile(t.Context(), "clips", vb.Key); err == nil {
		t.Fatal("FindFile read the stage without credentials; the test proves nothing")
	}

	got, v, err := readAllURL(t, f.c, vb.Key, URLReadOptions{})
	if err != nil || string(got) != "bytes of b" {
		t.Fatalf("b: %q, %v", got, err)
	}
	if v.Key != vb.Key || v.Size != vb.Size || v.SHA256 != vb.SHA256 || v.ContentType != "video/mp4" || v.ETag != vb.ETag || v.UploadedAt.UnixMicro() != vb.UploadedAt.UnixMicro() {
		t.Errorf("answered FILE value %+v, the row has %+v", v, vb)
	}
	if _, _, err := readAllURL(t, f.c, va.Key, URLReadOptions{}); !errors.Is(err, ErrFileNotFound) || !errors.Is(err, wire.ErrRowNotFound) {
		t.Errorf("a deleted row at the latest version: %v, want ErrFileNotFound", err)
	}
	got, _, err = readAllURL(t, f.c, va.Key, URLReadOptions{Version: new(int64(1))})
	if err != nil || !bytes.Equal(got, a) {
		t.Fatalf("a at version 1: %d bytes, %v; want its %d bytes", len(got), err, len(a))
	}
	if _, _, err := readAllURL(t, f.c, vb.Key, URLReadOptions{Version: new(int64(1))}); !errors.Is(err, ErrFileNotFound) {
		t.Errorf("b at version 1, before its row: %v, want ErrFileNotFound", err)
	}
	if _, _, err := readAllURL(t, f.c, vb.Key, URLReadOptions{Version: new(int64(9))}); !errors.Is(err, wire.ErrVersionNotFound) {
		t.Errorf("a version never committed: %v, want ErrVersionNotFound", err)
	}
}

// Bytes that are not those the row records fail the read with
// ErrIntegrity, as Open does: a wrong SHA-256 of the right size, and an
// object replaced behind lake's back by a longer one.
func TestOpenURLIntegrity(t *testing.T) {
	f := newS3URLFixture(t)
	wrong := f.putRow(t, "wrong.bin", []byte("these bytes"), strings.Repeat("ab", 32))
	if _, _, err := readAllURL(t, f.c, wrong.Key, URLReadOptions{}); !errors.Is(err, ErrIntegrity) {
		t.Errorf("a wrong SHA-256: %v, want ErrIntegrity", err)
	}
	replaced := f.putRow(t, "replaced.bin", []byte("short"), "")
	if _, err := f.gw.Client(t).PutObject(t.Context(), &awss3.PutObjectInput{Bucket: &f.bucket, Key: new("lake/" + replaced.Key), Body: strings.NewReader("much longer than short")}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readAllURL(t, f.c, replaced.Key, URLReadOptions{}); !errors.Is(err, ErrIntegrity) {
		t.Errorf("a replaced object: %v, want ErrIntegrity", err)
	}
}

// cuttingTransport breaks the body of the first cuts responses after
// after bytes, and records the Range header of every request.
type cuttingTransport struct {
	after int64
	mu    sync.Mutex
	cuts  int
	seen  []string // Range headers
}

func (c *cuttingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.seen = append(c.seen, req.Header.Get("Range"))
	cut := c.cuts > 0
	c.cuts--
	c.mu.Unlock()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || !cut {
		return resp, err
	}
	resp.Body = &cutBody{rc: resp.Body, left: c.after}
	return resp, nil
}

// cutBody is a response body whose connection breaks after left bytes.
type cutBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *cutBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.ErrUnexpectedEOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cutBody) Close() error { return b.rc.Close() }

// A download whose connection breaks resumes with a Range request from
// where it stopped and yields exactly the object; one that breaks more
// often than maxURLResumes fails, and its error names no URL.
func TestOpenURLResumes(t *testing.T) {
	f := newS3URLFixture(t)
	content := make([]byte, 4<<20+3)
	rand.Read(content)
	v := f.putRow(t, "big.bin", content, "")

	tr := &cuttingTransport{after: 1 << 20, cuts: 2}
	got, _, err := readAllURL(t, f.c, v.Key, URLReadOptions{HTTPClient: &http.Client{Transport: tr}})
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("a download broken twice: %d bytes, %v; want the object's %d", len(got), err, len(content))
	}
	if want := []string{"", "bytes=1048576-", "bytes=2097152-"}; strings.Join(tr.seen, ",") != strings.Join(want, ",") {
		t.Errorf("requests with Range %q, want %q", tr.seen, want)
	}

	tr = &cuttingTransport{after: 1000, cuts: maxURLResumes + 1}
	_, _, err = readAllURL(t, f.c, v.Key, URLReadOptions{HTTPClient: &http.Client{Transport: tr}})
	if err == nil || errors.Is(err, ErrIntegrity) {
		t.Fatalf("a download broken %d times: %v, want a read error", maxURLResumes+1, err)
	}
	if strings.Contains(err.Error(), "X-Amz-") || strings.Contains(err.Error(), f.gw.Endpoint) {
		t.Errorf("the error names the URL: %v", err)
	}
}

// refusingTransport fails every request, as a refused connection does:
// net/http quotes the URL in its error, OpenURL must not.
type refusingTransport struct{}

func (refusingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("connection refused")
}

func TestOpenURLErrorNamesNoURL(t *testing.T) {
	f := newS3URLFixture(t)
	v := f.putRow(t, "a.bin", []byte("bytes"), "")
	_, _, err := f.c.OpenURL(t.Context(), "clips", v.Key, URLReadOptions{HTTPClient: &http.Client{Transport: refusingTransport{}}})
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("OpenURL through a refusing transport: %v", err)
	}
	if strings.Contains(err.Error(), "X-Amz-") || strings.Contains(err.Error(), "http://") {
		t.Errorf("the error names the URL: %v", err)
	}
}

// On a local stage OpenURL reads the file:// URL the service answers,
// with the same check at the end.
func TestOpenURLLocalStage(t *testing.T) {
	f := newFixture(t, nil)
	c := f.connect()
	if _, err := c.CreateTable(t.Context(), "clips", wire.DefaultSchema(), false); err != nil {
		t.Fatal(err)
	}
	res, err := c.PutFile(t.Context(), "clips", writeFile(t, "a.txt", []byte("local bytes")), PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := readAllURL(t, c, res.File.Key, URLReadOptions{})
	if err != nil || string(got) != "local bytes" {
		t.Fatalf("local: %q, %v", got, err)
	}
}
