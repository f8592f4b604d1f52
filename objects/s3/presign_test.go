package s3

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/wire"
)

// A presigned GET URL reads the object's bytes with a plain HTTP client
// that holds no credentials, and nothing else: a URL signed for one key
// does not read another.
func TestPresignGet(t *testing.T) {
	var st objects.Store
	s, _, _ := newStore(t, nil)
	st = s
	p, ok := st.(objects.Presigner)
	if !ok {
		t.Fatal("the S3 store is no objects.Presigner")
	}
	data := randomBytes(300<<10, 7)
	if _, err := s.Put(t.Context(), "objects/a.bin", bytes.NewReader(data), objects.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(t.Context(), "objects/b.bin", bytes.NewReader([]byte("other")), objects.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	u, err := p.PresignGet(t.Context(), "objects/a.bin", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(u, "X-Amz-Signature=") {
		t.Fatal("the URL carries no signature")
	}
	got, code := httpGet(t, u)
	if code != http.StatusOK || !bytes.Equal(got, data) {
		t.Fatalf("GET: status %d, %d bytes, want 200 and the object's %d", code, len(got), len(data))
	}
	if _, code := httpGet(t, strings.Replace(u, "a.bin", "b.bin", 1)); code != http.StatusForbidden {
		t.Errorf("the URL of a.bin made to name b.bin: status %d, want 403", code)
	}

	for _, d := range []time.Duration{0, -time.Second, MaxPresignExpiry + time.Second} {
		if _, err := p.PresignGet(t.Context(), "objects/a.bin", d); !errors.Is(err, wire.ErrInvalidRequest) {
			t.Errorf("expiry %v: %v, want ErrInvalidRequest", d, err)
		}
	}
	if _, err := p.PresignGet(t.Context(), "../a.bin", time.Minute); !errors.Is(err, wire.ErrInvalidKey) {
		t.Errorf("key ../a.bin: %v, want ErrInvalidKey", err)
	}
}

// httpGet fetches u with a client that knows nothing of AWS.
func httpGet(t *testing.T, u string) ([]byte, int) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal("GET failed") // the error would name the URL
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b, resp.StatusCode
}
