package meta

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// Upload grants (DESIGN §12): on an S3 stage the leader starts each
// upload at a key it chooses, signs one URL per part bound to the part's
// number and SHA-256, and completes the upload after checking the parts
// the stage holds. A client needs only a lake token. The service keeps no
// state per grant: the key and the upload id are the grant, and the
// checks at completion are against the stage's own list of parts.
//
// The FILE value's sha256 is the client's claim, as for every append
// (lake verify checks it); each part's bytes, though, were checked by the
// stage against the SHA-256 its URL was signed with.
//
// A file of one part whose sha256 the request carries is granted a single
// PUT instead (singlePut): one presigned PutObject bound to that sha256
// as S3's full-object checksum and as the object's metadata, to the
// content type, and put-if-absent, so the key is written once and only
// with those bytes. There is no upload id; completion checks the object
// S3 holds at the key against the request's size and sha256, so that
// FILE value's sha256 is no mere claim: S3 checked the bytes against it.

// Upload modes, as lake.discover names them.
const (
	// UploadPresigned: clients upload through grants (the S3 default).
	UploadPresigned = "presigned"
	// UploadDirect: the operator lets clients that hold their own stage
	// credentials upload with them; grants work as well.
	UploadDirect = "direct"
	// UploadLocal: clients write into the stage directory; a grant only
	// names the key.
	UploadLocal = "local"
)

// DefaultUploadURLExpiry is how long a part URL works unless the client
// asks for less; Config.UploadURLExpiry is also the most it may ask for.
const DefaultUploadURLExpiry = 15 * time.Minute

// maxGrantParts is the most parts one upload has (S3's limit).
const maxGrantParts = 10_000

// maxUploadNameLen and maxContentTypeLen bound the strings of a grant.
const (
	maxUploadNameLen  = 255
	maxContentTypeLen = 255
)

// UploadMode is what lake.discover says about uploads to store, the stage
// d describes: the mode and the part size of granted uploads. direct is
// the operator's consent to uploads with the clients' own credentials.
func UploadMode(d *lakepb.StageDescriptor, store objects.Store, direct bool) (string, int64) {
	if g, ok := store.(objects.Granter); ok {
		if direct {
			return UploadDirect, g.GrantPartSize()
		}
		return UploadPresigned, g.GrantPartSize()
	}
	if d.GetKind() == objects.KindLocal {
		return UploadLocal, 0
	}
	return UploadDirect, 0
}

// partCount is the number of parts of a file of size bytes.
func partCount(size, partSize int64) int64 {
	if size == 0 {
		return 1
	}
	return (size + partSize - 1) / partSize
}

// UploadGrant starts an upload of a file for the table (see
// lakepb.UploadGrantRequest). On a local stage the grant is the key
// alone. Unless the request says no_dedup, it first asks the dedup index
// (dedup.go): an object with the claimed content is answered as
// existing, and a request without sha256 for a size the index knows is
// answered hash_first; both start nothing.
func (s *Service) UploadGrant(ctx context.Context, req *lakepb.UploadGrantRequest) (*lakepb.UploadGrant, error) {
	expires, err := s.grantCheck(req)
	if err != nil {
		return nil, err
	}
	t, err := s.leaderTable(ctx, req.GetTable())
	if err != nil {
		return nil, err
	}
	key := objects.NewObjectKey(req.GetFileName(), time.Now())
	g, ok := s.store.(objects.Granter)
	if !ok {
		if s.cfg.Discover.GetKind() != objects.KindLocal {
			return nil, fmt.Errorf("%w: the stage %s grants no uploads", wire.ErrUnsupported, s.cfg.Discover.GetRootUri())
		}
		// Dedup (dedup.go): read evidence only, the local stage has no
		// part sums.
		if answer := s.dedupGrant(ctx, t, req, UploadLocal, 0); answer != nil {
			return answer, nil
		}
		return &lakepb.UploadGrant{Key: key, Mode: UploadLocal}, nil
	}
	partSize := g.GrantPartSize()
	count := partCount(req.GetSize(), partSize)
	if count > maxGrantParts {
		return nil, fmt.Errorf("%w: %d bytes make %d parts of %d bytes, at most %d", wire.ErrInvalidRequest, req.GetSize(), count, partSize, maxGrantParts)
	}
	for _, p := range req.GetParts() {
		if int64(p.GetNumber()) > count {
			return nil, fmt.Errorf("%w: part %d of a file of %d parts", wire.ErrInvalidRequest, p.GetNumber(), count)
		}
	}
	// Dedup (dedup.go) before anything is started: a hit or hash_first
	// leaves no upload behind.
	if answer := s.dedupGrant(ctx, t, req, UploadPresigned, partSize); answer != nil {
		return answer, nil
	}
	if singlePut(req, partSize) {
		u, h, err := g.PresignPutObject(ctx, key, req.GetSha256(), req.GetContentType(), expires)
		if err != nil {
			return nil, fmt.Errorf("meta: grant an upload to %q: %w", t.name, err)
		}
		s.log.Info("upload granted", "table", t.name, "key", key, "size", req.GetSize(), "parts", 1, "single_put", true)
		return &lakepb.UploadGrant{
			Key: key, Mode: UploadPresigned, PartSize: partSize, PartCount: 1,
			Urls:                []*lakepb.PartUrl{{Number: 0, Url: u, Headers: h}},
			ExpiresAtUnixMicros: time.Now().Add(expires).UnixMicro(),
		}, nil
	}
	id, err := g.CreateGrant(ctx, key, req.GetContentType())
	if err != nil {
		return nil, fmt.Errorf("meta: grant an upload to %q: %w", t.name, err)
	}
	urls, at, err := signParts(ctx, g, key, id, req.GetParts(), expires)
	if err != nil {
		if aerr := g.AbortGrant(context.WithoutCancel(ctx), key, id); aerr != nil {
			s.log.Warn("cannot abort a grant that failed; gc removes it", "key", key, "err", aerr)
		}
		return nil, fmt.Errorf("meta: grant an upload to %q: %w", t.name, err)
	}
	s.log.Info("upload granted", "table", t.name, "key", key, "size", req.GetSize(), "parts", count)
	return &lakepb.UploadGrant{
		Key: key, UploadId: id, Mode: UploadPresigned, PartSize: partSize, PartCount: int32(count),
		Urls: urls, ExpiresAtUnixMicros: at,
	}, nil
}

// singlePut tells whether a grant request on a stage of partSize parts
// gets a single PUT: it carries the file's sha256, the file is one part,
// and its parts name none or part 1 alone with that same sum (a one-part
// file's only part is the whole file).
func singlePut(req *lakepb.UploadGrantRequest, partSize int64) bool {
	if req.GetSha256() == "" || req.GetSize() > partSize {
		return false
	}
	switch parts := req.GetParts(); len(parts) {
	case 0:
		return true
	case 1:
		return parts[0].GetNumber() == 1 && parts[0].GetSha256() == req.GetSha256()
	}
	return false
}

// UploadRenew signs fresh URLs for parts of a granted upload the stage
// still holds, or the URL of a single-PUT grant (no upload id) again.
func (s *Service) UploadRenew(ctx context.Context, req *lakepb.UploadRenewRequest) (*lakepb.UploadUrls, error) {
	expires, err := s.renewCheck(req)
	if err != nil {
		return nil, err
	}
	if !s.canCommit() {
		return nil, errNotLeading
	}
	if _, err := s.table(ctx, req.GetTable()); err != nil {
		return nil, err
	}
	g, ok := s.store.(objects.Granter)
	if !ok {
		if req.GetUploadId() != "" || len(req.GetParts()) > 0 {
			return nil, fmt.Errorf("%w: the stage %s has no upload ids and no part URLs", wire.ErrInvalidRequest, s.cfg.Discover.GetRootUri())
		}
		return &lakepb.UploadUrls{}, nil
	}
	if req.GetUploadId() == "" {
		return s.renewSingle(ctx, g, req, expires)
	}
	// A resume asks for the parts the stage holds; a renewal of URLs only
	// needs the upload to be there, which one small request tells (the
	// list would be pages of parts for every URL of a long upload).
	var held []objects.GrantPart
	if req.GetListParts() {
		if held, err = grantParts(ctx, g, req.GetKey(), req.GetUploadId()); err != nil {
			return nil, err
		}
	} else if err := g.GrantHeld(ctx, req.GetKey(), req.GetUploadId()); errors.Is(err, objects.ErrNotFound) {
		return nil, fmt.Errorf("%w: at %s", wire.ErrUploadNotFound, req.GetKey())
	} else if err != nil {
		return nil, fmt.Errorf("meta: the upload at %s: %w", req.GetKey(), err)
	}
	urls, at, err := signParts(ctx, g, req.GetKey(), req.GetUploadId(), req.GetParts(), expires)
	if err != nil {
		return nil, fmt.Errorf("meta: renew part URLs of %s: %w", req.GetKey(), err)
	}
	out := &lakepb.UploadUrls{Urls: urls, ExpiresAtUnixMicros: at}
	if req.GetListParts() {
		out.Held = heldParts(held)
	}
	return out, nil
}

// renewSingle signs the single PUT of a grant without an upload id again:
// its one part, number 0, names the file's sha256. Renewing starts
// nothing, and the URL writes nothing where an object is already.
func (s *Service) renewSingle(ctx context.Context, g objects.Granter, req *lakepb.UploadRenewRequest, expires time.Duration) (*lakepb.UploadUrls, error) {
	parts := req.GetParts()
	if len(parts) != 1 || parts[0].GetNumber() != 0 || req.GetListParts() {
		return nil, fmt.Errorf("%w: without an upload id only the single PUT (part 0) is renewed, and nothing is listed", wire.ErrInvalidRequest)
	}
	u, h, err := g.PresignPutObject(ctx, req.GetKey(), parts[0].GetSha256(), req.GetContentType(), expires)
	if err != nil {
		return nil, fmt.Errorf("meta: renew the single PUT URL of %s: %w", req.GetKey(), err)
	}
	return &lakepb.UploadUrls{
		Urls:                []*lakepb.PartUrl{{Number: 0, Url: u, Headers: h}},
		ExpiresAtUnixMicros: time.Now().Add(expires).UnixMicro(),
	}, nil
}

// UploadComplete checks the parts of a granted upload and publishes the
// object. Completing an upload that was completed already (the answer
// was lost) answers the object's FILE value again. A single PUT (no
// upload id on S3) is checked by completeSingle.
func (s *Service) UploadComplete(ctx context.Context, req *lakepb.UploadCompleteRequest) (*lakepb.UploadedFile, error) {
	if err := completeCheck(req); err != nil {
		return nil, err
	}
	t, err := s.leaderTable(ctx, req.GetTable())
	if err != nil {
		return nil, err
	}
	g, ok := s.store.(objects.Granter)
	if !ok {
		if req.GetUploadId() != "" {
			return nil, fmt.Errorf("%w: the stage %s has no upload ids", wire.ErrInvalidRequest, s.cfg.Discover.GetRootUri())
		}
		return s.completeLocal(ctx, req)
	}
	if req.Size == nil || req.GetSha256() == "" {
		return nil, fmt.Errorf("%w: completing an upload needs its size and sha256", wire.ErrInvalidRequest)
	}
	if req.GetUploadId() == "" {
		return s.completeSingle(ctx, t, g, req)
	}
	key, size := req.GetKey(), req.GetSize()
	parts, err := grantParts(ctx, g, key, req.GetUploadId())
	if errors.Is(err, wire.ErrUploadNotFound) {
		// Completed before? Then the object is there, of the size.
		if info, serr := s.store.Stat(ctx, key); serr == nil && info.Size == size {
			return uploadedFile(req, info), nil
		}
	}
	if err != nil {
		return nil, err
	}
	if err := checkParts(parts, size, g.GrantPartSize()); err != nil {
		return nil, fmt.Errorf("meta: complete %s: %w", key, err)
	}
	// CompleteGrant answers the object it published from exactly these
	// parts (their sizes add up to size, checked above): no HEAD after it.
	info, err := g.CompleteGrant(ctx, key, req.GetUploadId(), parts)
	if err != nil {
		return nil, fmt.Errorf("meta: complete %s: %w", key, err)
	}
	if info.Size != size {
		return nil, fmt.Errorf("%w: %s holds %d bytes, the upload claims %d", wire.ErrSizeMismatch, key, info.Size, size)
	}
	s.log.Info("upload completed", "table", t.name, "key", key, "size", size, "parts", len(parts))
	out := uploadedFile(req, info)
	// Parts evidence for dedup (dedup.go), from the parts just published.
	// Only here: a completion answered from the object alone (the upload
	// is gone, the path above) has no part sums, and its sha256 claim may
	// not be the one the parts were completed with.
	if digest, err := partDigest(parts); err != nil {
		s.log.Warn("cannot record an object for dedup", "key", key, "err", err)
	} else if e, err := partsEvidence(size, req.GetSha256(), g.GrantPartSize(), digest); err != nil {
		s.log.Warn("cannot record an object for dedup", "key", key, "err", err)
	} else {
		s.recordDedup(e, out)
	}
	return out, nil
}

// completeSingle answers the FILE value of a single PUT: the object must
// be at the key, of the request's size (at most one part) and with the
// request's sha256 as S3 recorded it (StatGranted: its full-object
// checksum, which S3 checked the PUT's body against, or the metadata the
// PUT's URL signed). Anything else is refused and nothing is recorded.
// Completing again (a lost answer) checks the same and answers the same.
func (s *Service) completeSingle(ctx context.Context, t *table, g objects.Granter, req *lakepb.UploadCompleteRequest) (*lakepb.UploadedFile, error) {
	key, size := req.GetKey(), req.GetSize()
	if size > g.GrantPartSize() {
		return nil, fmt.Errorf("%w: %d bytes make more than one part of %d: complete them with their upload id", wire.ErrInvalidRequest, size, g.GrantPartSize())
	}
	info, err := g.StatGranted(ctx, key)
	if errors.Is(err, objects.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", wire.ErrObjectMissing, key)
	}
	if err != nil {
		return nil, fmt.Errorf("meta: complete %s: %w", key, err)
	}
	if info.Size != size {
		return nil, fmt.Errorf("%w: %s holds %d bytes, the upload claims %d", wire.ErrSizeMismatch, key, info.Size, size)
	}
	if info.SHA256 != req.GetSha256() {
		return nil, fmt.Errorf("%w: %s does not hold the sha256 the upload claims", wire.ErrChecksumMismatch, key)
	}
	s.log.Info("upload completed", "table", t.name, "key", key, "size", size, "single_put", true)
	out := uploadedFile(req, info)
	// Full-object checksum evidence for dedup (dedup.go), recorded as read
	// evidence: a later claim matches on sha256 and size alone, exactly as
	// after the service's own read, and it is as unforgeable. The URL
	// bound the checksum header to this sha256 and S3 refused any body
	// that does not hash to it, so the object's bytes hash to the sum
	// whoever completed it; a separate kind would find the same entries
	// and record them twice beside the verifier's.
	if e, err := readEvidence(size, info.SHA256); err == nil {
		s.recordDedup(e, out)
	}
	return out, nil
}

// heldParts is the wire form of the parts the stage holds, in part order.
func heldParts(parts []objects.GrantPart) []*lakepb.HeldPart {
	sorted := slices.Clone(parts)
	slices.SortFunc(sorted, func(a, b objects.GrantPart) int { return int(a.Number) - int(b.Number) })
	out := make([]*lakepb.HeldPart, len(sorted))
	for i, p := range sorted {
		out[i] = &lakepb.HeldPart{Number: p.Number, Size: p.Size, Sha256: p.SHA256}
	}
	return out
}

// UploadAbort drops a granted upload and its parts. The stage's own
// answer decides: an upload it no longer holds (completed, aborted, or
// swept by gc) is no error, and a completed object stays. A local stage
// holds no uploads, so there it has nothing to do.
func (s *Service) UploadAbort(ctx context.Context, req *lakepb.UploadAbortRequest) (*lakepb.UploadAborted, error) {
	if err := abortCheck(req); err != nil {
		return nil, err
	}
	t, err := s.leaderTable(ctx, req.GetTable())
	if err != nil {
		return nil, err
	}
	g, ok := s.store.(objects.Granter)
	if !ok || req.GetUploadId() == "" {
		// No stage upload to hold (a local stage, a single PUT, which
		// starts nothing): nothing to drop.
		return &lakepb.UploadAborted{}, nil
	}
	if err := g.AbortGrant(ctx, req.GetKey(), req.GetUploadId()); err != nil {
		return nil, fmt.Errorf("meta: abort the upload at %s: %w", req.GetKey(), err)
	}
	s.log.Info("upload aborted", "table", t.name, "key", req.GetKey())
	return &lakepb.UploadAborted{}, nil
}

// completeLocal answers the FILE value of a file a client wrote into the
// local stage at the key: its size as the stage has it, checked against
// the claim when there is one, and the SHA-256 of the bytes this service
// read.
func (s *Service) completeLocal(ctx context.Context, req *lakepb.UploadCompleteRequest) (*lakepb.UploadedFile, error) {
	key := req.GetKey()
	info, err := s.store.Stat(ctx, key)
	if errors.Is(err, objects.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", wire.ErrObjectMissing, key)
	}
	if err != nil {
		return nil, fmt.Errorf("meta: complete %s: %w", key, err)
	}
	if req.Size != nil && info.Size != req.GetSize() {
		return nil, fmt.Errorf("%w: %s holds %d bytes, the upload claims %d", wire.ErrSizeMismatch, key, info.Size, req.GetSize())
	}
	r, err := s.store.Open(ctx, key, 0, -1)
	if err != nil {
		return nil, fmt.Errorf("meta: complete %s: %w", key, err)
	}
	defer r.Close()
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return nil, fmt.Errorf("meta: complete %s: read: %w", key, err)
	}
	if n != info.Size {
		return nil, fmt.Errorf("%w: %s changed while it was read", wire.ErrSizeMismatch, key)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if req.GetSha256() != "" && req.GetSha256() != sum {
		return nil, fmt.Errorf("%w: %s has sha256 %s, the upload claims %s", wire.ErrChecksumMismatch, key, sum, req.GetSha256())
	}
	out := uploadedFile(req, info)
	out.Sha256 = sum
	// Read evidence for dedup (dedup.go): the sum is this service's own.
	// A client of a local stage can write into the stage directory, so
	// it could change the bytes later; the local stage trusts its writers
	// with every object already.
	if e, err := readEvidence(info.Size, sum); err == nil {
		s.recordDedup(e, out)
	}
	return out, nil
}

func uploadedFile(req *lakepb.UploadCompleteRequest, info objects.Info) *lakepb.UploadedFile {
	return &lakepb.UploadedFile{
		Key: req.GetKey(), Size: info.Size, Sha256: req.GetSha256(), Etag: info.ETag,
		ContentType: req.GetContentType(), UploadedAtUnixMicros: info.ModTime.UnixMicro(),
	}
}

// grantParts lists the parts of an upload; an upload the stage does not
// hold is wire.ErrUploadNotFound.
func grantParts(ctx context.Context, g objects.Granter, key, uploadID string) ([]objects.GrantPart, error) {
	parts, err := g.GrantParts(ctx, key, uploadID)
	if errors.Is(err, objects.ErrNotFound) {
		return nil, fmt.Errorf("%w: at %s", wire.ErrUploadNotFound, key)
	}
	if err != nil {
		return nil, fmt.Errorf("meta: parts of the upload at %s: %w", key, err)
	}
	return parts, nil
}

// checkParts checks that parts are exactly those of a file of size bytes
// in parts of partSize: numbers 1..n without a gap, every part but the
// last partSize bytes, the last the rest.
func checkParts(parts []objects.GrantPart, size, partSize int64) error {
	count := partCount(size, partSize)
	have := make(map[int32]objects.GrantPart, len(parts))
	for _, p := range parts {
		if int64(p.Number) > count {
			return fmt.Errorf("%w: part %d is beyond the %d parts of %d bytes", wire.ErrUploadIncomplete, p.Number, count, size)
		}
		have[p.Number] = p
	}
	var missing []int32
	for n := int32(1); int64(n) <= count; n++ {
		p, ok := have[n]
		if !ok {
			missing = append(missing, n)
			continue
		}
		want := partSize
		if int64(n) == count {
			want = size - (count-1)*partSize
		}
		if p.Size != want {
			return fmt.Errorf("%w: part %d has %d bytes, a file of %d bytes needs %d there", wire.ErrUploadIncomplete, n, p.Size, size, want)
		}
	}
	if len(missing) > 0 {
		shown := missing[:min(len(missing), 10)]
		return fmt.Errorf("%w: %d of %d parts missing, among them %v", wire.ErrUploadIncomplete, len(missing), count, shown)
	}
	return nil
}

// signParts signs a URL for each of parts.
func signParts(ctx context.Context, g objects.Granter, key, uploadID string, parts []*lakepb.UploadPart, expires time.Duration) ([]*lakepb.PartUrl, int64, error) {
	if len(parts) == 0 {
		return nil, 0, nil
	}
	at := time.Now().Add(expires)
	urls := make([]*lakepb.PartUrl, 0, len(parts))
	for _, p := range parts {
		u, h, err := g.PresignPart(ctx, key, uploadID, p.GetNumber(), p.GetSha256(), expires)
		if err != nil {
			return nil, 0, err
		}
		urls = append(urls, &lakepb.PartUrl{Number: p.GetNumber(), Url: u, Headers: h})
	}
	return urls, at.UnixMicro(), nil
}

// uploadExpiry is the lifetime of part URLs a request asks for.
func (s *Service) uploadExpiry(e *int64) (time.Duration, error) {
	limit := s.cfg.UploadURLExpiry
	if e == nil {
		return limit, nil
	}
	if *e < int64(time.Second/time.Microsecond) || *e > int64(limit/time.Microsecond) {
		return 0, fmt.Errorf("%w: part URLs may work between 1s and %v (--upload-url-expiry), not %v", wire.ErrInvalidRequest, limit, time.Duration(*e)*time.Microsecond)
	}
	return time.Duration(*e) * time.Microsecond, nil
}

// checkUploadParts refuses part numbers outside S3's range, repeated
// numbers and checksums that are not SHA-256.
func checkUploadParts(parts []*lakepb.UploadPart) error {
	if len(parts) > maxGrantParts {
		return fmt.Errorf("%w: %d parts in one request, at most %d", wire.ErrInvalidRequest, len(parts), maxGrantParts)
	}
	seen := make([]int32, 0, len(parts))
	for _, p := range parts {
		if p.GetNumber() < 1 || p.GetNumber() > maxGrantParts {
			return fmt.Errorf("%w: part number %d, parts are 1 to %d", wire.ErrInvalidRequest, p.GetNumber(), maxGrantParts)
		}
		if !wire.IsSHA256Hex(p.GetSha256()) {
			return fmt.Errorf("%w: part %d: sha256 is not 64 lowercase hex digits", wire.ErrInvalidRequest, p.GetNumber())
		}
		if slices.Contains(seen, p.GetNumber()) {
			return fmt.Errorf("%w: part %d named twice", wire.ErrInvalidRequest, p.GetNumber())
		}
		seen = append(seen, p.GetNumber())
	}
	return nil
}

// grantCheck refuses a malformed grant and returns its URLs' lifetime.
func (s *Service) grantCheck(req *lakepb.UploadGrantRequest) (time.Duration, error) {
	if err := wire.ValidateTableName(req.GetTable()); err != nil {
		return 0, err
	}
	switch n := req.GetFileName(); {
	case n == "" || len(n) > maxUploadNameLen:
		return 0, fmt.Errorf("%w: a file name of 1 to %d bytes is required", wire.ErrInvalidRequest, maxUploadNameLen)
	case req.GetSize() < 0:
		return 0, fmt.Errorf("%w: size %d", wire.ErrInvalidRequest, req.GetSize())
	case req.GetSha256() != "" && !wire.IsSHA256Hex(req.GetSha256()):
		return 0, fmt.Errorf("%w: sha256 is not 64 lowercase hex digits", wire.ErrInvalidRequest)
	case req.GetPartDigest() != "" && !wire.IsSHA256Hex(req.GetPartDigest()):
		return 0, fmt.Errorf("%w: part_digest is not 64 lowercase hex digits", wire.ErrInvalidRequest)
	case len(req.GetContentType()) > maxContentTypeLen:
		return 0, fmt.Errorf("%w: content type longer than %d bytes", wire.ErrInvalidRequest, maxContentTypeLen)
	}
	if err := checkUploadParts(req.GetParts()); err != nil {
		return 0, err
	}
	return s.uploadExpiry(req.ExpiresMicros)
}

// renewCheck refuses a malformed renewal and returns its URLs' lifetime.
func (s *Service) renewCheck(req *lakepb.UploadRenewRequest) (time.Duration, error) {
	if err := wire.ValidateTableName(req.GetTable()); err != nil {
		return 0, err
	}
	if err := wire.ValidateObjectKey(req.GetKey()); err != nil {
		return 0, err
	}
	if len(req.GetContentType()) > maxContentTypeLen {
		return 0, fmt.Errorf("%w: content type longer than %d bytes", wire.ErrInvalidRequest, maxContentTypeLen)
	}
	if p := req.GetParts(); req.GetUploadId() == "" && len(p) == 1 && p[0].GetNumber() == 0 {
		// A single PUT's renewal (renewSingle): part 0 is the whole file.
		if !wire.IsSHA256Hex(p[0].GetSha256()) {
			return 0, fmt.Errorf("%w: part 0: sha256 is not 64 lowercase hex digits", wire.ErrInvalidRequest)
		}
	} else if err := checkUploadParts(req.GetParts()); err != nil {
		return 0, err
	}
	return s.uploadExpiry(req.ExpiresMicros)
}

// abortCheck refuses a malformed abort.
func abortCheck(req *lakepb.UploadAbortRequest) error {
	if err := wire.ValidateTableName(req.GetTable()); err != nil {
		return err
	}
	return wire.ValidateObjectKey(req.GetKey())
}

// completeCheck refuses a malformed completion.
func completeCheck(req *lakepb.UploadCompleteRequest) error {
	if err := wire.ValidateTableName(req.GetTable()); err != nil {
		return err
	}
	if err := wire.ValidateObjectKey(req.GetKey()); err != nil {
		return err
	}
	switch {
	case req.Size != nil && req.GetSize() < 0:
		return fmt.Errorf("%w: size %d", wire.ErrInvalidRequest, req.GetSize())
	case req.GetSha256() != "" && !wire.IsSHA256Hex(req.GetSha256()):
		return fmt.Errorf("%w: sha256 is not 64 lowercase hex digits", wire.ErrInvalidRequest)
	case len(req.GetContentType()) > maxContentTypeLen:
		return fmt.Errorf("%w: content type longer than %d bytes", wire.ErrInvalidRequest, maxContentTypeLen)
	}
	return nil
}
