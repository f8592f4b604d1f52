package presigned

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/checkpoint"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// Actions are the three grant actions of the metadata service, as the
// uploader calls them. Errors carry the wire sentinels
// (wire.ErrUploadNotFound, wire.ErrInvalidRequest, ...).
type Actions interface {
	Grant(ctx context.Context, req *lakepb.UploadGrantRequest) (*lakepb.UploadGrant, error)
	Renew(ctx context.Context, req *lakepb.UploadRenewRequest) (*lakepb.UploadUrls, error)
	Complete(ctx context.Context, req *lakepb.UploadCompleteRequest) (*lakepb.UploadedFile, error)
}

// DefaultConcurrency is how many parts upload at once unless Options says.
const DefaultConcurrency = 4

// Options describe one upload.
type Options struct {
	// Table is the table the file is for (the grant's table).
	Table string
	// FileName is the base name the granted key ends in.
	FileName string
	// ContentType is the object's content type; may be "".
	ContentType string
	// Bucket, Prefix and PartSize are the stage's, as lake.discover
	// names them: the checkpoint's binding and the part size the file is
	// cut at (every part but the last).
	Bucket, Prefix string
	PartSize       int64
	// Concurrency is how many parts upload at once (DefaultConcurrency
	// when 0).
	Concurrency int
	// URLLifetime asks for part URLs that work this long (the service's
	// default when 0).
	URLLifetime time.Duration
	// CommitID and Table go into the checkpoint, so a resumed put appends
	// with the same commit id.
	CommitID string
	// NoDedup asks the service never to answer an existing object.
	NoDedup bool
	// Progress, when set, is told the bytes of finished parts (see
	// objects.Progress). Calls are serialized.
	Progress func(objects.Progress)
	// Step, when set, is told each step of the upload as it is done, so
	// a caller can stop the process between them in crash tests (its
	// failpoints). It may be called from several goroutines at once.
	Step func(Step)
}

// Step is a point of an upload that crash tests stop at.
type Step int

const (
	// StepPartUploaded: a part is in the stage, not yet in the checkpoint.
	StepPartUploaded Step = iota + 1
	// StepPartSaved: a part is in the stage and saved in the checkpoint.
	StepPartSaved
	// StepCompleted: the upload is complete and the checkpoint says so.
	StepCompleted
)

// Result is what an upload ended with.
type Result struct {
	// File is the FILE value to append: the uploaded object, or the
	// existing one on a dedup hit.
	File *lakepb.UploadedFile
	// Deduplicated: the service answered an object it holds already;
	// nothing was uploaded.
	Deduplicated bool
	// BytesSent is how many part bytes the upload PUT (successful PUTs).
	BytesSent int64
	// ResumedParts is how many parts a resume found held and did not send.
	ResumedParts int
}

// Uploader uploads files through grants. It is safe for concurrent use;
// each call is one upload.
type Uploader struct {
	act  Actions
	http *http.Client
}

// New returns an uploader that asks act for grants and PUTs parts with hc
// (http.DefaultClient when nil).
func New(act Actions, hc *http.Client) *Uploader {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Uploader{act: act, http: hc}
}

// ErrNotGranted: the service answered a grant without an upload to send
// the file to (no upload id, no existing object).
var ErrNotGranted = errors.New("the service granted no upload")

// PutFile uploads the file at path. With sess it is resumable: it resumes
// the checkpoint sess holds when that is of kind checkpoint.KindGranted
// (checkpoint.ErrSourceChanged when the file is not the one it was made
// for) and saves its own after each finished part; a dedup hit removes
// the checkpoint, since nothing is pending. The checkpoint stays after a
// completed upload, for the caller to add its commit and remove.
func (u *Uploader) PutFile(ctx context.Context, path string, sess *checkpoint.Session, o Options) (Result, error) {
	f, src, err := checkpoint.OpenSource(path)
	if err != nil {
		return Result{}, fmt.Errorf("presigned: put %s: %w", path, err)
	}
	defer f.Close()
	up, err := u.newUpload(f, src.Size, o)
	if err != nil {
		return Result{}, err
	}
	up.sess, up.src, up.path = sess, src, src.Path
	if sess != nil {
		cp, err := sess.Load()
		switch {
		case errors.Is(err, checkpoint.ErrNoCheckpoint):
		case err != nil:
			return Result{}, fmt.Errorf("presigned: put %s: %w", path, err)
		case cp.Kind == checkpoint.KindGranted:
			return up.resume(ctx, cp)
		}
	}
	return up.fresh(ctx)
}

// PutReader uploads everything r yields. It cannot resume. A stream of
// more than one part is spooled to a temporary file first, since a grant
// needs the size.
func (u *Uploader) PutReader(ctx context.Context, r io.Reader, o Options) (Result, error) {
	if o.PartSize <= 0 {
		return Result{}, fmt.Errorf("presigned: part size %d", o.PartSize)
	}
	head := make([]byte, o.PartSize+1)
	n, err := io.ReadFull(r, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return Result{}, fmt.Errorf("presigned: read: %w", err)
	}
	if int64(n) <= o.PartSize {
		up, err := u.newUpload(bytes.NewReader(head[:n]), int64(n), o)
		if err != nil {
			return Result{}, err
		}
		return up.fresh(ctx)
	}
	tmp, err := os.CreateTemp("", "lake-put-*")
	if err != nil {
		return Result{}, fmt.Errorf("presigned: spool: %w", err)
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}()
	if _, err := tmp.Write(head); err != nil {
		return Result{}, fmt.Errorf("presigned: spool: %w", err)
	}
	if _, err := io.Copy(tmp, r); err != nil {
		return Result{}, fmt.Errorf("presigned: read: %w", err)
	}
	size, err := tmp.Seek(0, io.SeekCurrent)
	if err != nil {
		return Result{}, fmt.Errorf("presigned: spool: %w", err)
	}
	up, err := u.newUpload(tmp, size, o)
	if err != nil {
		return Result{}, err
	}
	return up.fresh(ctx)
}

// statSource is the file's identity now, to tell whether it changed while
// it was read.
func statSource(path string) (checkpoint.Source, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return checkpoint.Source{}, err
	}
	return checkpoint.Source{Path: path, Size: fi.Size(), ModTime: fi.ModTime().UTC()}, nil
}

// partCount is the number of parts of a file of size bytes; an empty file
// is one empty part.
func partCount(size, partSize int64) int64 {
	if size == 0 {
		return 1
	}
	return (size + partSize - 1) / partSize
}

// partDigest is the grant's part_digest of sums: the hex SHA-256 of the
// raw part sums in order.
func partDigest(sums [][32]byte) string {
	h := sha256.New()
	for _, s := range sums {
		h.Write(s[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// notFound reports a service answer that the upload is gone.
func notFound(err error) bool { return errors.Is(err, wire.ErrUploadNotFound) }
