package s3

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

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
	u, err := p.PresignGet(t.Context(), "objects/a.bin", time.Minute, objects.GetURLOptions{})
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

	// A download URL answers the disposition it was signed with, and the
	// parameter cannot be changed without breaking the signature.
	const disposition = `attachment; filename="a.bin"`
	du, err := p.PresignGet(t.Context(), "objects/a.bin", time.Minute, objects.GetURLOptions{ContentDisposition: disposition})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(du)
	if err != nil {
		t.Fatal("GET of the download URL failed")
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Disposition") != disposition {
		t.Errorf("download URL: status %d, Content-Disposition %q; want 200 and %q", resp.StatusCode, resp.Header.Get("Content-Disposition"), disposition)
	}
	if _, code := httpGet(t, strings.Replace(du, "a.bin%22", "evil.html%22", 1)); code != http.StatusForbidden {
		t.Errorf("the download URL with another file name: status %d, want 403", code)
	}

	for _, d := range []time.Duration{0, -time.Second, MaxPresignExpiry + time.Second} {
		if _, err := p.PresignGet(t.Context(), "objects/a.bin", d, objects.GetURLOptions{}); !errors.Is(err, wire.ErrInvalidRequest) {
			t.Errorf("expiry %v: %v, want ErrInvalidRequest", d, err)
		}
	}
	if _, err := p.PresignGet(t.Context(), "../a.bin", time.Minute, objects.GetURLOptions{}); !errors.Is(err, wire.ErrInvalidKey) {
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

// putPart PUTs data to a part URL with the headers it was signed with,
// from a plain HTTP client, and returns the status.
func putPart(t *testing.T, u string, headers map[string]string, data []byte) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, u, bytes.NewReader(data))
	if err != nil {
		t.Fatal("building the PUT failed")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal("PUT of the URL failed")
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// A granted upload: parts PUT to their URLs by a client without
// credentials, listed with their checksums, completed into the object. A
// part whose bytes do not match the checksum its URL was signed with is
// refused by S3, and so is a URL used for another part number.
func TestGrant(t *testing.T) {
	s, _, _ := newStore(t, func(c *Config) { c.PartSize = 5 << 20 })
	var g objects.Granter = s
	if g.GrantPartSize() != 5<<20 {
		t.Fatalf("part size %d", g.GrantPartSize())
	}
	data := randomBytes(5<<20+1234, 9)
	p1, p2 := data[:5<<20], data[5<<20:]
	const key = "objects/g.bin"
	id, err := g.CreateGrant(t.Context(), key, "video/mp4")
	if err != nil {
		t.Fatal(err)
	}
	u1, h1, err := g.PresignPart(t.Context(), key, id, 1, hexSum(p1), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	u2, h2, err := g.PresignPart(t.Context(), key, id, 2, hexSum(p2), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Wrong bytes, and the checksum header left out: refused.
	wrong := bytes.Clone(p2)
	wrong[0] ^= 1
	if code := putPart(t, u2, h2, wrong); code/100 != 4 {
		t.Errorf("part 2 with wrong bytes: status %d, want a 4xx", code)
	}
	if code := putPart(t, u2, nil, p2); code/100 != 4 {
		t.Errorf("part 2 without the signed checksum header: status %d, want a 4xx", code)
	}
	if code := putPart(t, u1, h1, p1); code != http.StatusOK {
		t.Fatalf("part 1: status %d", code)
	}
	parts, err := g.GrantParts(t.Context(), key, id)
	if err != nil || len(parts) != 1 || parts[0].Number != 1 || parts[0].SHA256 != hexSum(p1) || parts[0].Size != int64(len(p1)) {
		t.Fatalf("parts after part 1: %+v, %v", parts, err)
	}
	if code := putPart(t, u2, h2, p2); code != http.StatusOK {
		t.Fatalf("part 2: status %d", code)
	}
	parts, err = g.GrantParts(t.Context(), key, id)
	if err != nil || len(parts) != 2 {
		t.Fatalf("parts: %+v, %v", parts, err)
	}
	info, err := g.CompleteGrant(t.Context(), key, id, parts)
	if err != nil || info.Size != int64(len(data)) {
		t.Fatalf("complete: %+v, %v", info, err)
	}
	got, err := objects.ReadAll(t.Context(), s, key)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the object differs from what was sent: %v", err)
	}
	if _, err := g.GrantParts(t.Context(), key, id); !errors.Is(err, objects.ErrNotFound) {
		t.Errorf("parts of a completed upload: %v, want ErrNotFound", err)
	}
	if _, _, err := g.PresignPart(t.Context(), key, id, 1, "abc", time.Minute); !errors.Is(err, wire.ErrInvalidRequest) {
		t.Errorf("a bad sha256: %v", err)
	}
}

// A single-PUT grant: a client without credentials PUTs the whole object
// to the URL with its signed headers, and the object holds the bytes, the
// content type and the SHA-256 (StatGranted). Other bytes, a missing
// signed header and a second write of the key are all refused, and a
// refused PUT leaves nothing at its key.
func TestGrantPutObject(t *testing.T) {
	s, _, _ := newStore(t, func(c *Config) { c.PartSize = 5 << 20 })
	var g objects.Granter = s
	// Small enough that a refused PUT's body is written whole before the
	// answer (a large one races the server closing the connection).
	data := randomBytes(4<<10, 11)
	sum := hexSum(data)
	const key = "objects/single.bin"
	u, h, err := g.PresignPutObject(t.Context(), key, sum, "video/mp4", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"X-Amz-Checksum-Sha256", "X-Amz-Meta-Sha256", "If-None-Match", "Content-Type"} {
		if headerOf(h, name) == "" {
			t.Errorf("the signed headers %v lack %s", keysOf(h), name)
		}
	}
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal("the URL does not parse")
	}
	for name := range parsed.Query() {
		if n := strings.ToLower(name); n == "x-amz-checksum-sha256" || n == "x-amz-meta-sha256" || n == "if-none-match" || n == "content-type" {
			t.Errorf("%s was hoisted into the query instead of a signed header", name)
		}
	}
	wrong := bytes.Clone(data)
	wrong[7] ^= 1
	if code := putPart(t, u, h, wrong); code/100 != 4 {
		t.Errorf("other bytes: status %d, want a 4xx (the checksum is bound)", code)
	}
	for _, drop := range []string{"X-Amz-Checksum-Sha256", "X-Amz-Meta-Sha256", "If-None-Match", "Content-Type"} {
		less := map[string]string{}
		for k, v := range h {
			if !strings.EqualFold(k, drop) {
				less[k] = v
			}
		}
		if code := putPart(t, u, less, data); code/100 != 4 {
			t.Errorf("without the signed %s: status %d, want a 4xx", drop, code)
		}
	}
	if _, err := g.StatGranted(t.Context(), key); !errors.Is(err, objects.ErrNotFound) {
		t.Fatalf("after refused PUTs the key holds an object: %v", err)
	}
	if code := putPart(t, u, h, data); code != http.StatusOK {
		t.Fatalf("PUT: status %d", code)
	}
	info, err := g.StatGranted(t.Context(), key)
	if err != nil || info.Size != int64(len(data)) || info.SHA256 != sum {
		t.Fatalf("StatGranted: %+v, %v; want %d bytes of sha256 %s", info, err, len(data), sum)
	}
	out, err := s.client.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: &s.bucket, Key: aws.String(s.prefix + key), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(out.ContentType) != "video/mp4" || out.Metadata[MetaSHA256] != sum {
		t.Errorf("stored content type %q, metadata %v; want video/mp4 and sha256 %s", aws.ToString(out.ContentType), out.Metadata, sum)
	}
	if raw, _ := base64.StdEncoding.DecodeString(aws.ToString(out.ChecksumSHA256)); hex.EncodeToString(raw) != sum {
		t.Errorf("the stage's own checksum of the object is %q, want the sha256 the PUT was signed with", aws.ToString(out.ChecksumSHA256))
	}
	// The key is written once: the same URL again, even with the same
	// bytes, and a fresh URL with other bytes are refused.
	if code := putPart(t, u, h, data); code != http.StatusPreconditionFailed {
		t.Errorf("a second PUT of the key: status %d, want 412", code)
	}
	other := randomBytes(1000, 12)
	u2, h2, err := g.PresignPutObject(t.Context(), key, hexSum(other), "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if code := putPart(t, u2, h2, other); code != http.StatusPreconditionFailed {
		t.Errorf("other bytes to a written key: status %d, want 412", code)
	}
	got, err := objects.ReadAll(t.Context(), s, key)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the object changed: %v", err)
	}

	if _, _, err := g.PresignPutObject(t.Context(), key, strings.ToUpper(sum), "", time.Minute); !errors.Is(err, wire.ErrInvalidRequest) {
		t.Errorf("an upper-case sha256: %v, want ErrInvalidRequest", err)
	}
	if _, _, err := g.PresignPutObject(t.Context(), "../x", sum, "", time.Minute); !errors.Is(err, wire.ErrInvalidKey) {
		t.Errorf("key ../x: %v, want ErrInvalidKey", err)
	}
	// A multipart object's composite checksum is no SHA-256 of it: its
	// recorded sum comes from the metadata the store's writers set.
	big := randomBytes(6<<20, 13)
	path := filepath.Join(t.TempDir(), "big.bin")
	if err := os.WriteFile(path, big, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutPath(t.Context(), "objects/big.bin", path, objects.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if info, err := g.StatGranted(t.Context(), "objects/big.bin"); err != nil || info.SHA256 != hexSum(big) {
		t.Errorf("StatGranted of a multipart object: %+v, %v; want sha256 %s", info, err, hexSum(big))
	}
}

func headerOf(h map[string]string, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

func keysOf(h map[string]string) []string {
	var out []string
	for k := range h {
		out = append(out, k)
	}
	return out
}
