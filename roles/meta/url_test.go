package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

func (f *fixture) url(table, key string, expires *time.Duration) (*lakepb.ObjectUrl, error) {
	req := &lakepb.ObjectUrlRequest{Table: table, Key: key}
	if expires != nil {
		us := expires.Microseconds()
		req.ExpiresMicros = &us
	}
	var res lakepb.ObjectUrl
	err := flightrpc.Action(context.Background(), f.fc, wire.ActionURL, req, &res)
	return &res, wire.FromStatus(err)
}

// On a local stage lake.table.url answers the object's file:// URL, for
// a key that a row of the current version has and for no other; the
// expiry is checked against URLMaxExpiry whatever the stage.
func TestURLLocalStage(t *testing.T) {
	f := &fixture{t: t, tune: func(c *Config) { c.URLMaxExpiry = time.Hour }}
	base := newFixture(t) // for its stage
	base.stop()
	f.stage, f.dataDir = base.stage, t.TempDir()
	f.start()
	t.Cleanup(f.stop)
	f.createTable("clips")
	if _, err := f.appendOne("clips", "a.mp4", "c1"); err != nil {
		t.Fatal(err)
	}
	key := f.snapshotKey("clips")

	res, err := f.url("clips", key, nil)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(res.GetUrl())
	if err != nil || u.Scheme != "file" || res.GetExpiresAtUnixMicros() != 0 {
		t.Fatalf("answer %v, want a file:// URL that does not expire", res)
	}
	if got, err := os.ReadFile(u.Path); err != nil || string(got) != "content of a.mp4" {
		t.Fatalf("the URL reads %q, %v", got, err)
	}

	for _, d := range []time.Duration{0, time.Millisecond, time.Hour + time.Second, 8 * 24 * time.Hour} {
		_, err := f.url("clips", key, &d)
		if !errors.Is(err, wire.ErrInvalidRequest) || status.Code(err) != codes.InvalidArgument {
			t.Errorf("expiry %v with a 1h limit: %v, want InvalidArgument", d, err)
		}
	}
	limit := time.Hour
	if _, err := f.url("clips", key, &limit); err != nil {
		t.Errorf("expiry at the limit: %v", err)
	}
	if _, err := f.url("clips", "objects/2026/12/01/none.bin", nil); !errors.Is(err, wire.ErrRowNotFound) || status.Code(err) != codes.NotFound {
		t.Errorf("a key no row has: %v, want NotFound", err)
	}
	if _, err := f.url("nope", key, nil); !errors.Is(err, wire.ErrTableNotFound) {
		t.Errorf("an unknown table: %v", err)
	}
	if _, err := f.url("clips", "../etc/passwd", nil); !errors.Is(err, wire.ErrInvalidKey) {
		t.Errorf("a bad key: %v", err)
	}
	// After the row is deleted the object has no row: no URL, though the
	// object stays in the stage.
	if _, err := f.svc.Delete(context.Background(), &lakepb.DeleteRequest{Table: "clips", Keys: []string{key}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.url("clips", key, nil); !errors.Is(err, wire.ErrRowNotFound) {
		t.Errorf("a deleted row's key: %v, want ErrRowNotFound", err)
	}
}

func TestURLMaxExpiryValidated(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil && strings.Contains(err.Error(), "URLMaxExpiry") {
		t.Fatalf("the default refused: %v", err)
	}
	for _, d := range []time.Duration{0, time.Millisecond, DefaultURLMaxExpiry + time.Second} {
		c := DefaultConfig()
		c.URLMaxExpiry = d
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "URLMaxExpiry") {
			t.Errorf("URLMaxExpiry %v: %v", d, err)
		}
	}
}

// urlAt is url at a version of the table.
func (f *fixture) urlAt(table, key string, version int64) (*lakepb.ObjectUrl, error) {
	var res lakepb.ObjectUrl
	err := flightrpc.Action(context.Background(), f.fc, wire.ActionURL, &lakepb.ObjectUrlRequest{Table: table, Key: key, Version: &version}, &res)
	return &res, wire.FromStatus(err)
}

// sameFile reports how the answered FILE value differs from the row's
// value v, or "" when it does not. Times are compared in microseconds,
// the row's precision.
func sameFile(got *lakepb.UploadedFile, v wire.FileValue) string {
	want := uploadedFileOf(v)
	want.UploadedAtUnixMicros = v.UploadedAt.UnixMicro()
	if got.GetKey() != want.Key || got.GetSize() != want.Size || got.GetSha256() != want.Sha256 || got.GetEtag() != want.Etag ||
		got.GetContentType() != want.ContentType || got.GetUploadedAtUnixMicros() != want.UploadedAtUnixMicros || want.UploadedAtUnixMicros == 0 {
		return fmt.Sprintf("answered %v, the row has %v", got, want)
	}
	return ""
}

// With a version, lake.table.url looks for the key among the rows of that
// version: a row deleted since still has a URL, a row added later has
// none; a version never committed is NotFound and an expired one
// FailedPrecondition, as in time travel. Every answer carries the row's
// FILE value, whole.
func TestURLAtVersion(t *testing.T) {
	f := newFixture(t)
	f.createTable("clips")
	a := f.putObject("a.mp4", []byte("the bytes of a"))
	a.ContentType, a.ETag = "video/mp4", "etag-of-a"
	b := f.putObject("b.mp4", []byte("the bytes of b, longer"))
	for i, v := range []wire.FileValue{a, b} { // versions 1 and 2
		rec := wiretest.FileRow(fmt.Sprintf("clip-%d", i), v)
		_, err := f.append("clips", fmt.Sprintf("c%d", i), rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.svc.Delete(context.Background(), &lakepb.DeleteRequest{Table: "clips", Keys: []string{a.Key}}); err != nil { // version 3
		t.Fatal(err)
	}

	if _, err := f.url("clips", a.Key, nil); !errors.Is(err, wire.ErrRowNotFound) {
		t.Errorf("the deleted row at the latest version: %v, want ErrRowNotFound", err)
	}
	for _, v := range []int64{1, 2} {
		res, err := f.urlAt("clips", a.Key, v)
		if err != nil {
			t.Fatalf("a at version %d: %v", v, err)
		}
		if d := sameFile(res.GetFile(), a); d != "" {
			t.Errorf("a at version %d: %s", v, d)
		}
		if u, err := url.Parse(res.GetUrl()); err != nil || u.Scheme != "file" {
			t.Errorf("a at version %d: URL %q", v, res.GetUrl())
		} else if got, err := os.ReadFile(u.Path); err != nil || string(got) != "the bytes of a" {
			t.Errorf("a at version %d: the URL reads %q, %v", v, got, err)
		}
	}
	res, err := f.url("clips", b.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := sameFile(res.GetFile(), b); d != "" {
		t.Errorf("b at the latest version: %s", d)
	}
	if _, err := f.urlAt("clips", b.Key, 1); !errors.Is(err, wire.ErrRowNotFound) || status.Code(err) != codes.NotFound {
		t.Errorf("b at version 1, before its row: %v, want ErrRowNotFound", err)
	}
	for _, v := range []int64{4, 99, -1} {
		if _, err := f.urlAt("clips", b.Key, v); !errors.Is(err, wire.ErrVersionNotFound) || status.Code(err) != codes.NotFound {
			t.Errorf("version %d, never committed: %v, want ErrVersionNotFound", v, err)
		}
	}

	if _, err := f.expire(&lakepb.ExpireRequest{Table: "clips", KeepLast: ptr[int64](1), CommitId: "exp-1"}); err != nil { // version 4 keeps 3..
		t.Fatal(err)
	}
	if _, err := f.urlAt("clips", a.Key, 1); !errors.Is(err, wire.ErrVersionExpired) || status.Code(err) != codes.FailedPrecondition {
		t.Errorf("an expired version: %v, want ErrVersionExpired", err)
	}
	if _, err := f.urlAt("clips", b.Key, 3); err != nil {
		t.Errorf("b at retained version 3: %v", err)
	}
}

// On S3 the presigned answer carries the row's FILE value too, at the
// latest version and at a past one; the URL reads exactly the object, and
// no URL reaches the log.
func TestURLFileOnS3(t *testing.T) {
	m := newS3Meta(t)
	ctx := context.Background()
	content := []byte("bytes of a clip on S3")
	key := objects.NewObjectKey("clip.mp4", time.Now())
	info, err := m.store.Put(ctx, key, bytes.NewReader(content), objects.PutOptions{ContentType: "video/mp4"})
	if err != nil {
		t.Fatal(err)
	}
	v := wire.FileValue{Key: key, Size: info.Size, SHA256: hexOf(content), ContentType: "video/mp4", ETag: info.ETag, UploadedAt: info.ModTime}
	rec := wiretest.FileRow("clip", v)
	defer rec.Release()
	if _, err := flightrpc.Append(ctx, m.fc, &lakepb.Append{Table: "clips", CommitId: "s3-1"}, rec.Schema(), []arrow.RecordBatch{rec}); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	for _, version := range []*int64{nil, ptr[int64](1)} {
		var res lakepb.ObjectUrl
		req := &lakepb.ObjectUrlRequest{Table: "clips", Key: key, Version: version}
		if err := flightrpc.Action(ctx, m.fc, wire.ActionURL, req, &res); err != nil {
			t.Fatalf("url at %v: %v", version, err)
		}
		if d := sameFile(res.GetFile(), v); d != "" {
			t.Errorf("url at %v: %s", version, d)
		}
		resp, err := hc.Get(res.GetUrl())
		if err != nil {
			t.Fatal("GET of the URL failed")
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Equal(got, content) {
			t.Errorf("url at %v: status %d, %q", version, resp.StatusCode, got)
		}
		if u, err := url.Parse(res.GetUrl()); err != nil || u.Query().Get("X-Amz-Signature") == "" || strings.Contains(m.logs.String(), u.Query().Get("X-Amz-Signature")) {
			t.Error("the URL has no signature, or its signature is in the log")
		}
	}
	var res lakepb.ObjectUrl
	err = flightrpc.Action(ctx, m.fc, wire.ActionURL, &lakepb.ObjectUrlRequest{Table: "clips", Key: key, Version: ptr[int64](0)}, &res)
	if !errors.Is(wire.FromStatus(err), wire.ErrRowNotFound) {
		t.Errorf("at version 0, before the row: %v, want ErrRowNotFound", err)
	}

	// A download name makes the URL's answer a download under that name;
	// a name that is not one plain file name is refused.
	if err := flightrpc.Action(ctx, m.fc, wire.ActionURL, &lakepb.ObjectUrlRequest{Table: "clips", Key: key, DownloadName: "clip one.mp4"}, &res); err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(res.GetUrl())
	if err != nil {
		t.Fatal("GET of the download URL failed")
	}
	resp.Body.Close()
	if d := resp.Header.Get("Content-Disposition"); resp.StatusCode != http.StatusOK || d != `attachment; filename="clip one.mp4"` {
		t.Errorf("download URL: status %d, Content-Disposition %q", resp.StatusCode, d)
	}
	for _, name := range []string{"a/b.mp4", "a\nb", strings.Repeat("x", 256)} {
		err := flightrpc.Action(ctx, m.fc, wire.ActionURL, &lakepb.ObjectUrlRequest{Table: "clips", Key: key, DownloadName: name}, &res)
		if !errors.Is(wire.FromStatus(err), wire.ErrInvalidRequest) {
			t.Errorf("download name %q: %v, want ErrInvalidRequest", name, err)
		}
	}
}
