package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/lakedata/lake/internal/failpoint"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/presigned"
	"github.com/lakedata/lake/objects/s3"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// Upload modes, as lake.discover names them (StageDescriptor.upload_mode).
const (
	// modePresigned: the S3 stage takes uploads through grants only; the
	// client holds no stage credentials and never writes with its own.
	modePresigned = "presigned"
	// modeDirect: the S3 stage lets clients upload with their own
	// credentials.
	modeDirect = "direct"
	// modeLocal: clients write into the stage directory.
	modeLocal = "local"
)

// localProbeMin is the smallest file a put on the local stage offers for
// dedup. Below it, hashing first and two more calls to the service stand
// against writing a small file once; the bound is a judgement, not a
// measured crossing point, chosen so a bulk put of small files (the
// 64 KiB files of BenchmarkPutMany) makes no extra calls.
const localProbeMin = 1 << 20

// uploadMode is how this client uploads: as lake.discover said, or for a
// service from before upload modes, as the stage's kind implies.
func (c *Client) uploadMode() string {
	if m := c.stage.GetUploadMode(); m != "" {
		return m
	}
	if c.stage.GetKind() == objects.KindLocal {
		return modeLocal
	}
	return modeDirect
}

// grantActions are the upload grant actions through this client's
// endpoint, as objects/presigned calls them.
type grantActions struct{ c *Client }

func (a grantActions) Grant(ctx context.Context, req *lakepb.UploadGrantRequest) (*lakepb.UploadGrant, error) {
	var out lakepb.UploadGrant
	if err := a.c.action(ctx, wire.ActionUploadGrant, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (a grantActions) Renew(ctx context.Context, req *lakepb.UploadRenewRequest) (*lakepb.UploadUrls, error) {
	var out lakepb.UploadUrls
	if err := a.c.action(ctx, wire.ActionUploadRenew, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (a grantActions) Complete(ctx context.Context, req *lakepb.UploadCompleteRequest) (*lakepb.UploadedFile, error) {
	var out lakepb.UploadedFile
	if err := a.c.action(ctx, wire.ActionUploadComplete, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// uploader uploads through grants, PUTting parts with a plain HTTP
// client: the URLs carry the authority.
func (c *Client) uploader() *presigned.Uploader {
	return presigned.New(grantActions{c}, nil)
}

// grantOptions are the options of one granted upload of a file named
// name into table.
func (c *Client) grantOptions(table, name, contentType, commitID string, progress func(objects.Progress)) presigned.Options {
	return presigned.Options{
		Table: table, FileName: name, ContentType: contentType,
		Bucket: c.stage.GetBucket(), Prefix: c.stage.GetPrefix(), PartSize: c.stage.GetPartSize(),
		CommitID: commitID, Progress: progress, Step: grantFailpoint,
	}
}

// grantFailpoint stops a granted upload at the failpoints of the S3
// stage's own resumable uploads, which name the same steps, so one crash
// test covers both paths.
func grantFailpoint(s presigned.Step) {
	switch s {
	case presigned.StepPartUploaded:
		failpoint.Hit(s3.FailAfterPartUpload)
	case presigned.StepPartSaved:
		failpoint.Hit(s3.FailAfterPartCheckpoint)
	case presigned.StepCompleted:
		failpoint.Hit(s3.FailAfterComplete)
	}
}

// uploadedValue is the FILE value of an answered object: a completed or
// deduplicated upload, or the row a read URL names.
func uploadedValue(f *lakepb.UploadedFile) wire.FileValue {
	v := wire.FileValue{Key: f.GetKey(), Size: f.GetSize(), SHA256: f.GetSha256(), ContentType: f.GetContentType(), ETag: f.GetEtag()}
	if at := f.GetUploadedAtUnixMicros(); at != 0 {
		v.UploadedAt = time.UnixMicro(at).UTC()
	}
	return v
}

// objectGone reports an append refused because the FILE value it names
// is gone from the stage or doomed by a running gc: a dedup answer that
// went stale, to be uploaded again with no_dedup.
func objectGone(err error) bool { return errors.Is(err, wire.ErrObjectMissing) }

// hashFile is the SHA-256 of the file at path, in lowercase hex.
func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// localGranted is the outcome of a put on the local stage through a
// grant.
type localGranted struct {
	file    *lakepb.UploadedFile
	dedup   bool
	written int64
}

// putLocalGranted puts the file at abs on the local stage through a
// grant, for dedup: it asks for a grant without a sum, hashes the file
// when the service holds an object of its size and asks again with the
// sum; an existing object is the answer, else it writes the file at the
// granted key and has the service read it (lake.upload.complete).
func (c *Client) putLocalGranted(ctx context.Context, table, name, abs string, size int64, o objects.PutOptions, noDedup bool) (localGranted, error) {
	act := grantActions{c}
	req := &lakepb.UploadGrantRequest{Table: table, FileName: name, Size: size, ContentType: o.ContentType, NoDedup: noDedup}
	g, err := presigned.GrantHashingFirstIfAsked(ctx, act, req, func() error {
		sum, err := hashFile(abs)
		if err != nil {
			return fmt.Errorf("hash %s: %w", abs, err)
		}
		req.Sha256 = sum
		return nil
	})
	if err != nil {
		return localGranted{}, fmt.Errorf("grant an upload of %s: %w", name, err)
	}
	if ex := g.GetExisting(); ex != nil {
		if o.Progress != nil {
			o.Progress(objects.Progress{Done: size, Total: size})
		}
		return localGranted{file: ex, dedup: true}, nil
	}
	if g.GetKey() == "" {
		return localGranted{}, fmt.Errorf("grant an upload of %s: %w", name, presigned.ErrNotGranted)
	}
	info, err := c.store.PutPath(ctx, g.GetKey(), abs, o)
	if err != nil {
		return localGranted{}, err
	}
	if req.Sha256 != "" && info.SHA256 != req.Sha256 {
		return localGranted{}, fmt.Errorf("%s changed while it was put: %w", abs, wire.ErrChecksumMismatch)
	}
	n := info.Size
	f, err := act.Complete(ctx, &lakepb.UploadCompleteRequest{Table: table, Key: info.Key, Size: &n, Sha256: info.SHA256, ContentType: o.ContentType})
	if err != nil {
		return localGranted{}, fmt.Errorf("complete the upload of %s: %w", name, err)
	}
	return localGranted{file: f, written: info.Size}, nil
}

// checkWriteScope asks for a grant that starts nothing (an empty name is
// refused as invalid after the scope check), so a token that may not
// write is refused before a byte is written.
func (c *Client) checkWriteScope(ctx context.Context, table string) error {
	_, err := grantActions{c}.Grant(ctx, &lakepb.UploadGrantRequest{Table: table})
	if errors.Is(err, wire.ErrPermissionDenied) || errors.Is(err, wire.ErrUnauthenticated) {
		return fmt.Errorf("client: put into %s: %w", table, err)
	}
	return nil
}
