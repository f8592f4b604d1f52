package s3

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/lakedata/lake/internal/s3test"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/checkpoint"
)

// requestLog is a reverse proxy on 127.0.0.1 in front of the gateway that
// records each request by S3 operation, with the SHA-256 checksum header
// of each PUT. corrupt, when set, changes a PUT body on its way.
type requestLog struct {
	URL     string
	mu      sync.Mutex
	ops     []string
	sums    []string // x-amz-checksum-sha256 of the PUTs, in order
	corrupt bool
}

func startRequestLog(t *testing.T, srv *s3test.Server) *requestLog {
	t.Helper()
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	l := &requestLog{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.ops = append(l.ops, operation(r))
		if r.Method == http.MethodPut {
			l.sums = append(l.sums, r.Header.Get("X-Amz-Checksum-Sha256"))
		}
		corrupt := l.corrupt && r.Method == http.MethodPut && r.ContentLength > 0
		l.mu.Unlock()
		if corrupt {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			body[len(body)/2] ^= 0xff
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		proxy.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &httptest.Server{Listener: ln, Config: &http.Server{Handler: h}}
	hs.Start()
	t.Cleanup(hs.Close)
	l.URL = hs.URL
	return l
}

// operation names a request as S3 does, from its method and query.
func operation(r *http.Request) string {
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodPost && q.Has("uploads"):
		return "CreateMultipartUpload"
	case r.Method == http.MethodPost && q.Has("uploadId"):
		return "CompleteMultipartUpload"
	case r.Method == http.MethodPut && q.Has("partNumber"):
		return "UploadPart"
	case r.Method == http.MethodGet && q.Has("uploadId"):
		return "ListParts"
	case r.Method == http.MethodDelete && q.Has("uploadId"):
		return "AbortMultipartUpload"
	case r.Method == http.MethodPut:
		return "PutObject"
	}
	return r.Method
}

// take returns the requests seen since the last take, and the PUT
// checksums, and starts over.
func (l *requestLog) take() (ops, sums []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ops, sums = l.ops, l.sums
	l.ops, l.sums = nil, nil
	return ops, sums
}

func (l *requestLog) setCorrupt(on bool) {
	l.mu.Lock()
	l.corrupt = on
	l.mu.Unlock()
}

// newLoggedStore is a store with default parts that reaches the gateway
// through a requestLog.
func newLoggedStore(t *testing.T) (*Store, *requestLog) {
	t.Helper()
	l := startRequestLog(t, s3test.Shared(t))
	s, _, _ := newStore(t, func(c *Config) { c.Endpoint = l.URL })
	return s, l
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A small file, whichever way it is put, is one PutObject carrying the
// SHA-256 of its bytes as checksum: no multipart upload, no listing, and,
// for a resumable put, no checkpoint. Up to a whole part it stays so.
func TestSmallFileIsOneRequest(t *testing.T) {
	s, l := newLoggedStore(t)
	dir := t.TempDir()
	for _, size := range []int{64 << 10, smallBufSize + 1, DefaultPartSize} {
		data := randomBytes(size, 5)
		sum := sha256.Sum256(data)
		src := filepath.Join(dir, fmt.Sprintf("img-%d.jpg", size))
		writeFile(t, src, data)
		cpPath := filepath.Join(dir, "checkpoints", fmt.Sprintf("img-%d.json", size))
		sess, err := checkpoint.Open(cpPath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sess.Close() })

		for _, put := range []struct {
			name string
			do   func(key string) (objects.Info, error)
		}{
			{"PutPath", func(key string) (objects.Info, error) { return s.PutPath(t.Context(), key, src, objects.PutOptions{}) }},
			{"PutPathResumable", func(key string) (objects.Info, error) {
				return s.PutPathResumable(t.Context(), key, src, sess, objects.PutOptions{})
			}},
			{"Put", func(key string) (objects.Info, error) {
				return s.Put(t.Context(), key, &chunkReader{data: data, chunk: 8 << 10}, objects.PutOptions{})
			}},
		} {
			key := fmt.Sprintf("objects/small/%d-%s", size, put.name)
			l.take()
			in, err := put.do(key)
			if err != nil {
				t.Fatalf("%s of %d bytes: %v", put.name, size, err)
			}
			ops, sums := l.take()
			if len(ops) != 1 || ops[0] != "PutObject" {
				t.Errorf("%s of %d bytes sent %v, want one PutObject", put.name, size, ops)
			}
			if want := base64.StdEncoding.EncodeToString(sum[:]); len(sums) != 1 || sums[0] != want {
				t.Errorf("%s of %d bytes: checksums %q, want %q", put.name, size, sums, want)
			}
			if in.Size != int64(size) || in.SHA256 != hexSHA(data) || in.ETag == "" {
				t.Errorf("%s of %d bytes: Info %+v", put.name, size, in)
			}
		}
		if _, err := sess.Load(); !errors.Is(err, checkpoint.ErrNoCheckpoint) {
			t.Errorf("a resumable put of %d bytes left a checkpoint: %v", size, err)
		}
		if _, err := os.Stat(cpPath); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a resumable put of %d bytes left a checkpoint file: %v", size, err)
		}
	}

	// One byte more than a part is a resumable multipart upload again.
	src := filepath.Join(dir, "big.bin")
	writeFile(t, src, randomBytes(DefaultPartSize+1, 6))
	sess, err := checkpoint.Open(filepath.Join(dir, "checkpoints", "big.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	l.take()
	if _, err := s.PutPathResumable(t.Context(), "objects/big", src, sess, objects.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	ops, _ := l.take()
	sort.Strings(ops)
	if got := strings.Join(ops, " "); got != "CompleteMultipartUpload CreateMultipartUpload ListParts UploadPart UploadPart" {
		t.Errorf("a resumable put of one part and a byte sent %s", got)
	}
	if cp, err := sess.Load(); err != nil || !cp.Completed {
		t.Errorf("its checkpoint: %+v, %v; want one marked completed", cp, err)
	}
}

// S3 checks a single request's bytes against its checksum: a body changed
// on the way is refused, and nothing is stored.
func TestSmallFileCorruptedOnTheWayIsRefused(t *testing.T) {
	s, l := newLoggedStore(t)
	src := filepath.Join(t.TempDir(), "img.jpg")
	writeFile(t, src, randomBytes(64<<10, 8))
	l.setCorrupt(true)
	const key = "objects/corrupt/img.jpg"
	if _, err := s.PutPath(t.Context(), key, src, objects.PutOptions{}); err == nil {
		t.Fatal("PutPath of a body corrupted on the way succeeded")
	}
	l.setCorrupt(false)
	if _, err := s.Stat(t.Context(), key); !errors.Is(err, objects.ErrNotFound) {
		t.Fatalf("Stat after the refused put = %v, want ErrNotFound", err)
	}
}

// A small file that changes size between its Stat and its read is refused
// before anything is sent.
func TestSmallFileChangedSizeIsRefused(t *testing.T) {
	s, l := newLoggedStore(t)
	src := filepath.Join(t.TempDir(), "img.jpg")
	writeFile(t, src, randomBytes(64<<10, 9))
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l.take()
	for _, size := range []int64{64<<10 - 1, 64<<10 + 1} {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		if _, err := s.putFileSingle(t.Context(), "objects/changed", f, size, objects.PutOptions{}); !errors.Is(err, errChanged) {
			t.Errorf("a file of 64 KiB put as %d bytes = %v, want errChanged", size, err)
		}
	}
	if ops, _ := l.take(); len(ops) != 0 {
		t.Errorf("refused puts sent %v", ops)
	}
}
