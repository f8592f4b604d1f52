package checkpoint

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lakedata/lake/wire"
)

// Version is the format version Encode writes. Decode reads it and
// version 1, the format before Kind existed, whose checkpoints are all of
// KindMultipart: it returns them as version 2 ones, and the next Save
// rewrites them so.
const Version = 2

// Kinds of checkpoint (Checkpoint.Kind).
const (
	// KindMultipart is a resumable multipart upload to S3, running,
	// interrupted or completed. It is the zero value, written "multipart"
	// in the file; every version 1 checkpoint is one.
	KindMultipart = ""
	// KindSingle is an object uploaded in one request (every file on the
	// local stage; on S3 one no larger than a part) whose row is not
	// acknowledged yet. The stage wrote no checkpoint for it, so the put
	// records the object and its commit id before sending the append: run
	// again, it appends the same object with the same commit id instead of
	// uploading the file again. It has no binding but the key, no parts,
	// and is always completed.
	KindSingle = "single"
	// KindGranted is an upload through a grant (DESIGN §12): the
	// metadata leader started the multipart upload and signs a URL per
	// part, and the client, holding no stage credentials, PUTs the parts
	// and asks the leader to complete it. The binding is the grant's (the
	// bucket and prefix lake.discover named, the key as granted with the
	// prefix, the upload id). The whole file's SHA-256 may be "" until the
	// upload has read the file once (hashing overlaps the upload); a
	// part's ETag and checksum_sha256 may be "" (a part found held by the
	// stage on resume); the file may be empty (one empty part). A
	// completed one needs only lake.upload.complete again (idempotent)
	// and the append.
	KindGranted = "granted"

	kindMultipartName = "multipart" // KindMultipart in the file
)

// Limits of the format. The part limits are S3's.
const (
	// MaxSize bounds a checkpoint file. 10000 parts of the largest allowed
	// fields stay well below it.
	MaxSize = 16 << 20
	// MinPartSize is S3's minimum length of every part but the last.
	MinPartSize = 5 << 20
	// MaxPartSize is S3's maximum part length.
	MaxPartSize = 5 << 30
	// MaxParts is S3's maximum number of parts of one upload.
	MaxParts = 10000

	maxPathLen  = 4096
	maxTextLen  = 1024 // bucket, prefix, upload id, content type
	maxETagLen  = 256
	maxBucketCh = 255
)

// Sentinel errors. Callers test them with errors.Is; messages wrapping them
// name fields, never a checkpoint's content.
var (
	// ErrInProgress: another session, in this or another process, holds the
	// checkpoint locked.
	ErrInProgress = errors.New("an upload of this file is already in progress")
	// ErrNoCheckpoint: no checkpoint was saved yet (or it was removed). It
	// also matches fs.ErrNotExist.
	ErrNoCheckpoint = fmt.Errorf("no checkpoint: %w", fs.ErrNotExist)
	// ErrUnknownVersion: the checkpoint has a format version this lake does
	// not read, probably written by a newer one. Leave the file alone.
	ErrUnknownVersion = errors.New("unknown checkpoint version")
	// ErrCorrupt: the file is not a valid checkpoint of this version. A
	// checkpoint that decodes but fails Validate matches ErrInvalid too.
	ErrCorrupt = errors.New("corrupt checkpoint")
	// ErrSourceChanged: the file to upload is not the one the checkpoint
	// was made for (CheckSource).
	ErrSourceChanged = errors.New("the file changed since its upload started")
	// ErrBindingMismatch: the checkpoint is for another destination
	// (CheckBinding).
	ErrBindingMismatch = errors.New("the checkpoint belongs to another upload")
	// ErrInvalid: a checkpoint breaks a rule of Validate.
	ErrInvalid = errors.New("invalid checkpoint")
)

// Source identifies the file being uploaded.
type Source struct {
	// Path is the canonical path: absolute, clean, symbolic links resolved.
	Path string `json:"path"`
	// Size is the file's length in bytes.
	Size int64 `json:"size"`
	// ModTime is the file's modification time. Encode writes it in UTC
	// with nanoseconds; Decode returns it in UTC.
	ModTime time.Time `json:"mod_time"`
}

// Binding names the multipart upload on S3. A KindSingle checkpoint has
// only Key, the object's key in the stage.
type Binding struct {
	Bucket   string `json:"bucket"`
	Prefix   string `json:"prefix"` // the stage's prefix; may be empty
	Key      string `json:"key"`    // the object's key in the bucket
	UploadID string `json:"upload_id"`
}

// Part is a finished part of the upload.
type Part struct {
	Number int32  `json:"number"`
	Length int64  `json:"length"`
	ETag   string `json:"etag"`
	// ChecksumSHA256 is the part's SHA-256, base64, as S3 returns it; empty
	// when the endpoint returns none. When set it must agree with SHA256.
	ChecksumSHA256 string `json:"checksum_sha256"`
	// SHA256 is the lowercase hex SHA-256 of the part's bytes.
	SHA256 string `json:"sha256"`
}

// Checkpoint is the state of one resumable upload. See the package
// documentation for the file format.
type Checkpoint struct {
	Version int `json:"version"`
	// Kind is KindMultipart or KindSingle.
	Kind     string  `json:"kind"`
	Source   Source  `json:"source"`
	Binding  Binding `json:"binding"`
	PartSize int64   `json:"part_size"`
	// SHA256 is the lowercase hex SHA-256 of the whole file, computed
	// before the upload starts.
	SHA256      string `json:"sha256"`
	ContentType string `json:"content_type"`
	// Parts are the finished parts, by strictly ascending number. They need
	// not be contiguous: parts may finish out of order.
	Parts []Part `json:"parts"`
	// Completed: CompleteMultipartUpload succeeded, the object at
	// Binding.Key is final and ETag is its ETag.
	Completed bool   `json:"completed"`
	ETag      string `json:"etag"`
	// CommitID is the append's idempotency key, kept until the append is
	// acknowledged. May be empty.
	CommitID string `json:"commit_id"`
	// Table is the table the file is appended to. May be empty.
	Table string `json:"table"`
	// UpdatedAt is when Save last wrote the checkpoint.
	UpdatedAt time.Time `json:"updated_at"`
}

// PartSize returns the part size for a file of fileSize bytes: the larger of
// minPart and the smallest size that fits the file in MaxParts parts,
// rounded up to a whole MiB. minPart is clamped to [MinPartSize,
// MaxPartSize]. A file larger than MaxParts × MaxPartSize (about 48.8 TiB)
// gets a size above MaxPartSize, which Validate refuses.
func PartSize(fileSize, minPart int64) int64 {
	const mib = 1 << 20
	minPart = min(max(minPart, MinPartSize), MaxPartSize)
	fit := fileSize / MaxParts
	if fileSize%MaxParts > 0 {
		fit++
	}
	size := max(minPart, fit)
	// No overflow: size <= MaxInt64/MaxParts + 1 or <= MaxPartSize.
	return (size + mib - 1) / mib * mib
}

// numParts is how many parts of partSize a file of size bytes has.
func numParts(size, partSize int64) int64 {
	n := size / partSize
	if size%partSize > 0 {
		n++
	}
	return n
}

// partLength is the length part number n must have.
func partLength(size, partSize int64, n int32) int64 {
	return max(0, min(partSize, size-int64(n-1)*partSize))
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// Validate checks the checkpoint's internal consistency:
//
//   - Version is Version (else ErrUnknownVersion); Kind is KindMultipart
//     or KindSingle;
//   - the source path is absolute, clean UTF-8 without NUL; its mtime is
//     set; its size is > 0 (KindSingle: >= 0) and, for KindMultipart,
//     fits in MaxParts parts of PartSize;
//   - the key is a clean stage key (wire.ValidateKey); bucket and upload
//     id are set (KindSingle: bucket, prefix and upload id are empty); no
//     text field holds invalid UTF-8 or control characters;
//   - PartSize is within [MinPartSize, MaxPartSize] (KindSingle: 0);
//   - SHA256 fields are 64 lowercase hex digits; a part's ChecksumSHA256,
//     when set, is the base64 of the same 32 bytes as its SHA256;
//   - part numbers are 1..MaxParts, strictly increasing, none beyond the
//     last part; each length is the one its number implies (PartSize, or
//     the remainder for the last part), so no part is empty and the
//     lengths add up to at most Source.Size; KindSingle has no parts;
//   - Completed holds every part (their lengths sum to Source.Size) and a
//     final ETag; an ETag without Completed is refused; KindSingle is
//     always Completed, its ETag may be empty (a stage without ETags);
//   - CommitID is at most wire.MaxCommitIDLen bytes; Table, when set, is a
//     valid table name; KindSingle has both; times are within years
//     0..9999.
//
// KindGranted is checked as KindMultipart, except that its source may be
// empty (one part of 0 bytes), its SHA256 may be "" until it is completed,
// and part and object ETags may be "".
//
// Failures wrap ErrInvalid (or ErrUnknownVersion) and name the field.
func (cp *Checkpoint) Validate() error {
	if cp == nil {
		return invalid("nil checkpoint")
	}
	if cp.Version <= 0 {
		return invalid("version %d", cp.Version)
	}
	if cp.Version != Version {
		return fmt.Errorf("%w %d (this lake reads versions 1 and %d)", ErrUnknownVersion, cp.Version, Version)
	}
	single, granted := false, false
	switch cp.Kind {
	case KindMultipart:
	case KindSingle:
		single = true
	case KindGranted:
		granted = true
	default:
		return invalid("kind is none of %q, %q and %q", kindMultipartName, KindSingle, KindGranted)
	}

	s := cp.Source
	switch {
	case s.Path == "":
		return invalid("source.path is empty")
	case len(s.Path) > maxPathLen:
		return invalid("source.path: %d bytes, at most %d", len(s.Path), maxPathLen)
	case !utf8.ValidString(s.Path):
		return invalid("source.path is not valid UTF-8")
	case strings.IndexByte(s.Path, 0) >= 0:
		return invalid("source.path contains NUL")
	case !filepath.IsAbs(s.Path):
		return invalid("source.path is not absolute")
	case filepath.Clean(s.Path) != s.Path:
		return invalid("source.path is not clean")
	case s.Size < 0:
		return invalid("source.size %d is negative", s.Size)
	case s.Size == 0 && !single && !granted:
		return invalid("source.size 0: a resumable upload needs at least one byte")
	case s.ModTime.IsZero():
		return invalid("source.mod_time is not set")
	}
	if err := checkTime("source.mod_time", s.ModTime); err != nil {
		return err
	}

	b := cp.Binding
	if b.Key == "" {
		return invalid("binding.key is empty")
	}
	if wire.ValidateKey(b.Key) != nil {
		return invalid("binding.key is not a clean object key")
	}
	if single {
		if err := cp.validateSingle(); err != nil {
			return err
		}
	} else if err := cp.validateMultipart(); err != nil {
		return err
	}
	switch {
	case granted && cp.SHA256 == "" && cp.Completed:
		return invalid("sha256 is empty but the upload is completed")
	case granted && cp.SHA256 == "":
	case !wire.IsSHA256Hex(cp.SHA256):
		return invalid("sha256 is not 64 lowercase hex digits")
	}
	if err := checkText("content_type", cp.ContentType, maxTextLen, false); err != nil {
		return err
	}
	if err := checkText("commit_id", cp.CommitID, wire.MaxCommitIDLen, single); err != nil {
		return err
	}
	if single && cp.Table == "" {
		return invalid("table is empty")
	}
	if cp.Table != "" && wire.ValidateTableName(cp.Table) != nil {
		return invalid("table is not a valid table name")
	}
	return checkTime("updated_at", cp.UpdatedAt)
}

// validateSingle checks what is particular to a KindSingle checkpoint.
func (cp *Checkpoint) validateSingle() error {
	b := cp.Binding
	switch {
	case b.Bucket != "" || b.Prefix != "" || b.UploadID != "":
		return invalid("binding of kind %q has more than a key", KindSingle)
	case cp.PartSize != 0:
		return invalid("part_size %d: kind %q has no parts", cp.PartSize, KindSingle)
	case len(cp.Parts) > 0:
		return invalid("parts: kind %q has none", KindSingle)
	case !cp.Completed:
		return invalid("kind %q is not completed", KindSingle)
	}
	return checkText("etag", cp.ETag, maxETagLen, false)
}

// validateMultipart checks what is particular to a KindMultipart or
// KindGranted checkpoint: the bucket, the upload and its parts. A granted
// upload's parts may lack an ETag (the stage's list of held parts has
// none), its completed object too, and its file may be empty: one part
// of no bytes.
func (cp *Checkpoint) validateMultipart() error {
	s, b := cp.Source, cp.Binding
	granted := cp.Kind == KindGranted
	if err := checkText("binding.bucket", b.Bucket, maxBucketCh, true); err != nil {
		return err
	}
	if strings.IndexByte(b.Bucket, '/') >= 0 {
		return invalid("binding.bucket contains a slash")
	}
	if err := checkText("binding.prefix", b.Prefix, maxTextLen, false); err != nil {
		return err
	}
	if err := checkText("binding.upload_id", b.UploadID, maxTextLen, true); err != nil {
		return err
	}

	if cp.PartSize < MinPartSize || cp.PartSize > MaxPartSize {
		return invalid("part_size %d is outside [%d, %d]", cp.PartSize, int64(MinPartSize), int64(MaxPartSize))
	}
	n := numParts(s.Size, cp.PartSize)
	if granted && n == 0 {
		n = 1 // an empty file is one empty part
	}
	if n > MaxParts {
		return invalid("source.size %d needs %d parts of part_size %d, at most %d", s.Size, n, cp.PartSize, MaxParts)
	}

	var prev int32
	for i, p := range cp.Parts {
		switch {
		case p.Number < 1 || p.Number > MaxParts:
			return invalid("parts[%d].number %d is outside [1, %d]", i, p.Number, MaxParts)
		case p.Number <= prev:
			return invalid("parts[%d].number %d follows %d: numbers must strictly increase", i, p.Number, prev)
		case int64(p.Number) > n:
			return invalid("parts[%d].number %d is beyond the last part, %d", i, p.Number, n)
		}
		prev = p.Number
		if want := partLength(s.Size, cp.PartSize, p.Number); p.Length != want {
			return invalid("parts[%d].length %d, want %d for part %d", i, p.Length, want, p.Number)
		}
		if err := checkText(fmt.Sprintf("parts[%d].etag", i), p.ETag, maxETagLen, !granted); err != nil {
			return err
		}
		if !wire.IsSHA256Hex(p.SHA256) {
			return invalid("parts[%d].sha256 is not 64 lowercase hex digits", i)
		}
		if p.ChecksumSHA256 != "" {
			sum, err := base64.StdEncoding.Strict().DecodeString(p.ChecksumSHA256)
			if err != nil || len(sum) != 32 {
				return invalid("parts[%d].checksum_sha256 is not the base64 of 32 bytes", i)
			}
			hexSum, _ := hex.DecodeString(p.SHA256) // checked above
			if !bytes.Equal(sum, hexSum) {
				return invalid("parts[%d].checksum_sha256 disagrees with parts[%d].sha256", i, i)
			}
		}
	}

	if cp.Completed {
		if int64(len(cp.Parts)) != n {
			return invalid("completed with %d of %d parts", len(cp.Parts), n)
		}
		return checkText("etag", cp.ETag, maxETagLen, !granted)
	}
	if cp.ETag != "" {
		return invalid("etag is set but the upload is not completed")
	}
	return nil
}

// checkText checks a text field without quoting it.
func checkText(field, s string, maxLen int, required bool) error {
	switch {
	case s == "":
		if required {
			return invalid("%s is empty", field)
		}
		return nil
	case len(s) > maxLen:
		return invalid("%s: %d bytes, at most %d", field, len(s), maxLen)
	case !utf8.ValidString(s):
		return invalid("%s is not valid UTF-8", field)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return invalid("%s contains a control character", field)
		}
	}
	return nil
}

// checkTime refuses times JSON cannot carry (RFC 3339 has four-digit years).
func checkTime(field string, t time.Time) error {
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return invalid("%s: year %d is outside 0..9999", field, y)
	}
	return nil
}

// CheckSource reports whether src is the file the checkpoint was made for:
// the same path, size and modification time (to the nanosecond). A
// mismatch wraps ErrSourceChanged and names every field that differs, e.g.
// "size changed: 1000 → 1200".
func (cp *Checkpoint) CheckSource(src Source) error {
	var diffs []string
	if src.Path != cp.Source.Path {
		diffs = append(diffs, fmt.Sprintf("path changed: %q → %q", cp.Source.Path, src.Path))
	}
	if src.Size != cp.Source.Size {
		diffs = append(diffs, fmt.Sprintf("size changed: %d → %d", cp.Source.Size, src.Size))
	}
	if !src.ModTime.Equal(cp.Source.ModTime) {
		diffs = append(diffs, fmt.Sprintf("mod_time changed: %s → %s",
			cp.Source.ModTime.UTC().Format(time.RFC3339Nano), src.ModTime.UTC().Format(time.RFC3339Nano)))
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%w: %s", ErrSourceChanged, strings.Join(diffs, "; "))
	}
	return nil
}

// CheckBinding reports whether the checkpoint is for the destination b:
// the same bucket, prefix and key, and the same upload id unless
// b.UploadID is empty. A mismatch wraps ErrBindingMismatch and names every
// field that differs, with both values except for the upload id.
func (cp *Checkpoint) CheckBinding(b Binding) error {
	var diffs []string
	have := cp.Binding
	if b.Bucket != have.Bucket {
		diffs = append(diffs, fmt.Sprintf("bucket changed: %q → %q", have.Bucket, b.Bucket))
	}
	if b.Prefix != have.Prefix {
		diffs = append(diffs, fmt.Sprintf("prefix changed: %q → %q", have.Prefix, b.Prefix))
	}
	if b.Key != have.Key {
		diffs = append(diffs, fmt.Sprintf("key changed: %q → %q", have.Key, b.Key))
	}
	if b.UploadID != "" && b.UploadID != have.UploadID {
		// Not quoted: an upload id is no credential, but has no place in logs.
		diffs = append(diffs, "upload_id changed")
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%w: %s", ErrBindingMismatch, strings.Join(diffs, "; "))
	}
	return nil
}

// OpenSource opens the file at path by its canonical name (absolute,
// symbolic links resolved, so one file has one identity however it is
// named) and returns it with its identity as a checkpoint records it. It
// must be a regular file. The identity comes from the open file, so it
// is the file that will be read.
func OpenSource(path string) (*os.File, Source, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, Source{}, err
	}
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return nil, Source{}, err
	}
	f, err := os.Open(abs)
	if err != nil {
		return nil, Source{}, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, Source{}, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, Source{}, fmt.Errorf("%s is not a regular file", abs)
	}
	return f, Source{Path: abs, Size: fi.Size(), ModTime: fi.ModTime().UTC()}, nil
}
