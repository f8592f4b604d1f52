package meta

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// Upload dedup (DESIGN §12): an upload grant whose content matches an
// object the stage holds answers that object's FILE value instead of a
// fresh upload. The leader keeps an index of the evidence it has about
// objects, and an entry exists only on evidence the claimant cannot
// forge:
//
//   - parts: at the completion of a granted S3 upload, the SHA-256 sums
//     of its parts as S3 checked them (ListParts), digested in part order,
//     with the whole-file sha256 the completing client claimed. Equal part
//     sums mean equal bytes, so a later claimant whose sha256, size and
//     part digest (at the same part size) all equal the entry's has the
//     same bytes, and since it hashed them itself, the recorded sha256 is
//     theirs too. A liar's entry (a false sha256 for its bytes) is matched
//     by nobody honest: the genuine file has other parts, an honest
//     uploader of the liar's bytes another sha256.
//   - read: the service read the object whole and hashed it itself (the
//     local stage's completion, the background verifier), or S3 checked
//     the whole body of a single-PUT grant against the full-object
//     checksum the URL was signed with (grant.go, completeSingle): either
//     way the object's bytes are known to hash to the sum, whoever sent
//     them. A later claim matches on sha256 and size.
//
// Like the rest of the index this is derived state: it is lost with the
// index (a rebuild, another leader) and then uploads are merely not
// deduplicated; nothing needs an entry to be correct. Each change is one
// bbolt transaction, so a crash leaves an entry and its back reference
// both or neither.
//
// A hit is answered only if the object is not doomed by a running gc and
// the stage still holds it with the recorded size. That check is advice,
// not the guarantee: a collection can doom the object right after it.
// What keeps an acknowledged row from pointing at a freed object is the
// append's own check behind the gc fence (gc.go, doomedObject), which
// refuses the object once it is doomed; the client then uploads again
// with no_dedup.
var (
	// entry key → dedupValue (JSON). An entry key is be64(size), the raw
	// sha256, the kind, for parts be64(part size) and the raw part
	// digest, then the object key: entries of one size are adjacent (the
	// hash_first probe), those of one piece of evidence too (a lookup),
	// and several objects of the same content can each have one.
	bucketDedup = []byte("dedup")
	// object key, NUL, entry key → nothing: the entries of an object, to
	// drop them when gc frees it. Object keys hold no NUL
	// (wire.ValidateKey).
	bucketDedupByObject = []byte("dedup-objects")
)

// Kinds of dedup evidence, as their byte in an entry key.
const (
	dedupKindParts byte = 'p'
	dedupKindRead  byte = 'r'
)

// dedupLookupLimit bounds the objects one lookup considers: several
// objects of the same content are rare (concurrent uploads of one file).
const dedupLookupLimit = 8

// dedupEvidence is what an entry is found by.
type dedupEvidence struct {
	size   int64
	sha256 [32]byte
	// partSize and partDigest are set for parts evidence; a zero
	// partSize is read evidence.
	partSize   int64
	partDigest [32]byte
}

// prefix is the entry key without the object key.
func (e dedupEvidence) prefix() []byte {
	p := make([]byte, 0, 8+32+1+8+32)
	p = append(p, be64(e.size)...)
	p = append(p, e.sha256[:]...)
	if e.partSize == 0 {
		return append(p, dedupKindRead)
	}
	p = append(p, dedupKindParts)
	p = append(p, be64(e.partSize)...)
	return append(p, e.partDigest[:]...)
}

// readEvidence is the evidence of a read: sum is lowercase hex.
func readEvidence(size int64, sum string) (dedupEvidence, error) {
	e := dedupEvidence{size: size}
	if err := decodeSum(sum, &e.sha256); err != nil {
		return dedupEvidence{}, err
	}
	return e, nil
}

// partsEvidence is the evidence of part sums: sum and digest are
// lowercase hex.
func partsEvidence(size int64, sum string, partSize int64, digest string) (dedupEvidence, error) {
	e, err := readEvidence(size, sum)
	if err != nil {
		return dedupEvidence{}, err
	}
	if partSize <= 0 {
		return dedupEvidence{}, fmt.Errorf("part size %d", partSize)
	}
	e.partSize = partSize
	if err := decodeSum(digest, &e.partDigest); err != nil {
		return dedupEvidence{}, err
	}
	return e, nil
}

func decodeSum(s string, out *[32]byte) error {
	if !wire.IsSHA256Hex(s) {
		return errors.New("not 64 lowercase hex digits")
	}
	_, err := hex.Decode(out[:], []byte(s))
	return err
}

// partDigest is the lowercase hex SHA-256 of the raw SHA-256 sums of
// parts in part order, as a client computes it for part_digest.
func partDigest(parts []objects.GrantPart) (string, error) {
	sorted := slices.Clone(parts)
	slices.SortFunc(sorted, func(a, b objects.GrantPart) int { return int(a.Number) - int(b.Number) })
	h := sha256.New()
	var raw [32]byte
	for _, p := range sorted {
		if err := decodeSum(p.SHA256, &raw); err != nil {
			return "", fmt.Errorf("part %d: sha256 %w", p.Number, err)
		}
		h.Write(raw[:])
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// dedupValue is the FILE value of the object an entry names, as a dedup
// hit answers it.
type dedupValue struct {
	Key         string `json:"key"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256"`
	ETag        string `json:"etag,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	UploadedAt  int64  `json:"uploaded_at"` // unix µs
}

func dedupValueOf(f *lakepb.UploadedFile) dedupValue {
	return dedupValue{Key: f.GetKey(), Size: f.GetSize(), SHA256: f.GetSha256(), ETag: f.GetEtag(),
		ContentType: f.GetContentType(), UploadedAt: f.GetUploadedAtUnixMicros()}
}

func (v dedupValue) file() *lakepb.UploadedFile {
	return &lakepb.UploadedFile{Key: v.Key, Size: v.Size, Sha256: v.SHA256, Etag: v.ETag,
		ContentType: v.ContentType, UploadedAtUnixMicros: v.UploadedAt}
}

// decodeDedupValue decodes a value of bucketDedup and checks it is one
// this service could have written.
func decodeDedupValue(raw []byte) (dedupValue, error) {
	var v dedupValue
	if err := json.Unmarshal(raw, &v); err != nil {
		return dedupValue{}, fmt.Errorf("dedup entry: %w", err)
	}
	if err := wire.ValidateObjectKey(v.Key); err != nil {
		return dedupValue{}, fmt.Errorf("dedup entry: %w", err)
	}
	switch {
	case v.Size < 0:
		return dedupValue{}, errors.New("dedup entry: negative size")
	case !wire.IsSHA256Hex(v.SHA256):
		return dedupValue{}, errors.New("dedup entry: sha256 is not 64 lowercase hex digits")
	case len(v.ContentType) > maxContentTypeLen:
		return dedupValue{}, errors.New("dedup entry: content type too long")
	}
	return v, nil
}

// putDedup records that the object v names has the content e describes.
// The entry and its back reference go in one transaction.
func (ix *index) putDedup(e dedupEvidence, v dedupValue) error {
	if err := wire.ValidateObjectKey(v.Key); err != nil {
		return err
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	entry := append(e.prefix(), v.Key...)
	return ix.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketDedup).Put(entry, raw); err != nil {
			return err
		}
		return tx.Bucket(bucketDedupByObject).Put(backRef(v.Key, entry), nil)
	})
}

func backRef(objectKey string, entry []byte) []byte {
	return append(append([]byte(objectKey), 0), entry...)
}

// dedupCandidate is an entry a lookup found.
type dedupCandidate struct {
	entry []byte
	value dedupValue
}

// dedupCandidates returns up to dedupLookupLimit entries of evidence e.
// An entry that does not decode, or whose value does not fit its key, is
// skipped: refusing to deduplicate is always safe.
func (ix *index) dedupCandidates(e dedupEvidence) ([]dedupCandidate, error) {
	prefix := e.prefix()
	sum := hex.EncodeToString(e.sha256[:])
	var out []dedupCandidate
	err := ix.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketDedup).Cursor()
		for k, raw := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(out) < dedupLookupLimit; k, raw = c.Next() {
			v, err := decodeDedupValue(raw)
			if err != nil || v.Key != string(k[len(prefix):]) || v.Size != e.size || v.SHA256 != sum {
				continue
			}
			out = append(out, dedupCandidate{entry: bytes.Clone(k), value: v})
		}
		return nil
	})
	return out, err
}

// dedupHasSize tells whether any entry is of an object of size bytes.
func (ix *index) dedupHasSize(size int64) (bool, error) {
	var found bool
	err := ix.db.View(func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(bucketDedup).Cursor().Seek(be64(size))
		found = k != nil && bytes.HasPrefix(k, be64(size))
		return nil
	})
	return found, err
}

// dedupOf returns a value recorded for the object at key, if any.
func (ix *index) dedupOf(key string) (dedupValue, bool) {
	var v dedupValue
	var ok bool
	prefix := append([]byte(key), 0)
	_ = ix.db.View(func(tx *bolt.Tx) error {
		entries := tx.Bucket(bucketDedup)
		c := tx.Bucket(bucketDedupByObject).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			if got, err := decodeDedupValue(entries.Get(k[len(prefix):])); err == nil && got.Key == key {
				v, ok = got, true
				return nil
			}
		}
		return nil
	})
	return v, ok
}

// dropDedup removes every entry of the objects at keys, in one
// transaction.
func (ix *index) dropDedup(keys ...string) error {
	if len(keys) == 0 {
		return nil
	}
	return ix.db.Update(func(tx *bolt.Tx) error {
		entries, refs := tx.Bucket(bucketDedup), tx.Bucket(bucketDedupByObject)
		for _, key := range keys {
			prefix := append([]byte(key), 0)
			var found [][]byte
			c := refs.Cursor()
			for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
				found = append(found, bytes.Clone(k))
			}
			for _, k := range found {
				if err := entries.Delete(k[len(prefix):]); err != nil {
					return err
				}
				if err := refs.Delete(k); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// dropDedupEntry removes one entry of the object at key.
func (ix *index) dropDedupEntry(key string, entry []byte) error {
	return ix.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketDedup).Delete(entry); err != nil {
			return err
		}
		return tx.Bucket(bucketDedupByObject).Delete(backRef(key, entry))
	})
}

// recordDedup adds an entry for the object f names; a failure only costs
// a later dedup, so it is logged, never returned.
func (s *Service) recordDedup(e dedupEvidence, f *lakepb.UploadedFile) {
	if err := s.ix.putDedup(e, dedupValueOf(f)); err != nil {
		s.log.Warn("cannot record an object for dedup", "key", f.GetKey(), "err", err)
	}
}

// dedupHit returns the FILE value of an object with the content req
// claims, or nil: parts evidence first (partSize > 0 and a part digest
// in req), then read evidence.
func (s *Service) dedupHit(ctx context.Context, req *lakepb.UploadGrantRequest, partSize int64) *lakepb.UploadedFile {
	var evidence []dedupEvidence
	if partSize > 0 && req.GetPartDigest() != "" {
		if e, err := partsEvidence(req.GetSize(), req.GetSha256(), partSize, req.GetPartDigest()); err == nil {
			evidence = append(evidence, e)
		}
	}
	if e, err := readEvidence(req.GetSize(), req.GetSha256()); err == nil {
		evidence = append(evidence, e)
	}
	for _, e := range evidence {
		found, err := s.ix.dedupCandidates(e)
		if err != nil {
			s.log.Warn("cannot look up dedup entries; granting an upload", "err", err)
			return nil
		}
		for _, c := range found {
			if s.dedupUsable(ctx, c) {
				return c.value.file()
			}
		}
	}
	return nil
}

// dedupUsable tells whether a grant may answer the object of c: gc is
// not freeing it and the stage holds it with the recorded size. An entry
// whose object is gone or changed size is dropped.
func (s *Service) dedupUsable(ctx context.Context, c dedupCandidate) bool {
	s.gc.mu.RLock()
	doomed := s.doomedObject(c.value.Key) != nil
	s.gc.mu.RUnlock()
	if doomed {
		return false
	}
	info, err := s.store.Stat(ctx, c.value.Key)
	if err == nil && info.Size == c.value.Size {
		return true
	}
	if err != nil && !errors.Is(err, objects.ErrNotFound) {
		s.log.Warn("cannot stat an object for dedup; not answering it", "key", c.value.Key, "err", err)
		return false
	}
	if derr := s.ix.dropDedupEntry(c.value.Key, c.entry); derr != nil {
		s.log.Warn("cannot drop a stale dedup entry", "key", c.value.Key, "err", derr)
	}
	return false
}

// dedupGrant answers a grant from the dedup index when it can: hash_first
// for a request without sha256 when an object of its size is recorded,
// existing on a hit, nil otherwise (grant an upload).
func (s *Service) dedupGrant(ctx context.Context, t *table, req *lakepb.UploadGrantRequest, mode string, partSize int64) *lakepb.UploadGrant {
	if req.GetNoDedup() {
		return nil
	}
	if req.GetSha256() == "" {
		has, err := s.ix.dedupHasSize(req.GetSize())
		if err != nil {
			s.log.Warn("cannot probe dedup entries; granting an upload", "err", err)
			return nil
		}
		if !has {
			return nil
		}
		return &lakepb.UploadGrant{HashFirst: true, Mode: mode, PartSize: partSize}
	}
	f := s.dedupHit(ctx, req, partSize)
	if f == nil {
		return nil
	}
	s.log.Info("upload deduplicated", "table", t.name, "key", f.GetKey(), "size", f.GetSize())
	return &lakepb.UploadGrant{Existing: f, Mode: mode, PartSize: partSize}
}

// verifiedValue is the FILE value the background verifier records for
// an object it read whole: the size and sha256 it read, the etag and
// content type of an entry recorded before when there is one, else the
// stage's etag and no content type (rows are not read for it); uploaded
// at is when the stage published the object.
func (s *Service) verifiedValue(ctx context.Context, key string, size int64, sum string) (*lakepb.UploadedFile, error) {
	info, err := s.store.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	if info.Size != size {
		return nil, fmt.Errorf("%w: %s changed size after it was read", wire.ErrSizeMismatch, key)
	}
	at := info.ModTime
	if at.IsZero() {
		at = time.Now()
	}
	f := &lakepb.UploadedFile{Key: key, Size: size, Sha256: sum, Etag: info.ETag, UploadedAtUnixMicros: at.UnixMicro()}
	if v, ok := s.ix.dedupOf(key); ok && v.Size == size {
		f.Etag, f.ContentType, f.UploadedAtUnixMicros = v.ETag, v.ContentType, v.UploadedAt
	}
	return f, nil
}
