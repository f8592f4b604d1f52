package s3

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lakedata/lake/internal/failpoint"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/checkpoint"
)

// Resumable uploads (DESIGN §7), PutPathResumable:
//
//  1. No checkpoint: hash the whole file (its SHA-256 goes into the
//     object's metadata, fixed at creation), CreateMultipartUpload, and save
//     a checkpoint naming the upload before any part is sent.
//  2. A checkpoint: the file must be the same (path, size, mtime) and the
//     destination too (bucket, prefix, key). A completed one is checked
//     with a HEAD and returned. Otherwise ListParts must show every part
//     the checkpoint records, exactly (size, ETag, checksum).
//  3. Read the file part by part, in order: a finished part is re-hashed
//     and compared with its recorded SHA-256; a missing one is uploaded,
//     Concurrency at a time, and recorded in the checkpoint when done. The
//     whole file is hashed on the way and must match the checkpoint's sum.
//  4. CompleteMultipartUpload with If-None-Match: *; mark the checkpoint
//     completed.
//
// A failed or cancelled upload is never aborted: its parts and checkpoint
// are what the next call resumes from. An upload that S3 no longer knows
// (NoSuchUpload), or whose Complete is refused because the key exists, is
// ambiguous — a crash after Complete but before the checkpoint said so
// looks the same — and is settled by reading the object at the key back:
// if it is this file (size and SHA-256), the upload is done.

// Failpoints of resumable uploads (internal/failpoint): LAKE_FAILPOINTS
// naming one kills the process there.
const (
	// FailAfterPartUpload: a part is on S3, not yet in the checkpoint.
	FailAfterPartUpload = "s3-after-part-upload"
	// FailAfterPartCheckpoint: a part is on S3 and saved in the checkpoint.
	FailAfterPartCheckpoint = "s3-after-part-checkpoint"
	// FailAfterComplete: the object is complete and the checkpoint says so.
	FailAfterComplete = "s3-after-complete"
)

// Errors of resumable uploads, besides checkpoint.ErrSourceChanged and
// checkpoint.ErrBindingMismatch. Messages name parts and fields, never a
// checkpoint's content.
var (
	// ErrPartMismatch: S3's record of a finished part (presence, size, ETag
	// or checksum) differs from the checkpoint's.
	ErrPartMismatch = errors.New("the multipart upload on S3 does not match the checkpoint")
	// ErrUploadGone: the multipart upload no longer exists and its object is
	// not at its key: the upload was aborted (by `lake uploads cancel`, a
	// bucket lifecycle rule or another tool).
	ErrUploadGone = errors.New("the multipart upload no longer exists")
	// ErrObjectMismatch: the object at the upload's key is not the file the
	// checkpoint describes (its size or SHA-256 differs).
	ErrObjectMismatch = errors.New("the object at the upload's key is not this file")
	// ErrUploadCompleted: Cancel found no upload to abort because it
	// completed: its object exists.
	ErrUploadCompleted = errors.New("the upload already completed")
)

// putResumable is PutPathResumable after the key's check.
func (s *Store) putResumable(ctx context.Context, k, path string, sess *checkpoint.Session, opts objects.PutOptions) (objects.Info, error) {
	if err := ctx.Err(); err != nil {
		return objects.Info{}, err
	}
	f, src, err := checkpoint.OpenSource(path)
	if err != nil {
		return objects.Info{}, err
	}
	defer f.Close()
	binding := checkpoint.Binding{Bucket: s.bucket, Prefix: s.bindingPrefix(), Key: k}

	// known holds the part sums hashed in this run (a fresh upload); a
	// resumed run hashes as it goes.
	var known [][sha256.Size]byte
	cp, err := sess.Load()
	switch {
	case errors.Is(err, checkpoint.ErrNoCheckpoint):
		if src.Size <= s.partSize {
			// One part's worth (or an empty file, which S3 cannot send
			// as a multipart upload) has nothing to resume: one
			// PutObject, no checkpoint. A crash before it returns
			// leaves nothing at the key.
			return s.putFileSingle(ctx, k, f, src.Size, opts)
		}
		if cp, known, err = s.startResumable(ctx, f, src, binding, sess, opts); err != nil {
			return objects.Info{}, err
		}
	case err != nil:
		return objects.Info{}, err
	default:
		if err := cp.CheckSource(src); err != nil {
			return objects.Info{}, err
		}
		if err := cp.CheckBinding(binding); err != nil {
			return objects.Info{}, err
		}
		if cp.Completed {
			return s.completedInfo(ctx, cp)
		}
	}
	r := &resumable{s: s, sess: sess, f: f, cp: cp, known: known, tr: newTracker(opts.Progress, cp.Source.Size)}
	return r.run(ctx)
}

// bindingPrefix is the stage prefix as a checkpoint binding records it:
// without the trailing slash.
func (s *Store) bindingPrefix() string { return strings.TrimSuffix(s.prefix, "/") }

// startResumable hashes the file, creates the multipart upload and saves
// the first checkpoint, before any part is sent.
func (s *Store) startResumable(ctx context.Context, f *os.File, src checkpoint.Source, b checkpoint.Binding, sess *checkpoint.Session, opts objects.PutOptions) (*checkpoint.Checkpoint, [][sha256.Size]byte, error) {
	partSize := checkpoint.PartSize(src.Size, s.partSize)
	if partSize > MaxPartSize {
		return nil, nil, fmt.Errorf("%s: %d bytes do not fit in %d parts of at most %d bytes", src.Path, src.Size, MaxParts, int64(MaxPartSize))
	}
	sum, partSums, err := hashSource(ctx, f, src.Size, partSize)
	if err != nil {
		return nil, nil, fmt.Errorf("hash %s: %w", src.Path, err)
	}
	if afterHash != nil {
		afterHash(src.Path)
	}
	id, err := s.createMultipart(ctx, b.Key, opts.ContentType, sum)
	if err != nil {
		return nil, nil, err
	}
	b.UploadID = id
	cp := &checkpoint.Checkpoint{
		Version:     checkpoint.Version,
		Source:      src,
		Binding:     b,
		PartSize:    partSize,
		SHA256:      sum,
		ContentType: opts.ContentType,
	}
	if err := sess.Save(cp); err != nil {
		// No checkpoint names the upload, so nothing could resume it.
		s.abortMultipart(ctx, b.Key, id)
		return nil, nil, err
	}
	return cp, partSums, nil
}

// afterHash lets a test change the file between its hashing and its
// upload, a race a real writer wins only by chance.
var afterHash func(path string)

// hashSource reads the file once and returns its SHA-256 and each part's.
// The two hashes of a part run side by side on two cores. The part sums
// then travel as each part's x-amz-checksum-sha256, so S3 itself rejects a
// part whose bytes changed since this read, and the upload needs no hashing
// of its own.
func hashSource(ctx context.Context, f *os.File, size, partSize int64) (string, [][sha256.Size]byte, error) {
	whole := sha256.New()
	sums := make([][sha256.Size]byte, 0, (size+partSize-1)/partSize)
	buf := make([]byte, min(partSize, size))
	for off := int64(0); off < size; off += partSize {
		if err := ctx.Err(); err != nil {
			return "", nil, err
		}
		data := buf[:min(partSize, size-off)]
		if err := readPart(f, data, off); err != nil {
			return "", nil, err
		}
		var sum [sha256.Size]byte
		done := make(chan struct{})
		go func() { sum = sha256.Sum256(data); close(done) }()
		whole.Write(data)
		<-done
		sums = append(sums, sum)
	}
	return hex.EncodeToString(whole.Sum(nil)), sums, nil
}

// resumable is one run of a checkpointed multipart upload.
type resumable struct {
	s     *Store
	sess  *checkpoint.Session
	f     *os.File
	tr    *tracker
	known [][sha256.Size]byte // part sums hashed in this run, or nil

	mu sync.Mutex // serializes changes of cp.Parts and their Saves
	cp *checkpoint.Checkpoint
}

func (r *resumable) run(ctx context.Context) (objects.Info, error) {
	b := r.cp.Binding
	listed, err := r.s.listParts(ctx, b.Key, b.UploadID)
	if errorCode(err) == codeNoSuchUpload {
		return r.s.adopt(ctx, r.cp, r.sess)
	}
	if err != nil {
		return objects.Info{}, err
	}
	if err := matchParts(r.cp.Parts, listed); err != nil {
		return objects.Info{}, err
	}
	r.tr.resumed = len(r.cp.Parts)
	if r.tr.resumed > 0 {
		r.tr.add(0) // tell how many parts are resumed before the first one is verified
	}
	if err := r.uploadMissing(ctx); err != nil {
		return objects.Info{}, err
	}
	return r.complete(ctx)
}

// matchParts requires every finished part of the checkpoint to be listed
// on S3 exactly as recorded. Listed parts the checkpoint lacks (finished
// on S3 after the last Save) are uploaded again; S3 keeps the last one.
func matchParts(have []checkpoint.Part, listed []part) error {
	byNum := make(map[int32]part, len(listed))
	for _, p := range listed {
		byNum[p.Number] = p
	}
	for _, p := range have {
		l, ok := byNum[p.Number]
		switch {
		case !ok:
			return fmt.Errorf("%w: part %d is not on S3", ErrPartMismatch, p.Number)
		case l.Size != p.Length:
			return fmt.Errorf("%w: part %d has %d bytes on S3, %d in the checkpoint", ErrPartMismatch, p.Number, l.Size, p.Length)
		case l.ETag != p.ETag:
			return fmt.Errorf("%w: part %d has another ETag", ErrPartMismatch, p.Number)
		case l.Checksum != p.ChecksumSHA256:
			return fmt.Errorf("%w: part %d has another checksum", ErrPartMismatch, p.Number)
		}
	}
	return nil
}

// uploadMissing reads the file part by part in order, hashing all of it:
// finished parts are re-hashed and compared with the checkpoint, missing
// ones uploaded by up to Concurrency goroutines. The reader takes a part
// buffer only when one of Concurrency is free. It returns once every part
// request has returned.
func (r *resumable) uploadMissing(ctx context.Context) error {
	s, cp := r.s, r.cp
	size, partSize := cp.Source.Size, cp.PartSize
	n := int32((size + partSize - 1) / partSize)
	finished := make(map[int32]string, len(cp.Parts)) // number → hex SHA-256
	for _, p := range cp.Parts {
		finished[p.Number] = p.SHA256
	}

	uctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg    sync.WaitGroup
		bufs  = s.newPartBuffers(partSize, 0)
		whole = sha256.New()
	)
	defer bufs.release()
	for num := int32(1); num <= n && uctx.Err() == nil; num++ {
		buf := bufs.get(uctx)
		if buf == nil {
			break
		}
		off := int64(num-1) * partSize
		data := buf[:min(partSize, size-off)]
		if err := readPart(r.f, data, off); err != nil {
			cancel(err)
			bufs.put(buf)
			break
		}
		want, verify := finished[num]
		if r.known != nil && !verify {
			// Hashed at the start of this run: S3 checks the bytes.
			wg.Go(func() {
				defer bufs.put(buf)
				if err := r.sendPart(uctx, num, data); err != nil {
					cancel(err)
				}
			})
			continue
		}
		var sum [sha256.Size]byte
		var partHashed chan struct{}
		if verify {
			partHashed = make(chan struct{})
			// A finished part is hashed twice (its own sum, the whole
			// object's); the two run side by side on two cores.
			go func() { sum = sha256.Sum256(data); close(partHashed) }()
		}
		whole.Write(data)
		if verify {
			<-partHashed
			bufs.put(buf)
			if hex.EncodeToString(sum[:]) != want {
				cancel(fmt.Errorf("%w: part %d changed", checkpoint.ErrSourceChanged, num))
				break
			}
			r.tr.add(int64(len(data)))
			continue
		}
		wg.Go(func() {
			defer bufs.put(buf)
			if err := r.sendPart(uctx, num, data); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	if uctx.Err() != nil {
		return context.Cause(uctx)
	}
	if r.known == nil && hex.EncodeToString(whole.Sum(nil)) != cp.SHA256 {
		return fmt.Errorf("%w: its SHA-256 is not the one hashed when the upload started", checkpoint.ErrSourceChanged)
	}
	return nil
}

// readPart fills buf from the file at off; a file now too short is a
// changed source.
func readPart(f *os.File, buf []byte, off int64) error {
	n, err := f.ReadAt(buf, off)
	switch {
	case n == len(buf):
		return nil
	case err == nil || err == io.EOF:
		return fmt.Errorf("%w: it is shorter than when the upload started", checkpoint.ErrSourceChanged)
	default:
		return fmt.Errorf("read source: %w", err)
	}
}

// sendPart uploads one part and records it in the checkpoint.
func (r *resumable) sendPart(ctx context.Context, num int32, data []byte) error {
	b := r.cp.Binding // never changed during the run
	var known *[sha256.Size]byte
	if r.known != nil {
		known = &r.known[num-1]
	}
	p, err := r.s.uploadPart(ctx, b.Key, b.UploadID, num, data, known)
	// A part whose bytes no longer match the sum hashed at the start:
	// S3 names it by the payload hash or by the checksum.
	if code := errorCode(err); known != nil && (code == "BadDigest" || code == "XAmzContentSHA256Mismatch") {
		return fmt.Errorf("%w: part %d changed since it was hashed", checkpoint.ErrSourceChanged, num)
	}
	if err != nil {
		return err
	}
	failpoint.Hit(FailAfterPartUpload)
	sum, err := base64.StdEncoding.DecodeString(p.Checksum)
	if err != nil { // cannot happen: uploadPart encoded it
		return fmt.Errorf("part %d: checksum: %w", num, err)
	}
	rec := checkpoint.Part{
		Number: num, Length: p.Size, ETag: p.ETag,
		ChecksumSHA256: p.Checksum, SHA256: hex.EncodeToString(sum),
	}
	r.mu.Lock()
	cp := r.cp
	i, _ := slices.BinarySearchFunc(cp.Parts, num, func(q checkpoint.Part, n int32) int { return int(q.Number - n) })
	cp.Parts = slices.Insert(cp.Parts, i, rec)
	err = r.sess.Save(cp)
	r.mu.Unlock()
	if err != nil {
		return err
	}
	failpoint.Hit(FailAfterPartCheckpoint)
	r.tr.add(p.Size)
	return nil
}

// complete publishes the upload and marks the checkpoint completed.
func (r *resumable) complete(ctx context.Context) (objects.Info, error) {
	if err := ctx.Err(); err != nil {
		return objects.Info{}, err
	}
	cp := r.cp
	parts := make([]part, len(cp.Parts))
	for i, p := range cp.Parts {
		parts[i] = part{Number: p.Number, Size: p.Length, ETag: p.ETag, Checksum: p.ChecksumSHA256}
	}
	var etag string
	err := retryConflict(ctx, func() error {
		var err error
		etag, err = r.s.completeMultipart(ctx, cp.Binding.Key, cp.Binding.UploadID, parts, true)
		return err
	})
	if err != nil {
		if errorCode(err) == codeNoSuchUpload || errors.Is(mapErr(err), objects.ErrExists) {
			// Ambiguous: our own Complete may have gone through (an
			// answer lost and the request resent).
			return r.s.adopt(ctx, cp, r.sess)
		}
		return objects.Info{}, err
	}
	cp.Completed, cp.ETag = true, etag
	if err := r.sess.Save(cp); err != nil {
		// The object is out; a next call finds the upload gone and the
		// object at the key, and adopts it.
		return objects.Info{}, err
	}
	failpoint.Hit(FailAfterComplete)
	return published(cp.Source.Size, cp.SHA256, etag), nil
}

// adopt settles an upload that S3 no longer knows, or whose Complete found
// the key taken: when the object at the key is this file, byte for byte
// (its length and SHA-256), the upload completed and the checkpoint is
// marked so; otherwise it is an error.
func (s *Store) adopt(ctx context.Context, cp *checkpoint.Checkpoint, sess *checkpoint.Session) (objects.Info, error) {
	in, etag, err := s.verifyObject(ctx, cp)
	if errors.Is(err, objects.ErrNotFound) {
		return objects.Info{}, fmt.Errorf("%w and no object is at its key: it was aborted; run `lake uploads cancel %s` to drop its checkpoint, then put the file again",
			ErrUploadGone, cp.Source.Path)
	}
	if err != nil {
		return objects.Info{}, err
	}
	n := (cp.Source.Size + cp.PartSize - 1) / cp.PartSize
	if int64(len(cp.Parts)) == n && etag != "" {
		// A checkpoint short of parts cannot say completed (Validate);
		// the next call then verifies the object again.
		cp.Completed, cp.ETag = true, etag
		if err := sess.Save(cp); err != nil {
			return objects.Info{}, err
		}
	}
	return in, nil
}

// verifyObject reads the object at the checkpoint's key and requires the
// checkpoint's length and SHA-256. It returns the object's Info and ETag
// as S3 gave it.
func (s *Store) verifyObject(ctx context.Context, cp *checkpoint.Checkpoint) (objects.Info, string, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(cp.Binding.Key)})
	if err != nil {
		return objects.Info{}, "", mapErr(err)
	}
	defer out.Body.Close()
	h := sha256.New()
	n, err := copyCtx(ctx, h, out.Body)
	if err != nil {
		return objects.Info{}, "", fmt.Errorf("read back the object: %w", err)
	}
	if n != cp.Source.Size || hex.EncodeToString(h.Sum(nil)) != cp.SHA256 {
		return objects.Info{}, "", fmt.Errorf("%w: its size (%d bytes, want %d) or SHA-256 differs", ErrObjectMismatch, n, cp.Source.Size)
	}
	etag := aws.ToString(out.ETag)
	return objects.Info{Size: n, SHA256: cp.SHA256, ETag: unquote(etag), ModTime: aws.ToTime(out.LastModified)}, etag, nil
}

// completedInfo checks, without reading it, that the object of a
// completed checkpoint is still there with its size (and SHA-256
// metadata, when it has one).
func (s *Store) completedInfo(ctx context.Context, cp *checkpoint.Checkpoint) (objects.Info, error) {
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(cp.Binding.Key)})
	if err != nil {
		if errors.Is(mapErr(err), objects.ErrNotFound) {
			return objects.Info{}, fmt.Errorf("%w: it completed but its object is no longer at its key; run `lake uploads cancel %s` to drop its checkpoint, then put the file again",
				ErrUploadGone, cp.Source.Path)
		}
		return objects.Info{}, err
	}
	size := aws.ToInt64(out.ContentLength)
	if sum := out.Metadata[MetaSHA256]; size != cp.Source.Size || sum != "" && sum != cp.SHA256 {
		return objects.Info{}, fmt.Errorf("%w: its size (%d bytes, want %d) or SHA-256 metadata differs", ErrObjectMismatch, size, cp.Source.Size)
	}
	return objects.Info{
		Size:    size,
		SHA256:  cp.SHA256,
		ETag:    unquote(aws.ToString(out.ETag)),
		ModTime: aws.ToTime(out.LastModified),
	}, nil
}

// Uploads implements objects.Resumer: the checkpoints in dir whose upload
// goes to this store's bucket and prefix.
func (s *Store) Uploads(ctx context.Context, dir string) ([]checkpoint.Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	all, err := checkpoint.List(dir)
	if err != nil {
		return nil, fmt.Errorf("s3: uploads: %w", err)
	}
	var out []checkpoint.Entry
	for _, e := range all {
		if cp := e.Checkpoint; cp != nil && cp.Binding.Bucket == s.bucket && cp.Binding.Prefix == s.bindingPrefix() {
			out = append(out, e)
		}
	}
	return out, nil
}

// Cancel implements objects.Resumer: it drops the multipart upload a
// checkpoint records (`lake uploads cancel`), with its parts. The
// checkpoint must belong to this stage (bucket and prefix; else
// checkpoint.ErrBindingMismatch); removing the checkpoint file is the
// caller's part. An upload S3 no longer knows is already cancelled —
// unless its object exists, in which case the upload completed and Cancel
// fails with ErrUploadCompleted.
func (s *Store) Cancel(ctx context.Context, cp *checkpoint.Checkpoint) error {
	if cp == nil {
		return errors.New("s3: cancel: no checkpoint")
	}
	b := cp.Binding
	if err := cp.CheckBinding(checkpoint.Binding{Bucket: s.bucket, Prefix: s.bindingPrefix(), Key: b.Key}); err != nil {
		return fmt.Errorf("s3: cancel: %w", err)
	}
	key, ok := strings.CutPrefix(b.Key, s.prefix)
	if !ok {
		return fmt.Errorf("s3: cancel: %w: the key is outside the stage prefix", checkpoint.ErrBindingMismatch)
	}
	_, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket:   aws.String(s.bucket),
		Key:      aws.String(b.Key),
		UploadId: aws.String(b.UploadID),
	})
	if err == nil {
		return nil
	}
	if errorCode(err) != codeNoSuchUpload {
		return fail(ctx, "cancel upload", key, err)
	}
	_, err = s.head(ctx, b.Key)
	switch {
	case err == nil:
		return fmt.Errorf("s3: cancel upload %s: %w: the object exists", key, ErrUploadCompleted)
	case errors.Is(mapErr(err), objects.ErrNotFound):
		return nil
	default:
		return fail(ctx, "cancel upload", key, err)
	}
}
