package meta

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/internal/s3test"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/s3"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// lockedBuffer is a log sink a test reads while the service writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// s3Meta is a metadata service on an S3 stage (versitygw), with 5 MiB
// parts, logging at debug level into logs.
type s3Meta struct {
	svc   *Service
	fc    flight.Client
	store *s3.Store
	logs  *lockedBuffer
}

func newS3Meta(t *testing.T) *s3Meta {
	t.Helper()
	gw := s3test.Start(t)
	gw.SetEnv(t)
	bucket := gw.NewBucket(t)
	sc := s3.DefaultConfig()
	sc.Bucket, sc.Prefix, sc.Endpoint, sc.PathStyle, sc.PartSize = bucket, "lake", gw.Endpoint, true, 5<<20
	store, err := s3.Open(t.Context(), sc)
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	cfg := DefaultConfig()
	cfg.Listen, cfg.DataDir = "127.0.0.1:0", filepath.Join(t.TempDir(), "data")
	cfg.Stage, cfg.StageURI = store, "s3://"+bucket+"/lake"
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	svc, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	fc, err := flightrpc.Dial(svc.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		fc.Close()
		if err := svc.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
		store.Close()
	})
	m := &s3Meta{svc: svc, fc: fc, store: store, logs: logs}
	var info lakepb.TableInfo
	if err := flightrpc.Action(context.Background(), fc, wire.ActionCreateTable, &lakepb.CreateTableRequest{Name: "clips", Schema: wire.EncodeSchema(wire.DefaultSchema())}, &info); err != nil {
		t.Fatal(err)
	}
	return m
}

// httpPut PUTs body to a part URL from a client that knows nothing of
// AWS, and returns the status. Errors are not shown: they would name the
// URL.
func httpPut(t *testing.T, hc *http.Client, pu *lakepb.PartUrl, body []byte) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, pu.GetUrl(), bytes.NewReader(body))
	if err != nil {
		t.Fatal("building the PUT failed")
	}
	for k, v := range pu.GetHeaders() {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal("the PUT failed")
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func hexOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// An upload through a grant, end to end on versitygw: the leader chooses
// the key and signs part URLs bound to each part's SHA-256; a plain HTTP
// client PUTs the parts; a part with other bytes is refused by the
// gateway; completing with a part missing fails and leaves the upload to
// be finished; renewed URLs finish it; completion answers a FILE value an
// append accepts. No URL reaches the log.
func TestUploadGrantOnS3(t *testing.T) {
	m := newS3Meta(t)
	ctx := context.Background()
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()

	data := make([]byte, 5<<20+1234)
	rand.Read(data)
	p1, p2 := data[:5<<20], data[5<<20:]
	var g lakepb.UploadGrant
	err := flightrpc.Action(ctx, m.fc, wire.ActionUploadGrant, &lakepb.UploadGrantRequest{
		Table: "clips", FileName: "clip.mp4", Size: int64(len(data)), Sha256: hexOf(data), ContentType: "video/mp4",
		Parts: []*lakepb.UploadPart{{Number: 1, Sha256: hexOf(p1)}, {Number: 2, Sha256: hexOf(p2)}},
	}, &g)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(g.GetKey(), "objects/") || !strings.HasSuffix(g.GetKey(), "-clip.mp4") || g.GetUploadId() == "" ||
		g.GetMode() != UploadPresigned || g.GetPartSize() != 5<<20 || g.GetPartCount() != 2 || len(g.GetUrls()) != 2 {
		t.Fatalf("grant: key %q, mode %q, part size %d, %d parts, %d URLs", g.GetKey(), g.GetMode(), g.GetPartSize(), g.GetPartCount(), len(g.GetUrls()))
	}
	if at := time.UnixMicro(g.GetExpiresAtUnixMicros()); at.Before(time.Now().Add(10*time.Minute)) || at.After(time.Now().Add(16*time.Minute)) {
		t.Errorf("the URLs expire at %v, want in about 15 minutes", at)
	}
	var signatures []string
	for _, u := range g.GetUrls() {
		pu, err := url.Parse(u.GetUrl())
		if err != nil || pu.Query().Get("X-Amz-Signature") == "" {
			t.Fatal("a part URL carries no signature")
		}
		signatures = append(signatures, pu.Query().Get("X-Amz-Signature"))
	}
	byNumber := map[int32]*lakepb.PartUrl{}
	for _, u := range g.GetUrls() {
		byNumber[u.GetNumber()] = u
	}

	// Part 2 with other bytes: the gateway checks the signed checksum.
	wrong := bytes.Clone(p2)
	wrong[100] ^= 0xff
	if code := httpPut(t, hc, byNumber[2], wrong); code/100 != 4 {
		t.Errorf("part 2 with wrong bytes: status %d, want 4xx", code)
	}
	// Part 1's URL does not take part 2's bytes either.
	if code := httpPut(t, hc, byNumber[1], p2); code/100 != 4 {
		t.Errorf("part 2's bytes on part 1's URL: status %d, want 4xx", code)
	}
	if code := httpPut(t, hc, byNumber[1], p1); code != http.StatusOK {
		t.Fatalf("part 1: status %d", code)
	}

	complete := &lakepb.UploadCompleteRequest{Table: "clips", Key: g.GetKey(), UploadId: g.GetUploadId(), Size: ptr(int64(len(data))), Sha256: hexOf(data), ContentType: "video/mp4"}
	var file lakepb.UploadedFile
	err = wire.FromStatus(flightrpc.Action(ctx, m.fc, wire.ActionUploadComplete, complete, &file))
	if !errors.Is(err, wire.ErrUploadIncomplete) || status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "[2]") {
		t.Fatalf("complete with part 2 missing: %v, want FailedPrecondition naming part 2", err)
	}
	// A size that does not fit the parts is refused the same way.
	short := &lakepb.UploadCompleteRequest{Table: "clips", Key: g.GetKey(), UploadId: g.GetUploadId(), Size: ptr(int64(len(p1) - 1)), Sha256: hexOf(data)}
	if err := wire.FromStatus(flightrpc.Action(ctx, m.fc, wire.ActionUploadComplete, short, &file)); !errors.Is(err, wire.ErrUploadIncomplete) {
		t.Fatalf("complete with a size the parts do not make: %v", err)
	}

	// Fresh URLs for part 2, with a short life.
	var renewed lakepb.UploadUrls
	err = flightrpc.Action(ctx, m.fc, wire.ActionUploadRenew, &lakepb.UploadRenewRequest{
		Table: "clips", Key: g.GetKey(), UploadId: g.GetUploadId(), Parts: []*lakepb.UploadPart{{Number: 2, Sha256: hexOf(p2)}}, ExpiresMicros: ptr(int64(time.Minute / time.Microsecond)),
	}, &renewed)
	if err != nil || len(renewed.GetUrls()) != 1 || renewed.GetUrls()[0].GetNumber() != 2 {
		t.Fatalf("renew: %d URLs, %v", len(renewed.GetUrls()), err)
	}
	if pu, err := url.Parse(renewed.GetUrls()[0].GetUrl()); err == nil {
		signatures = append(signatures, pu.Query().Get("X-Amz-Signature"))
	}
	if code := httpPut(t, hc, renewed.GetUrls()[0], p2); code != http.StatusOK {
		t.Fatalf("part 2 through the renewed URL: status %d", code)
	}
	if err := flightrpc.Action(ctx, m.fc, wire.ActionUploadComplete, complete, &file); err != nil {
		t.Fatal(err)
	}
	if file.GetKey() != g.GetKey() || file.GetSize() != int64(len(data)) || file.GetSha256() != hexOf(data) || file.GetContentType() != "video/mp4" || file.GetEtag() == "" {
		t.Fatalf("completed: %v", &file)
	}
	got, err := objects.ReadAll(ctx, m.store, g.GetKey())
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the object is not the file: %v", err)
	}
	// Completing again (a lost answer, retried) answers the same file.
	var again lakepb.UploadedFile
	if err := flightrpc.Action(ctx, m.fc, wire.ActionUploadComplete, complete, &again); err != nil || again.GetKey() != file.GetKey() || again.GetSize() != file.GetSize() {
		t.Fatalf("complete again: %v, %v", &again, err)
	}

	// The FILE value makes a row.
	v := wire.FileValue{Key: file.GetKey(), Size: file.GetSize(), SHA256: file.GetSha256(), ContentType: file.GetContentType(), ETag: file.GetEtag(), UploadedAt: time.UnixMicro(file.GetUploadedAtUnixMicros())}
	rec := wiretest.FileRows([]string{"clip.mp4"}, []wire.FileValue{v})
	defer rec.Release()
	res, err := flightrpc.Append(ctx, m.fc, &lakepb.Append{Table: "clips", CommitId: "granted-1"}, rec.Schema(), []arrow.RecordBatch{rec})
	if err != nil || res.GetVersion() != 1 {
		t.Fatalf("append of the granted file: %v, %v", res, err)
	}

	// Renewing or completing an upload that is gone: not found.
	err = wire.FromStatus(flightrpc.Action(ctx, m.fc, wire.ActionUploadRenew, &lakepb.UploadRenewRequest{Table: "clips", Key: g.GetKey(), UploadId: g.GetUploadId()}, &renewed))
	if !errors.Is(err, wire.ErrUploadNotFound) || status.Code(err) != codes.NotFound {
		t.Errorf("renew of a completed upload: %v, want NotFound", err)
	}
	// Asking for URLs longer than --upload-url-expiry: refused.
	err = wire.FromStatus(flightrpc.Action(ctx, m.fc, wire.ActionUploadGrant, &lakepb.UploadGrantRequest{
		Table: "clips", FileName: "x", Size: 1, Sha256: hexOf([]byte("x")), ExpiresMicros: ptr(int64(time.Hour / time.Microsecond)),
	}, &g))
	if !errors.Is(err, wire.ErrInvalidRequest) {
		t.Errorf("a grant of hour-long URLs: %v, want InvalidArgument", err)
	}

	logs := m.logs.String()
	if !strings.Contains(logs, "upload granted") {
		t.Fatal("the service logged no grant; the log check below would prove nothing")
	}
	for _, sig := range signatures {
		if sig == "" || strings.Contains(logs, sig) {
			t.Fatal("a part URL's signature is in the service's log, or a URL had none")
		}
	}
}

// An empty file is one empty part.
func TestUploadGrantEmptyFile(t *testing.T) {
	m := newS3Meta(t)
	ctx := context.Background()
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	var g lakepb.UploadGrant
	if err := flightrpc.Action(ctx, m.fc, wire.ActionUploadGrant, &lakepb.UploadGrantRequest{
		Table: "clips", FileName: "empty", Size: 0, Sha256: hexOf(nil), Parts: []*lakepb.UploadPart{{Number: 1, Sha256: hexOf(nil)}},
	}, &g); err != nil {
		t.Fatal(err)
	}
	if g.GetPartCount() != 1 || len(g.GetUrls()) != 1 {
		t.Fatalf("grant of an empty file: %d parts, %d URLs", g.GetPartCount(), len(g.GetUrls()))
	}
	if code := httpPut(t, hc, g.GetUrls()[0], nil); code != http.StatusOK {
		t.Fatalf("the empty part: status %d", code)
	}
	var file lakepb.UploadedFile
	if err := flightrpc.Action(ctx, m.fc, wire.ActionUploadComplete, &lakepb.UploadCompleteRequest{Table: "clips", Key: g.GetKey(), UploadId: g.GetUploadId(), Size: ptr(int64(0)), Sha256: hexOf(nil)}, &file); err != nil {
		t.Fatal(err)
	}
	if info, err := m.store.Stat(ctx, g.GetKey()); err != nil || info.Size != 0 {
		t.Fatalf("the empty object: %+v, %v", info, err)
	}
}

// The mode lake.discover reports: presigned on S3 unless the operator
// allows direct uploads, local on a local stage.
func TestUploadMode(t *testing.T) {
	m := newS3Meta(t)
	if mode, ps := UploadMode(&lakepb.StageDescriptor{Kind: objects.KindS3}, m.store, false); mode != UploadPresigned || ps != 5<<20 {
		t.Errorf("S3: %s, %d", mode, ps)
	}
	if mode, _ := UploadMode(&lakepb.StageDescriptor{Kind: objects.KindS3}, m.store, true); mode != UploadDirect {
		t.Errorf("S3 with direct uploads: %s", mode)
	}
	f := newFixture(t)
	if mode, ps := UploadMode(&lakepb.StageDescriptor{Kind: objects.KindLocal}, f.stage, false); mode != UploadLocal || ps != 0 {
		t.Errorf("local: %s, %d", mode, ps)
	}
}

// On a local stage a grant names the key; the client writes the file
// there, and completion answers the FILE value with the SHA-256 the
// service read, refusing a claim the bytes do not bear out.
func TestUploadGrantLocal(t *testing.T) {
	f := newFixture(t)
	f.createTable("clips")
	ctx := context.Background()
	content := []byte("local bytes")
	var g lakepb.UploadGrant
	if err := flightrpc.Action(ctx, f.fc, wire.ActionUploadGrant, &lakepb.UploadGrantRequest{Table: "clips", FileName: "a.bin", Size: int64(len(content)), Sha256: hexOf(content)}, &g); err != nil {
		t.Fatal(err)
	}
	if g.GetMode() != UploadLocal || g.GetUploadId() != "" || len(g.GetUrls()) != 0 || !strings.HasPrefix(g.GetKey(), "objects/") {
		t.Fatalf("local grant: %v", &g)
	}
	complete := &lakepb.UploadCompleteRequest{Table: "clips", Key: g.GetKey(), Size: ptr(int64(len(content))), Sha256: hexOf(content)}
	var file lakepb.UploadedFile
	if err := wire.FromStatus(flightrpc.Action(ctx, f.fc, wire.ActionUploadComplete, complete, &file)); !errors.Is(err, wire.ErrObjectMissing) {
		t.Fatalf("complete before the file is there: %v", err)
	}
	if _, err := f.stage.Put(ctx, g.GetKey(), bytes.NewReader(content), objects.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := flightrpc.Action(ctx, f.fc, wire.ActionUploadComplete, complete, &file); err != nil || file.GetSha256() != hexOf(content) || file.GetSize() != int64(len(content)) {
		t.Fatalf("complete: %v, %v", &file, err)
	}
	lie := &lakepb.UploadCompleteRequest{Table: "clips", Key: g.GetKey(), Sha256: hexOf([]byte("other"))}
	if err := wire.FromStatus(flightrpc.Action(ctx, f.fc, wire.ActionUploadComplete, lie, &file)); !errors.Is(err, wire.ErrChecksumMismatch) {
		t.Fatalf("complete with a false sha256: %v", err)
	}
	if err := wire.FromStatus(flightrpc.Action(ctx, f.fc, wire.ActionUploadComplete, &lakepb.UploadCompleteRequest{Table: "clips", Key: g.GetKey(), UploadId: "x"}, &file)); !errors.Is(err, wire.ErrInvalidRequest) {
		t.Fatalf("an upload id on a local stage: %v", err)
	}
}

// s3Upload is a file as a client of an S3 stage with 5 MiB parts sends
// it: its whole sha256, its parts and their digest.
type s3Upload struct {
	data   []byte
	parts  [][]byte
	digest string
}

func newS3Upload(data []byte) s3Upload {
	u := s3Upload{data: data}
	h := sha256.New()
	for off := 0; off == 0 || off < len(data); off += 5 << 20 {
		p := data[off:min(off+5<<20, len(data))]
		u.parts = append(u.parts, p)
		s := sha256.Sum256(p)
		h.Write(s[:])
	}
	u.digest = hex.EncodeToString(h.Sum(nil))
	return u
}

// request is a grant request of u that claims sum as its sha256.
func (u s3Upload) request(sum string) *lakepb.UploadGrantRequest {
	req := &lakepb.UploadGrantRequest{Table: "clips", FileName: "clip.bin", Size: int64(len(u.data)), Sha256: sum, PartDigest: u.digest, ContentType: "video/mp4"}
	for i, p := range u.parts {
		req.Parts = append(req.Parts, &lakepb.UploadPart{Number: int32(i + 1), Sha256: hexOf(p)})
	}
	return req
}

func (m *s3Meta) grant(t *testing.T, req *lakepb.UploadGrantRequest) *lakepb.UploadGrant {
	t.Helper()
	var g lakepb.UploadGrant
	if err := flightrpc.Action(t.Context(), m.fc, wire.ActionUploadGrant, req, &g); err != nil {
		t.Fatalf("grant: %v", err)
	}
	return &g
}

// upload grants u claiming sum, PUTs its parts and completes it with sum.
func (m *s3Meta) upload(t *testing.T, hc *http.Client, u s3Upload, sum string) *lakepb.UploadedFile {
	t.Helper()
	req := u.request(sum)
	req.NoDedup = true
	g := m.grant(t, req)
	for i, pu := range g.GetUrls() {
		if code := httpPut(t, hc, pu, u.parts[i]); code != http.StatusOK {
			t.Fatalf("part %d: status %d", i+1, code)
		}
	}
	var file lakepb.UploadedFile
	complete := &lakepb.UploadCompleteRequest{Table: "clips", Key: g.GetKey(), UploadId: g.GetUploadId(), Size: ptr(int64(len(u.data))), Sha256: sum, ContentType: "video/mp4"}
	if err := flightrpc.Action(t.Context(), m.fc, wire.ActionUploadComplete, complete, &file); err != nil {
		t.Fatalf("complete: %v", err)
	}
	return &file
}

// pendingUploads counts the multipart uploads the stage holds.
func (m *s3Meta) pendingUploads(t *testing.T) int {
	t.Helper()
	n := 0
	for _, err := range m.store.Leftovers(t.Context(), time.Now().Add(time.Hour)) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

// Dedup on S3: a completed upload's part sums, as the gateway checked
// them, are evidence; a second grant with the same sha256 and part
// digest answers the first object's FILE value and starts nothing; a
// grant without sha256 for that size is told to hash first and starts
// nothing; another part digest or no_dedup gets an ordinary grant. A
// liar who completed other bytes under the genuine file's sha256 is never
// answered, neither to the genuine file nor to an honest uploader of the
// liar's bytes.
func TestUploadDedupOnS3(t *testing.T) {
	m := newS3Meta(t)
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()

	genuine := newS3Upload(randomBytes(t, 5<<20+1234))
	first := m.upload(t, hc, genuine, hexOf(genuine.data))
	if n := m.pendingUploads(t); n != 0 {
		t.Fatalf("%d uploads pending after the completion", n)
	}
	g := m.grant(t, genuine.request(hexOf(genuine.data)))
	if !proto.Equal(g.GetExisting(), first) || g.GetKey() != "" || g.GetUploadId() != "" || len(g.GetUrls()) != 0 || g.GetHashFirst() {
		t.Fatalf("a grant of the same content: %v, want existing %v", g, first)
	}
	if logs := m.logs.String(); !strings.Contains(logs, "upload deduplicated") || !strings.Contains(logs, first.GetKey()) || strings.Contains(logs, "X-Amz-Signature") {
		t.Errorf("the log has no dedup line naming the key, or a URL:\n%s", logs)
	}
	probe := &lakepb.UploadGrantRequest{Table: "clips", FileName: "clip.bin", Size: int64(len(genuine.data))}
	if g := m.grant(t, probe); !g.GetHashFirst() || g.GetKey() != "" || g.GetUploadId() != "" || g.GetExisting() != nil {
		t.Fatalf("a grant without sha256 for a known size: %v, want hash_first", g)
	}
	if n := m.pendingUploads(t); n != 0 {
		t.Fatalf("hash_first and a dedup hit left %d uploads pending", n)
	}
	probe.Size++
	if g := m.grant(t, probe); !isFreshGrant(g) || g.GetUploadId() == "" {
		t.Errorf("a grant without sha256 for an unknown size: %v, want an ordinary grant", g)
	}
	otherDigest := genuine.request(hexOf(genuine.data))
	otherDigest.PartDigest = hexOf([]byte("other parts"))
	noDigest := genuine.request(hexOf(genuine.data))
	noDigest.PartDigest = ""
	noDedup := genuine.request(hexOf(genuine.data))
	noDedup.NoDedup = true
	for name, req := range map[string]*lakepb.UploadGrantRequest{"another part digest": otherDigest, "no part digest": noDigest, "no_dedup": noDedup} {
		if g := m.grant(t, req); !isFreshGrant(g) || g.GetUploadId() == "" {
			t.Errorf("%s: %v, want an ordinary grant", name, g)
		}
	}

	// The liar: other bytes of the same size, completed under another
	// file's sha256 (the gateway checks parts, not the whole).
	target := newS3Upload(randomBytes(t, 5<<20+99))
	liarBytes := newS3Upload(randomBytes(t, 5<<20+99))
	lie := m.upload(t, hc, liarBytes, hexOf(target.data))
	if lie.GetSha256() != hexOf(target.data) {
		t.Fatalf("the liar's completion: %v", lie)
	}
	if g := m.grant(t, target.request(hexOf(target.data))); !isFreshGrant(g) {
		t.Errorf("the genuine file after the liar: %v, want an ordinary grant", g)
	}
	if g := m.grant(t, liarBytes.request(hexOf(liarBytes.data))); !isFreshGrant(g) {
		t.Errorf("an honest uploader of the liar's bytes: %v, want an ordinary grant", g)
	}
	// The genuine file uploaded for real is answered, and with its own object.
	genuineFile := m.upload(t, hc, target, hexOf(target.data))
	if g := m.grant(t, target.request(hexOf(target.data))); !proto.Equal(g.GetExisting(), genuineFile) {
		t.Errorf("the genuine file once uploaded: %v, want existing %v", g, genuineFile)
	}
}

// Completing again after a lost answer records nothing new: a retry that
// claims another sha256 makes no entry for it.
func TestUploadCompleteAgainRecordsNoWrongEntry(t *testing.T) {
	m := newS3Meta(t)
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	// Two parts: a multipart upload (one part would be a single PUT,
	// whose completion checks the claim against the object).
	u := newS3Upload(randomBytes(t, 5<<20+1000))
	req := u.request(hexOf(u.data))
	g := m.grant(t, req)
	if g.GetUploadId() == "" {
		t.Fatal("a file of two parts was granted no multipart upload")
	}
	for i, pu := range g.GetUrls() {
		if code := httpPut(t, hc, pu, u.parts[i]); code != http.StatusOK {
			t.Fatalf("part %d: status %d", i+1, code)
		}
	}
	complete := &lakepb.UploadCompleteRequest{Table: "clips", Key: g.GetKey(), UploadId: g.GetUploadId(), Size: ptr(int64(len(u.data))), Sha256: hexOf(u.data)}
	var file lakepb.UploadedFile
	if err := flightrpc.Action(t.Context(), m.fc, wire.ActionUploadComplete, complete, &file); err != nil {
		t.Fatal(err)
	}
	falseSum := hexOf([]byte("a later, false claim"))
	complete.Sha256 = falseSum
	if err := flightrpc.Action(t.Context(), m.fc, wire.ActionUploadComplete, complete, &file); err != nil {
		t.Fatal(err)
	}
	if cs, err := m.svc.ix.dedupCandidates(mustPartsEvidence(t, int64(len(u.data)), falseSum, 5<<20, u.digest)); err != nil || len(cs) != 0 {
		t.Errorf("the retry recorded %d entries under its claim (%v)", len(cs), err)
	}
	if g := m.grant(t, u.request(hexOf(u.data))); g.GetExisting().GetKey() != file.GetKey() {
		t.Errorf("the first completion's entry: %v", g)
	}
}

// list_parts answers the parts the stage holds, with the sums it checked.
func TestUploadRenewListsHeldParts(t *testing.T) {
	m := newS3Meta(t)
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	u := newS3Upload(randomBytes(t, 10<<20+7))
	g := m.grant(t, u.request(hexOf(u.data)))
	renew := func() []*lakepb.HeldPart {
		t.Helper()
		var out lakepb.UploadUrls
		if err := flightrpc.Action(t.Context(), m.fc, wire.ActionUploadRenew, &lakepb.UploadRenewRequest{Table: "clips", Key: g.GetKey(), UploadId: g.GetUploadId(), ListParts: true}, &out); err != nil {
			t.Fatal(err)
		}
		return out.GetHeld()
	}
	if held := renew(); len(held) != 0 {
		t.Fatalf("before any PUT: %v", held)
	}
	for _, i := range []int{2, 0} {
		if code := httpPut(t, hc, g.GetUrls()[i], u.parts[i]); code != http.StatusOK {
			t.Fatalf("part %d: status %d", i+1, code)
		}
	}
	held := renew()
	want := []*lakepb.HeldPart{{Number: 1, Size: 5 << 20, Sha256: hexOf(u.parts[0])}, {Number: 3, Size: 7, Sha256: hexOf(u.parts[2])}}
	if len(held) != len(want) {
		t.Fatalf("held %v, want %v", held, want)
	}
	for i := range want {
		if !proto.Equal(held[i], want[i]) {
			t.Errorf("held part %d: %v, want %v", i, held[i], want[i])
		}
	}
	// Without list_parts nothing is listed.
	var out lakepb.UploadUrls
	if err := flightrpc.Action(t.Context(), m.fc, wire.ActionUploadRenew, &lakepb.UploadRenewRequest{Table: "clips", Key: g.GetKey(), UploadId: g.GetUploadId()}, &out); err != nil || len(out.GetHeld()) != 0 {
		t.Errorf("renew without list_parts: %v, %v", &out, err)
	}
}

// A file of one part with its sha256 is granted a single PUT: no upload
// id, one URL of number 0, nothing started at the stage. The gateway
// refuses other bytes on it; completion (no upload id) refuses a missing
// object, another size and another sha256, recording nothing; the true
// claim completes, and a second grant of the same content is answered
// with that object. The renewed URL writes nothing where the object is,
// aborting has nothing to do, and no URL reaches the log.
func TestUploadSinglePutOnS3(t *testing.T) {
	m := newS3Meta(t)
	ctx := t.Context()
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	u := newS3Upload(randomBytes(t, 300<<10))
	sum := hexOf(u.data)
	g := m.grant(t, u.request(sum))
	if g.GetUploadId() != "" || g.GetPartCount() != 1 || len(g.GetUrls()) != 1 || g.GetUrls()[0].GetNumber() != 0 ||
		g.GetKey() == "" || g.GetMode() != UploadPresigned || g.GetExpiresAtUnixMicros() <= time.Now().UnixMicro() {
		t.Fatalf("grant of one part: %v, want a single PUT", g)
	}
	if n := m.pendingUploads(t); n != 0 {
		t.Fatalf("a single-PUT grant left %d multipart uploads", n)
	}
	put := g.GetUrls()[0]
	signatures := []string{signatureOf(t, put)}
	complete := func(size int64, sha string) (*lakepb.UploadedFile, error) {
		var f lakepb.UploadedFile
		err := wire.FromStatus(flightrpc.Action(ctx, m.fc, wire.ActionUploadComplete, &lakepb.UploadCompleteRequest{
			Table: "clips", Key: g.GetKey(), Size: ptr(size), Sha256: sha, ContentType: "video/mp4"}, &f))
		return &f, err
	}
	size := int64(len(u.data))
	if _, err := complete(size, sum); !errors.Is(err, wire.ErrObjectMissing) {
		t.Fatalf("complete before the PUT: %v, want ErrObjectMissing", err)
	}
	wrong := bytes.Clone(u.data)
	wrong[5] ^= 1
	if code := httpPut(t, hc, put, wrong); code/100 != 4 {
		t.Fatalf("other bytes: status %d, want 4xx", code)
	}
	if code := httpPut(t, hc, put, u.data); code != http.StatusOK {
		t.Fatalf("the PUT: status %d", code)
	}
	falseSum := hexOf([]byte("not these bytes"))
	if _, err := complete(size, falseSum); !errors.Is(err, wire.ErrChecksumMismatch) {
		t.Fatalf("a completion claiming another sha256: %v, want ErrChecksumMismatch", err)
	}
	if _, err := complete(size-1, sum); !errors.Is(err, wire.ErrSizeMismatch) {
		t.Fatalf("a completion claiming another size: %v, want ErrSizeMismatch", err)
	}
	for _, e := range []dedupEvidence{mustReadEvidence(t, size, falseSum), mustReadEvidence(t, size-1, sum), mustReadEvidence(t, size, sum)} {
		if cs, err := m.svc.ix.dedupCandidates(e); err != nil || len(cs) != 0 {
			t.Fatalf("refused completions recorded %d entries (%v)", len(cs), err)
		}
	}
	if _, ok := m.svc.ix.dedupOf(g.GetKey()); ok {
		t.Fatal("refused completions recorded the object")
	}
	file, err := complete(size, sum)
	if err != nil || file.GetKey() != g.GetKey() || file.GetSize() != size || file.GetSha256() != sum || file.GetContentType() != "video/mp4" || file.GetEtag() == "" {
		t.Fatalf("complete: %v, %v", file, err)
	}
	if got, err := objects.ReadAll(ctx, m.store, g.GetKey()); err != nil || !bytes.Equal(got, u.data) {
		t.Fatalf("the object is not the file: %v", err)
	}
	if again, err := complete(size, sum); err != nil || !proto.Equal(again, file) {
		t.Fatalf("complete again: %v, %v; want %v", again, err, file)
	}
	other := u.request(sum)
	other.FileName = "copy.bin"
	if d := m.grant(t, other); !proto.Equal(d.GetExisting(), file) || d.GetKey() != "" || len(d.GetUrls()) != 0 {
		t.Fatalf("a second grant of the content: %v, want existing %v", d, file)
	}
	probe := &lakepb.UploadGrantRequest{Table: "clips", FileName: "x", Size: size}
	if d := m.grant(t, probe); !d.GetHashFirst() {
		t.Errorf("a grant without sha256 of the size: %v, want hash_first", d)
	}

	// Renewed: a URL of part 0 again, which cannot write the key twice.
	var renewed lakepb.UploadUrls
	if err := flightrpc.Action(ctx, m.fc, wire.ActionUploadRenew, &lakepb.UploadRenewRequest{
		Table: "clips", Key: g.GetKey(), Parts: []*lakepb.UploadPart{{Number: 0, Sha256: sum}}, ContentType: "video/mp4",
	}, &renewed); err != nil || len(renewed.GetUrls()) != 1 || renewed.GetUrls()[0].GetNumber() != 0 {
		t.Fatalf("renew of the single PUT: %v, %v", &renewed, err)
	}
	signatures = append(signatures, signatureOf(t, renewed.GetUrls()[0]))
	if code := httpPut(t, hc, renewed.GetUrls()[0], u.data); code != http.StatusPreconditionFailed {
		t.Errorf("a second PUT of the key: status %d, want 412", code)
	}
	for name, bad := range map[string]*lakepb.UploadRenewRequest{
		"part 1":     {Table: "clips", Key: g.GetKey(), Parts: []*lakepb.UploadPart{{Number: 1, Sha256: sum}}},
		"no part":    {Table: "clips", Key: g.GetKey()},
		"list_parts": {Table: "clips", Key: g.GetKey(), Parts: []*lakepb.UploadPart{{Number: 0, Sha256: sum}}, ListParts: true},
	} {
		if err := wire.FromStatus(flightrpc.Action(ctx, m.fc, wire.ActionUploadRenew, bad, &renewed)); !errors.Is(err, wire.ErrInvalidRequest) {
			t.Errorf("renew without an upload id, %s: %v, want ErrInvalidRequest", name, err)
		}
	}
	var aborted lakepb.UploadAborted
	if err := flightrpc.Action(ctx, m.fc, wire.ActionUploadAbort, &lakepb.UploadAbortRequest{Table: "clips", Key: g.GetKey()}, &aborted); err != nil {
		t.Fatalf("abort without an upload id: %v", err)
	}
	if info, err := m.store.Stat(ctx, g.GetKey()); err != nil || info.Size != size {
		t.Fatalf("the object after the abort: %+v, %v", info, err)
	}
	// no_dedup, or a part 1 of another sum: not the same request; the
	// first is a fresh single PUT, the second a multipart upload.
	nd := u.request(sum)
	nd.NoDedup = true
	if d := m.grant(t, nd); d.GetUploadId() != "" || len(d.GetUrls()) != 1 || d.GetKey() == g.GetKey() {
		t.Errorf("no_dedup: %v, want a single PUT at a new key", d)
	}
	mixed := u.request(sum)
	mixed.NoDedup, mixed.Parts[0].Sha256 = true, falseSum
	if d := m.grant(t, mixed); d.GetUploadId() == "" {
		t.Errorf("part 1 of another sum: %v, want a multipart upload", d)
	}

	logs := m.logs.String()
	if !strings.Contains(logs, "single_put") {
		t.Fatal("the service logged no single PUT; the log check below would prove nothing")
	}
	for _, sig := range signatures {
		if strings.Contains(logs, sig) {
			t.Fatal("a single PUT URL's signature is in the service's log")
		}
	}
}

func signatureOf(t *testing.T, pu *lakepb.PartUrl) string {
	t.Helper()
	u, err := url.Parse(pu.GetUrl())
	if err != nil || u.Query().Get("X-Amz-Signature") == "" {
		t.Fatal("a URL carries no signature")
	}
	return u.Query().Get("X-Amz-Signature")
}
