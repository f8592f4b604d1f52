package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/lakedata/lake/objects"
)

// abortTimeout bounds an AbortMultipartUpload, which runs on a context of
// its own because the upload's context is often the reason to abort.
const abortTimeout = 30 * time.Second

// listPartsPage is the page size of listParts; 0 leaves it to S3 (1000).
// Tests lower it to exercise pagination.
var listPartsPage int32

// part is a finished part of a multipart upload.
type part struct {
	Number   int32
	Size     int64
	ETag     string // as S3 returned it, quotes included
	Checksum string // base64 SHA-256 of the part (x-amz-checksum-sha256)
}

// createMultipart starts a multipart upload of bucket key k whose parts
// carry SHA-256 checksums, and returns its upload id. sha, when not empty,
// is the whole object's hex SHA-256 for its metadata.
func (s *Store) createMultipart(ctx context.Context, k, contentType, sha string) (string, error) {
	in := &s3.CreateMultipartUploadInput{
		Bucket:            aws.String(s.bucket),
		Key:               aws.String(k),
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
	}
	if contentType != "" {
		in.ContentType = aws.String(contentType)
	}
	if sha != "" {
		in.Metadata = map[string]string{MetaSHA256: sha}
	}
	out, err := s.client.CreateMultipartUpload(ctx, in)
	if err != nil {
		return "", fmt.Errorf("create multipart upload: %w", err)
	}
	return aws.ToString(out.UploadId), nil
}

// uploadPart sends data as part number num, with its SHA-256 as checksum,
// which S3 verifies (BadDigest otherwise).
// known, when not nil, is data's SHA-256 computed earlier: S3 then rejects
// the part (BadDigest) if data no longer has it.
//
// The payload is signed as UNSIGNED-PAYLOAD: x-amz-checksum-sha256 is a
// signed header and S3 checks the body against it, so the body is as bound
// to the signature as with a signed payload hash, and S3 hashes the part
// once instead of twice (x-amz-content-sha256 and the checksum each cost a
// SHA-256 pass on the server).
func (s *Store) uploadPart(ctx context.Context, k, uploadID string, num int32, data []byte, known *[sha256.Size]byte) (part, error) {
	var sum [sha256.Size]byte
	if known != nil {
		sum = *known
	} else {
		sum = sha256.Sum256(data)
	}
	checksum := base64.StdEncoding.EncodeToString(sum[:])
	out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{
		Bucket:         aws.String(s.bucket),
		Key:            aws.String(k),
		UploadId:       aws.String(uploadID),
		PartNumber:     aws.Int32(num),
		Body:           bytes.NewReader(data),
		ContentLength:  aws.Int64(int64(len(data))),
		ChecksumSHA256: aws.String(checksum),
	}, s3.WithAPIOptions(v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware))
	if err != nil {
		return part{}, fmt.Errorf("upload part %d: %w", num, err)
	}
	if got := aws.ToString(out.ChecksumSHA256); got != "" && got != checksum {
		return part{}, fmt.Errorf("upload part %d: S3 recorded checksum %s, sent %s", num, got, checksum)
	}
	return part{Number: num, Size: int64(len(data)), ETag: aws.ToString(out.ETag), Checksum: checksum}, nil
}

// listParts returns the parts S3 holds for an upload, in part order.
func (s *Store) listParts(ctx context.Context, k, uploadID string) ([]part, error) {
	var parts []part
	in := &s3.ListPartsInput{
		Bucket:   aws.String(s.bucket),
		Key:      aws.String(k),
		UploadId: aws.String(uploadID),
	}
	if listPartsPage > 0 {
		in.MaxParts = aws.Int32(listPartsPage)
	}
	pages := s3.NewListPartsPaginator(s.client, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list parts: %w", err)
		}
		for _, p := range page.Parts {
			parts = append(parts, part{
				Number:   aws.ToInt32(p.PartNumber),
				Size:     aws.ToInt64(p.Size),
				ETag:     aws.ToString(p.ETag),
				Checksum: aws.ToString(p.ChecksumSHA256),
			})
		}
	}
	slices.SortFunc(parts, func(a, b part) int { return int(a.Number - b.Number) })
	return parts, nil
}

// completeMultipart publishes the upload from parts (in part order);
// ifAbsent adds If-None-Match: *, so an existing key fails it with 412. It
// returns the object's ETag.
func (s *Store) completeMultipart(ctx context.Context, k, uploadID string, parts []part, ifAbsent bool) (string, error) {
	done := make([]types.CompletedPart, len(parts))
	for i, p := range parts {
		done[i] = types.CompletedPart{
			PartNumber:     aws.Int32(p.Number),
			ETag:           aws.String(p.ETag),
			ChecksumSHA256: aws.String(p.Checksum),
		}
	}
	in := &s3.CompleteMultipartUploadInput{
		Bucket:          aws.String(s.bucket),
		Key:             aws.String(k),
		UploadId:        aws.String(uploadID),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done},
	}
	if ifAbsent {
		in.IfNoneMatch = aws.String("*")
	}
	out, err := s.client.CompleteMultipartUpload(ctx, in)
	if err != nil {
		return "", fmt.Errorf("complete multipart upload: %w", err)
	}
	return aws.ToString(out.ETag), nil
}

// abortMultipart drops an upload and its parts, on a fresh context because
// ctx may be what ended the upload. A failure is logged, not returned: the
// caller is already failing, and the bucket's lifecycle rule for incomplete
// uploads is the backstop.
//
// A part request the client gave up on (its context ended) may still be
// running on the server and finish after the abort, bringing the upload
// back; S3 documents that an abort may have to be repeated. So the abort
// is repeated until ListParts says the upload is gone, a few times.
func (s *Store) abortMultipart(ctx context.Context, k, uploadID string) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		_, err := s.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{
			Bucket:   aws.String(s.bucket),
			Key:      aws.String(k),
			UploadId: aws.String(uploadID),
		})
		if err != nil && errorCode(err) != codeNoSuchUpload {
			s.logger.Warn("cannot abort multipart upload; its parts remain until a lifecycle rule removes them",
				"key", k, "upload_id", uploadID, "err", err)
			return
		}
		_, err = s.client.ListParts(actx, &s3.ListPartsInput{
			Bucket:   aws.String(s.bucket),
			Key:      aws.String(k),
			UploadId: aws.String(uploadID),
		})
		if errorCode(err) == codeNoSuchUpload || attempt == abortAttempts-1 {
			if err == nil {
				s.logger.Warn("multipart upload came back after its abort; its parts remain until a lifecycle rule removes them",
					"key", k, "upload_id", uploadID)
			}
			return
		}
		if err != nil { // cannot tell; the abort itself succeeded
			return
		}
		select {
		case <-actx.Done():
			return
		case <-time.After(abortRetryPause):
		}
	}
}

// abortAttempts and abortRetryPause bound the repeated abort.
const (
	abortAttempts   = 5
	abortRetryPause = 100 * time.Millisecond
)

// uploadMultipart sends first (a full part) and the rest of src as a
// multipart upload. The caller's goroutine reads parts while up to
// s.concurrency others upload them; it reads the next part only when one of
// s.concurrency buffers is free, so no more than that many parts are held.
// On any failure, or when ctx ends, the upload is aborted after every part
// request has returned.
func (s *Store) uploadMultipart(ctx context.Context, k string, src *source, first []byte, partSize int64, opts objects.PutOptions, wantSHA string, tr *tracker) (objects.Info, error) {
	// From a stream, the object's SHA-256 is known only after the last
	// part, too late for metadata, which is fixed at creation.
	id, err := s.createMultipart(ctx, k, opts.ContentType, wantSHA)
	if err != nil {
		s.putPartBuf(first)
		return objects.Info{}, err
	}
	completed := false
	defer func() {
		if !completed {
			s.abortMultipart(ctx, k, id)
		}
	}()

	parts, err := s.uploadParts(ctx, k, id, src, first, partSize, tr)
	if err != nil {
		return objects.Info{}, err
	}
	hexSum := hex.EncodeToString(src.sum())
	if wantSHA != "" && hexSum != wantSHA {
		return objects.Info{}, errChanged
	}
	if err := ctx.Err(); err != nil {
		return objects.Info{}, err
	}
	etag, err := s.completeMultipart(ctx, k, id, parts, false)
	if err != nil {
		return objects.Info{}, err
	}
	completed = true
	return published(src.n, hexSum, etag), nil
}

// uploadParts runs the read/upload pipeline of uploadMultipart and returns
// the parts in order once all are uploaded, or the first error (the
// reader's, a part's, or ctx's) once every part request has returned.
func (s *Store) uploadParts(ctx context.Context, k, uploadID string, src *source, first []byte, partSize int64, tr *tracker) ([]part, error) {
	uctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		parts []part
		bufs  = s.newPartBuffers(partSize, 1) // first is already held
	)
	defer bufs.release()
	send := func(num int32, buf []byte, n int) {
		wg.Go(func() {
			defer bufs.put(buf)
			p, err := s.uploadPart(uctx, k, uploadID, num, buf[:n], nil)
			if err != nil {
				cancel(err)
				return
			}
			mu.Lock()
			parts = append(parts, p)
			mu.Unlock()
			tr.add(p.Size)
		})
	}
	send(1, first[:cap(first)], len(first))
	for num := int32(2); !src.eof && uctx.Err() == nil; num++ {
		if num > MaxParts {
			cancel(fmt.Errorf("object exceeds %d parts of %d bytes", MaxParts, partSize))
			break
		}
		buf := bufs.get(uctx)
		if buf == nil {
			break
		}
		n, err := src.fill(uctx, buf)
		if err != nil {
			cancel(err)
			bufs.put(buf)
			break
		}
		if n == 0 { // cannot happen: a part is sent only when more data is known to follow
			bufs.put(buf)
			break
		}
		send(num, buf, n)
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if uctx.Err() != nil {
		return nil, context.Cause(uctx)
	}
	slices.SortFunc(parts, func(a, b part) int { return int(a.Number - b.Number) })
	return parts, nil
}
