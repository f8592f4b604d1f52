package s3

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/wire"
)

// MaxPresignExpiry is the longest a SigV4 presigned URL can work.
const MaxPresignExpiry = 7 * 24 * time.Hour

var (
	_ objects.Presigner = (*Store)(nil)
	_ objects.Granter   = (*Store)(nil)
)

// PresignGet returns a presigned GET URL of the object at key (see
// objects.Presigner). It signs locally with the store's credentials and
// makes no request to S3.
func (s *Store) PresignGet(ctx context.Context, key string, expires time.Duration, o objects.GetURLOptions) (string, error) {
	k, err := s.objectKey(key)
	if err != nil {
		return "", err
	}
	if err := checkExpiry(expires); err != nil {
		return "", err
	}
	in := &s3.GetObjectInput{Bucket: &s.bucket, Key: &k}
	if o.ContentDisposition != "" {
		// A signed query parameter: S3 answers the header, and nobody
		// holding the URL can change it.
		in.ResponseContentDisposition = aws.String(o.ContentDisposition)
	}
	req, err := s3.NewPresignClient(s.client).PresignGetObject(ctx, in, s3.WithPresignExpires(expires))
	if err != nil {
		// Presigning fails before any URL exists (no credentials), so
		// the error cannot carry one.
		return "", fail(ctx, "presign get", key, err)
	}
	return req.URL, nil
}

// checkExpiry refuses an expiry that SigV4 cannot sign.
func checkExpiry(d time.Duration) error {
	if d < time.Second || d > MaxPresignExpiry {
		return fmt.Errorf("%w: a presigned URL works between 1 s and %v, not %v", wire.ErrInvalidRequest, MaxPresignExpiry, d)
	}
	return nil
}

// GrantPartSize is the store's part size (Config.PartSize).
func (s *Store) GrantPartSize() int64 { return s.partSize }

// CreateGrant starts a multipart upload of key with SHA-256 part
// checksums (see objects.Granter).
func (s *Store) CreateGrant(ctx context.Context, key, contentType string) (string, error) {
	k, err := s.objectKey(key)
	if err != nil {
		return "", err
	}
	id, err := s.createMultipart(ctx, k, contentType, "")
	if err != nil {
		return "", fail(ctx, "grant", key, err)
	}
	return id, nil
}

// PresignPart signs an UploadPart of the upload whose x-amz-checksum-sha256
// is sum's: the header is signed, so the uploader must send it as given,
// and S3 refuses a body with another SHA-256 (BadDigest).
func (s *Store) PresignPart(ctx context.Context, key, uploadID string, number int32, sum string, expires time.Duration) (string, map[string]string, error) {
	k, err := s.objectKey(key)
	if err != nil {
		return "", nil, err
	}
	if err := checkExpiry(expires); err != nil {
		return "", nil, err
	}
	raw, err := hex.DecodeString(sum)
	if err != nil || len(raw) != 32 {
		return "", nil, fmt.Errorf("%w: part %d: sha256 is not 64 hex digits", wire.ErrInvalidRequest, number)
	}
	if number < 1 || number > MaxParts {
		return "", nil, fmt.Errorf("%w: part number %d, S3 allows 1 to %d", wire.ErrInvalidRequest, number, MaxParts)
	}
	req, err := s3.NewPresignClient(s.client).PresignUploadPart(ctx, &s3.UploadPartInput{
		Bucket:         aws.String(s.bucket),
		Key:            aws.String(k),
		UploadId:       aws.String(uploadID),
		PartNumber:     aws.Int32(number),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(raw)),
	}, s3.WithPresignExpires(expires))
	if err != nil {
		return "", nil, fail(ctx, "presign part", key, err)
	}
	return req.URL, signedHeaders(req.SignedHeader), nil
}

// GrantParts lists the parts S3 holds for the upload.
func (s *Store) GrantParts(ctx context.Context, key, uploadID string) ([]objects.GrantPart, error) {
	k, err := s.objectKey(key)
	if err != nil {
		return nil, err
	}
	parts, err := s.listParts(ctx, k, uploadID)
	if err != nil {
		if errorCode(err) == codeNoSuchUpload {
			err = fmt.Errorf("%w: %w", objects.ErrNotFound, err)
		}
		return nil, fail(ctx, "grant parts of", key, err)
	}
	out := make([]objects.GrantPart, len(parts))
	for i, p := range parts {
		sum, _ := base64.StdEncoding.DecodeString(p.Checksum)
		out[i] = objects.GrantPart{Number: p.Number, Size: p.Size, SHA256: hex.EncodeToString(sum), ETag: p.ETag}
	}
	return out, nil
}

// GrantHeld asks S3 for at most one part of the upload: a renewal needs
// to know the upload is there, not its parts.
func (s *Store) GrantHeld(ctx context.Context, key, uploadID string) error {
	k, err := s.objectKey(key)
	if err != nil {
		return err
	}
	_, err = s.client.ListParts(ctx, &s3.ListPartsInput{
		Bucket: aws.String(s.bucket), Key: aws.String(k), UploadId: aws.String(uploadID), MaxParts: aws.Int32(1),
	})
	if err != nil {
		if errorCode(err) == codeNoSuchUpload {
			err = fmt.Errorf("%w: %w", objects.ErrNotFound, err)
		}
		return fail(ctx, "grant of", key, err)
	}
	return nil
}

// CompleteGrant publishes the upload from parts, if nothing is at key.
func (s *Store) CompleteGrant(ctx context.Context, key, uploadID string, parts []objects.GrantPart) (objects.Info, error) {
	k, err := s.objectKey(key)
	if err != nil {
		return objects.Info{}, err
	}
	done := make([]part, len(parts))
	var size int64
	for i, p := range parts {
		sum, err := hex.DecodeString(p.SHA256)
		if err != nil || len(sum) != 32 {
			return objects.Info{}, fmt.Errorf("%w: part %d: sha256 is not 64 hex digits", wire.ErrInvalidRequest, p.Number)
		}
		done[i] = part{Number: p.Number, Size: p.Size, ETag: p.ETag, Checksum: base64.StdEncoding.EncodeToString(sum)}
		size += p.Size
	}
	var etag string
	err = retryConflict(ctx, func() error {
		var err error
		etag, err = s.completeMultipart(ctx, k, uploadID, done, true)
		return err
	})
	if err != nil {
		if errorCode(err) == codeNoSuchUpload {
			err = fmt.Errorf("%w: %w", objects.ErrNotFound, err)
		}
		return objects.Info{}, fail(ctx, "complete grant of", key, err)
	}
	return objects.Info{Key: key, Size: size, ETag: unquote(etag), ModTime: time.Now()}, nil
}

// AbortGrant drops the upload and its parts.
func (s *Store) AbortGrant(ctx context.Context, key, uploadID string) error {
	k, err := s.objectKey(key)
	if err != nil {
		return err
	}
	_, err = s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(s.bucket), Key: aws.String(k), UploadId: aws.String(uploadID)})
	if err != nil && errorCode(err) != codeNoSuchUpload {
		return fail(ctx, "abort grant of", key, err)
	}
	return nil
}

// PresignPutObject signs a PutObject of key (a single-PUT grant, see
// objects.Granter) whose signed headers carry x-amz-checksum-sha256 (S3
// refuses a body with another SHA-256: BadDigest), the same sum as the
// x-amz-meta-sha256 metadata the store's own writers set, the content
// type, and If-None-Match: * (S3 refuses the PUT once the key holds an
// object: PreconditionFailed). Every one of them is a header SigV4 signs,
// never hoisted into the query, so the uploader must send each as given.
func (s *Store) PresignPutObject(ctx context.Context, key, sum, contentType string, expires time.Duration) (string, map[string]string, error) {
	k, err := s.objectKey(key)
	if err != nil {
		return "", nil, err
	}
	if err := checkExpiry(expires); err != nil {
		return "", nil, err
	}
	raw, err := hex.DecodeString(sum)
	if err != nil || len(raw) != 32 || hex.EncodeToString(raw) != sum {
		return "", nil, fmt.Errorf("%w: sha256 is not 64 lowercase hex digits", wire.ErrInvalidRequest)
	}
	in := &s3.PutObjectInput{
		Bucket:         aws.String(s.bucket),
		Key:            aws.String(k),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(raw)),
		Metadata:       map[string]string{MetaSHA256: sum},
		IfNoneMatch:    aws.String("*"),
	}
	if contentType != "" {
		in.ContentType = aws.String(contentType)
	}
	req, err := s3.NewPresignClient(s.client).PresignPutObject(ctx, in, s3.WithPresignExpires(expires))
	if err != nil {
		return "", nil, fail(ctx, "presign put", key, err)
	}
	return req.URL, signedHeaders(req.SignedHeader), nil
}

// signedHeaders are the headers a presigned request must carry: all it
// was signed with but Host, which the HTTP client sets from the URL.
func signedHeaders(h map[string][]string) map[string]string {
	out := make(map[string]string, len(h))
	for name, v := range h {
		if len(v) > 0 && !strings.EqualFold(name, "host") {
			out[name] = v[0]
		}
	}
	return out
}

// StatGranted HEADs the object at key asking for its checksum and
// answers its SHA-256 as S3 recorded it (see objects.Granter): the
// full-object checksum S3 checked the PUT's body against when S3 keeps
// one (a composite checksum of a multipart upload, "…-N", is no SHA-256
// of the object and is passed over), else the x-amz-meta-sha256 metadata.
// Should the two disagree, the object has no SHA-256 to trust: "".
func (s *Store) StatGranted(ctx context.Context, key string) (objects.Info, error) {
	k, err := s.objectKey(key)
	if err != nil {
		return objects.Info{}, err
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket: aws.String(s.bucket), Key: aws.String(k), ChecksumMode: types.ChecksumModeEnabled,
	})
	if err != nil {
		return objects.Info{}, fail(ctx, "stat", key, err)
	}
	info := objects.Info{
		Key:     key,
		Size:    aws.ToInt64(out.ContentLength),
		ETag:    unquote(aws.ToString(out.ETag)),
		ModTime: aws.ToTime(out.LastModified),
	}
	meta := out.Metadata[MetaSHA256]
	if !wire.IsSHA256Hex(meta) {
		meta = ""
	}
	var checksum string
	if raw, err := base64.StdEncoding.DecodeString(aws.ToString(out.ChecksumSHA256)); err == nil && len(raw) == 32 {
		checksum = hex.EncodeToString(raw)
	}
	switch {
	case checksum != "" && meta != "" && checksum != meta:
	case checksum != "":
		info.SHA256 = checksum
	default:
		info.SHA256 = meta
	}
	return info, nil
}
