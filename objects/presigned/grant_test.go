package presigned_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/s3"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// granter stands in for the metadata service: it answers the three grant
// actions with the S3 store's objects.Granter, as roles/meta does, plus
// the dedup answers of the protocol (hash_first for a size it holds, the
// existing object for a sum it completed), and single-PUT grants for a
// file of one part with its sum, as roles/meta chooses them. It counts
// what it was asked and the multipart uploads it started.
type granter struct {
	s *s3.Store

	mu    sync.Mutex
	done  map[string]*lakepb.UploadedFile // sha256 + part digest → completed object
	sizes map[int64]bool

	grants, renews, lists atomic.Int32
	multiparts, singles   atomic.Int32 // grants of each kind
}

func newGranter(s *s3.Store) *granter {
	return &granter{s: s, done: map[string]*lakepb.UploadedFile{}, sizes: map[int64]bool{}}
}

func expiry(e *int64) time.Duration {
	if e == nil {
		return time.Minute
	}
	return time.Duration(*e) * time.Microsecond
}

func (g *granter) sign(ctx context.Context, key, id string, parts []*lakepb.UploadPart, e *int64) ([]*lakepb.PartUrl, int64, error) {
	var urls []*lakepb.PartUrl
	at := time.Now().Add(expiry(e))
	for _, p := range parts {
		u, h, err := g.s.PresignPart(ctx, key, id, p.GetNumber(), p.GetSha256(), expiry(e))
		if err != nil {
			return nil, 0, err
		}
		urls = append(urls, &lakepb.PartUrl{Number: p.GetNumber(), Url: u, Headers: h})
	}
	return urls, at.UnixMicro(), nil
}

func (g *granter) Grant(ctx context.Context, req *lakepb.UploadGrantRequest) (*lakepb.UploadGrant, error) {
	g.grants.Add(1)
	g.mu.Lock()
	existing, held := g.done[req.GetSha256()+req.GetPartDigest()], g.sizes[req.GetSize()]
	g.mu.Unlock()
	switch {
	case req.GetNoDedup():
	case req.GetSha256() == "" && held:
		return &lakepb.UploadGrant{HashFirst: true}, nil
	case existing != nil:
		return &lakepb.UploadGrant{Existing: existing}, nil
	}
	key := objects.NewObjectKey(req.GetFileName(), time.Now())
	if parts := req.GetParts(); req.GetSha256() != "" && req.GetSize() <= g.s.GrantPartSize() &&
		(len(parts) == 0 || len(parts) == 1 && parts[0].GetNumber() == 1 && parts[0].GetSha256() == req.GetSha256()) {
		g.singles.Add(1)
		u, h, err := g.s.PresignPutObject(ctx, key, req.GetSha256(), req.GetContentType(), expiry(req.ExpiresMicros))
		if err != nil {
			return nil, err
		}
		return &lakepb.UploadGrant{Key: key, Mode: "presigned", PartSize: g.s.GrantPartSize(), PartCount: 1,
			Urls: []*lakepb.PartUrl{{Number: 0, Url: u, Headers: h}}, ExpiresAtUnixMicros: time.Now().Add(expiry(req.ExpiresMicros)).UnixMicro()}, nil
	}
	g.multiparts.Add(1)
	id, err := g.s.CreateGrant(ctx, key, req.GetContentType())
	if err != nil {
		return nil, err
	}
	urls, at, err := g.sign(ctx, key, id, req.GetParts(), req.ExpiresMicros)
	if err != nil {
		return nil, err
	}
	return &lakepb.UploadGrant{Key: key, UploadId: id, Mode: "presigned", PartSize: g.s.GrantPartSize(), Urls: urls, ExpiresAtUnixMicros: at}, nil
}

func (g *granter) parts(ctx context.Context, key, id string) ([]objects.GrantPart, error) {
	parts, err := g.s.GrantParts(ctx, key, id)
	if errors.Is(err, objects.ErrNotFound) {
		return nil, wire.ErrUploadNotFound
	}
	return parts, err
}

func (g *granter) Renew(ctx context.Context, req *lakepb.UploadRenewRequest) (*lakepb.UploadUrls, error) {
	g.renews.Add(1)
	if req.GetUploadId() == "" {
		p := req.GetParts()
		if len(p) != 1 || p[0].GetNumber() != 0 {
			return nil, wire.ErrInvalidRequest
		}
		u, h, err := g.s.PresignPutObject(ctx, req.GetKey(), p[0].GetSha256(), req.GetContentType(), expiry(req.ExpiresMicros))
		if err != nil {
			return nil, err
		}
		return &lakepb.UploadUrls{Urls: []*lakepb.PartUrl{{Number: 0, Url: u, Headers: h}},
			ExpiresAtUnixMicros: time.Now().Add(expiry(req.ExpiresMicros)).UnixMicro()}, nil
	}
	parts, err := g.parts(ctx, req.GetKey(), req.GetUploadId())
	if err != nil {
		return nil, err
	}
	urls, at, err := g.sign(ctx, req.GetKey(), req.GetUploadId(), req.GetParts(), req.ExpiresMicros)
	if err != nil {
		return nil, err
	}
	out := &lakepb.UploadUrls{Urls: urls, ExpiresAtUnixMicros: at}
	if req.GetListParts() {
		g.lists.Add(1)
		for _, p := range parts {
			out.Held = append(out.Held, &lakepb.HeldPart{Number: p.Number, Size: p.Size, Sha256: p.SHA256})
		}
	}
	return out, nil
}

func (g *granter) Complete(ctx context.Context, req *lakepb.UploadCompleteRequest) (*lakepb.UploadedFile, error) {
	if req.GetUploadId() == "" {
		return g.completeSingle(ctx, req)
	}
	parts, err := g.parts(ctx, req.GetKey(), req.GetUploadId())
	if err != nil {
		return nil, err
	}
	info, err := g.s.CompleteGrant(ctx, req.GetKey(), req.GetUploadId(), parts)
	if err != nil {
		return nil, err
	}
	f := &lakepb.UploadedFile{Key: req.GetKey(), Size: info.Size, Sha256: req.GetSha256(), Etag: info.ETag,
		ContentType: req.GetContentType(), UploadedAtUnixMicros: info.ModTime.UnixMicro()}
	var sums [][32]byte
	for _, p := range parts {
		sums = append(sums, rawSum(p.SHA256))
	}
	g.mu.Lock()
	g.done[req.GetSha256()+digestOf(sums)] = f
	g.sizes[info.Size] = true
	g.mu.Unlock()
	return f, nil
}

// completeSingle checks a single PUT's object against the claim, as
// roles/meta does, and records it.
func (g *granter) completeSingle(ctx context.Context, req *lakepb.UploadCompleteRequest) (*lakepb.UploadedFile, error) {
	info, err := g.s.StatGranted(ctx, req.GetKey())
	if errors.Is(err, objects.ErrNotFound) {
		return nil, wire.ErrObjectMissing
	}
	if err != nil {
		return nil, err
	}
	if info.Size != req.GetSize() {
		return nil, wire.ErrSizeMismatch
	}
	if info.SHA256 != req.GetSha256() {
		return nil, wire.ErrChecksumMismatch
	}
	f := &lakepb.UploadedFile{Key: req.GetKey(), Size: info.Size, Sha256: info.SHA256, Etag: info.ETag,
		ContentType: req.GetContentType(), UploadedAtUnixMicros: info.ModTime.UnixMicro()}
	g.mu.Lock()
	g.done[req.GetSha256()+digestOf([][32]byte{rawSum(info.SHA256)})] = f
	g.sizes[info.Size] = true
	g.mu.Unlock()
	return f, nil
}
