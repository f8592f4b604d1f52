package presigned

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/checkpoint"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// grantURLs is how many part URLs a grant with known sums asks for at
// once, per part uploading at a time; renewals ask for the rest.
const grantURLs = 2

// upload is one file on its way through a grant.
type upload struct {
	u     *Uploader
	o     Options
	r     io.ReaderAt
	size  int64
	count int64

	// Resumable path uploads only.
	sess *checkpoint.Session
	src  checkpoint.Source
	path string

	key, id string // the grant's, once granted

	mu      sync.Mutex // guards cp, done, resumed and Progress calls
	cp      *checkpoint.Checkpoint
	done    int64
	resumed int
	sent    atomic.Int64
}

func (u *Uploader) newUpload(r io.ReaderAt, size int64, o Options) (*upload, error) {
	switch {
	case o.PartSize <= 0:
		return nil, fmt.Errorf("presigned: part size %d", o.PartSize)
	case o.Table == "" || o.FileName == "":
		return nil, errors.New("presigned: an upload needs a table and a file name")
	case o.URLLifetime < 0:
		return nil, fmt.Errorf("presigned: URL lifetime %v", o.URLLifetime)
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	count := partCount(size, o.PartSize)
	if count > checkpoint.MaxParts {
		return nil, fmt.Errorf("presigned: %d bytes make %d parts of %d bytes, at most %d", size, count, o.PartSize, checkpoint.MaxParts)
	}
	return &upload{u: u, o: o, r: r, size: size, count: count}, nil
}

// expires is the URL lifetime requests ask for.
func (up *upload) expires() *int64 {
	if up.o.URLLifetime == 0 {
		return nil
	}
	us := up.o.URLLifetime.Microseconds()
	return &us
}

// partLen is the length of part n.
func (up *upload) partLen(n int32) int64 {
	return max(0, min(up.o.PartSize, up.size-int64(n-1)*up.o.PartSize))
}

// fresh grants a new upload and sends the whole file: hashed first when
// it is one part or the service asks for it, else hashed as it uploads.
// A file of one part is read into memory once, hashed there and, when the
// service grants a single PUT, sent from there.
func (up *upload) fresh(ctx context.Context) (Result, error) {
	req := &lakepb.UploadGrantRequest{
		Table: up.o.Table, FileName: up.o.FileName, Size: up.size, ContentType: up.o.ContentType,
		ExpiresMicros: up.expires(), NoDedup: up.o.NoDedup,
	}
	var sums [][32]byte
	var whole string
	hash := func() error {
		var err error
		if sums, whole, err = up.hashAll(ctx); err != nil {
			return err
		}
		up.withSums(req, sums, whole)
		return nil
	}
	var one []byte // a one-part file's bytes
	if up.count == 1 {
		var err error
		if one, err = up.readOne(); err != nil {
			return Result{}, err
		}
		raw := sha256.Sum256(one)
		sums, whole = [][32]byte{raw}, hex.EncodeToString(raw[:])
		up.withSums(req, sums, whole)
	}
	g, err := GrantHashingFirstIfAsked(ctx, up.u.act, req, hash)
	if err != nil {
		return Result{}, fmt.Errorf("presigned: grant an upload of %s: %w", up.o.FileName, err)
	}
	if ex := g.GetExisting(); ex != nil {
		return up.dedup(ex)
	}
	if ps := g.GetPartSize(); ps != 0 && ps != up.o.PartSize {
		return Result{}, fmt.Errorf("presigned: the grant cuts parts of %d bytes, the stage said %d", ps, up.o.PartSize)
	}
	if g.GetKey() != "" && g.GetUploadId() == "" && !g.GetHashFirst() && one != nil && isSinglePut(g) {
		return up.single(ctx, g, one, whole)
	}
	if g.GetKey() == "" || g.GetUploadId() == "" || g.GetHashFirst() {
		return Result{}, fmt.Errorf("presigned: %s: %w", up.o.FileName, ErrNotGranted)
	}
	up.key, up.id = g.GetKey(), g.GetUploadId()
	urls := newURLCache(up, sums)
	urls.add(g.GetUrls(), g.GetExpiresAtUnixMicros(), req.GetParts())
	if up.sess != nil {
		up.cp = &checkpoint.Checkpoint{
			Version: checkpoint.Version,
			Kind:    checkpoint.KindGranted,
			Source:  up.src,
			Binding: checkpoint.Binding{
				Bucket: up.o.Bucket, Prefix: up.o.Prefix, Key: withPrefix(up.o.Prefix, up.key), UploadID: up.id,
			},
			PartSize:    up.o.PartSize,
			SHA256:      whole,
			ContentType: up.o.ContentType,
			CommitID:    up.o.CommitID,
			Table:       up.o.Table,
		}
		if err := up.sess.Save(up.cp); err != nil {
			return Result{}, fmt.Errorf("presigned: %w", err)
		}
	}
	return up.send(ctx, urls, whole, nil)
}

// readOne reads the whole of a file of one part.
func (up *upload) readOne() ([]byte, error) {
	data := make([]byte, up.size)
	if got, err := up.r.ReadAt(data, 0); got != len(data) {
		if err == nil || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("presigned: %s: %w: it ended early", up.o.FileName, checkpoint.ErrSourceChanged)
		}
		return nil, fmt.Errorf("presigned: read %s: %w", up.o.FileName, err)
	}
	return data, nil
}

// isSinglePut tells a single-PUT grant: no upload id and one URL, of
// number 0, for the whole file.
func isSinglePut(g *lakepb.UploadGrant) bool {
	return g.GetUploadId() == "" && len(g.GetUrls()) == 1 && g.GetUrls()[0].GetNumber() == 0
}

// single sends a file of one part, data, whose SHA-256 is whole, with
// the one PUT a single-PUT grant signed, and completes it with no upload
// id. It writes no checkpoint (one of kind checkpoint.KindGranted binds
// an upload id, and there is none): interrupted before its completion,
// the next run asks a fresh grant, and an object that landed at this key
// is an orphan for gc. A granted checkpoint of the file left from before
// is settled once the object is complete, as a dedup answer settles it.
func (up *upload) single(ctx context.Context, g *lakepb.UploadGrant, data []byte, whole string) (Result, error) {
	up.key, up.id = g.GetKey(), ""
	urls := newURLCache(up, nil)
	urls.add(g.GetUrls(), g.GetExpiresAtUnixMicros(), []*lakepb.UploadPart{{Number: 0, Sha256: whole}})
	if _, err := up.putPart(ctx, urls, 0, data, whole); err != nil {
		return Result{}, fmt.Errorf("presigned: upload %s: %w", up.o.FileName, err)
	}
	up.sent.Add(int64(len(data)))
	up.step(StepPartUploaded)
	if up.path != "" {
		now, err := statSource(up.path)
		if err != nil {
			return Result{}, fmt.Errorf("presigned: upload %s: %w", up.path, err)
		}
		if err := (&checkpoint.Checkpoint{Source: up.src}).CheckSource(now); err != nil {
			return Result{}, fmt.Errorf("presigned: upload %s: %w while it was read", up.path, err)
		}
	}
	size := up.size
	f, err := up.u.act.Complete(ctx, &lakepb.UploadCompleteRequest{
		Table: up.o.Table, Key: up.key, Size: &size, Sha256: whole, ContentType: up.o.ContentType,
	})
	if err != nil {
		return Result{}, fmt.Errorf("presigned: complete the upload of %s at %s: %w", up.o.FileName, up.key, err)
	}
	if err := up.settle(f); err != nil {
		return Result{}, err
	}
	up.progress(up.size)
	return Result{File: f, BytesSent: up.sent.Load()}, nil
}

// withSums puts what a grant needs for a dedup match into req: the whole
// sum, the part digest, and the sums of the first parts for URLs.
func (up *upload) withSums(req *lakepb.UploadGrantRequest, sums [][32]byte, whole string) {
	req.Sha256, req.PartDigest = whole, partDigest(sums)
	req.Parts = nil
	for i := range min(len(sums), grantURLs*up.o.Concurrency) {
		req.Parts = append(req.Parts, &lakepb.UploadPart{Number: int32(i + 1), Sha256: hex.EncodeToString(sums[i][:])})
	}
}

// dedup ends an upload the service answered with an object it holds. A
// granted checkpoint of this file is stale then. One that holds a commit
// id (its append may have committed before a crash) becomes the record of
// the answered object with that id, in one atomic save, so the id is
// never lost between here and the append; one without is removed.
func (up *upload) dedup(ex *lakepb.UploadedFile) (Result, error) {
	if err := up.settle(ex); err != nil {
		return Result{}, err
	}
	up.progress(up.size)
	return Result{File: ex, Deduplicated: true}, nil
}

// settle ends a granted checkpoint of this file that f, an object the
// service answered without it, makes stale (see dedup).
func (up *upload) settle(ex *lakepb.UploadedFile) error {
	if up.sess != nil {
		cp, err := up.sess.Load()
		if err == nil && cp.Kind == checkpoint.KindGranted {
			if cp.CommitID != "" && cp.Table != "" {
				err = up.sess.Save(&checkpoint.Checkpoint{
					Version: checkpoint.Version, Kind: checkpoint.KindSingle, Source: up.src,
					Binding: checkpoint.Binding{Key: ex.GetKey()}, SHA256: ex.GetSha256(), ContentType: ex.GetContentType(),
					Completed: true, ETag: ex.GetEtag(), CommitID: cp.CommitID, Table: cp.Table,
				})
			} else {
				err = up.sess.Remove()
			}
			if err != nil {
				return fmt.Errorf("presigned: %w", err)
			}
		}
	}
	return nil
}

// resume continues the upload cp records: a completed one is completed
// again, a running one sends the parts the stage does not hold, and one
// the stage no longer holds starts over.
func (up *upload) resume(ctx context.Context, cp *checkpoint.Checkpoint) (Result, error) {
	if err := cp.CheckSource(up.src); err != nil {
		return Result{}, fmt.Errorf("presigned: resume %s: %w", up.path, err)
	}
	if cp.Table != "" && cp.Table != up.o.Table {
		return Result{}, fmt.Errorf("presigned: resume %s: %w: its upload is for table %q, not %q", up.path, checkpoint.ErrBindingMismatch, cp.Table, up.o.Table)
	}
	key, ok := withoutPrefix(cp.Binding.Prefix, cp.Binding.Key)
	if !ok || cp.Binding.Bucket != up.o.Bucket || cp.Binding.Prefix != up.o.Prefix || cp.PartSize != up.o.PartSize {
		return up.fresh(ctx) // another stage, or parts cut differently: that upload cannot be completed
	}
	up.key, up.id, up.cp = key, cp.Binding.UploadID, cp
	if up.o.CommitID != "" {
		cp.CommitID = up.o.CommitID
	}
	cp.Table = up.o.Table
	if cp.Completed {
		res, err := up.complete(ctx, cp.SHA256)
		if notFound(err) {
			return up.fresh(ctx)
		}
		return res, err
	}
	held, err := up.u.act.Renew(ctx, &lakepb.UploadRenewRequest{
		Table: up.o.Table, Key: up.key, UploadId: up.id, ListParts: true, ExpiresMicros: up.expires(),
	})
	if notFound(err) {
		// Completed, the answer lost before it was saved? Then the
		// object is there; else start again.
		if cp.SHA256 != "" {
			if res, err := up.complete(ctx, cp.SHA256); err == nil {
				return res, nil
			}
		}
		up.cp.Parts = nil
		return up.fresh(ctx)
	}
	if err != nil {
		return Result{}, fmt.Errorf("presigned: resume %s: parts the stage holds: %w", up.path, err)
	}
	have := make(map[int32]*lakepb.HeldPart, len(held.GetHeld()))
	for _, h := range held.GetHeld() {
		have[h.GetNumber()] = h
	}
	etags := make(map[int32]string, len(cp.Parts))
	for _, p := range cp.Parts {
		etags[p.Number] = p.ETag
	}
	cp.Parts = nil // refilled as the parts are verified or sent
	urls := newURLCache(up, nil)
	return up.send(ctx, urls, cp.SHA256, func(n int32, length int64, sum string) (string, bool) {
		h := have[n]
		if h == nil || h.GetSize() != length || h.GetSha256() != sum {
			return "", false
		}
		return etags[n], true
	})
}

// heldFunc reports whether the stage holds part n of length bytes whose
// SHA-256 is sum, and its ETag if known.
type heldFunc func(n int32, length int64, sum string) (etag string, ok bool)

// GrantHashingFirstIfAsked asks act for the grant req describes. Sent
// without a sha256 (the file is to be hashed while it uploads), it is
// answered hash_first when the service holds an object of this size, or
// refused as invalid by a service from before hashing overlapped the
// upload: then hash fills in req's sums and the grant is asked again. An
// error of hash is returned as it is.
func GrantHashingFirstIfAsked(ctx context.Context, act interface {
	Grant(context.Context, *lakepb.UploadGrantRequest) (*lakepb.UploadGrant, error)
}, req *lakepb.UploadGrantRequest, hash func() error) (*lakepb.UploadGrant, error) {
	g, err := act.Grant(ctx, req)
	if req.Sha256 == "" && (g.GetHashFirst() || errors.Is(err, wire.ErrInvalidRequest)) {
		if err := hash(); err != nil {
			return nil, err
		}
		g, err = act.Grant(ctx, req)
	}
	return g, err
}

// hashAll returns each part's SHA-256 and the whole file's. The two run
// side by side, each reading the file on its own (the second read comes
// from the page cache): the whole-file hash is one sequential stream, so
// splitting the work this way is what lets a second core help, which
// halves the wait before a deduplicated answer.
func (up *upload) hashAll(ctx context.Context) ([][32]byte, string, error) {
	sums := make([][32]byte, up.count)
	var whole string
	var wg sync.WaitGroup
	var partsErr, wholeErr error
	wg.Go(func() {
		buf := make([]byte, 1<<20)
		for n := int32(1); int64(n) <= up.count; n++ {
			if partsErr = ctx.Err(); partsErr != nil {
				return
			}
			ph := sha256.New()
			if partsErr = up.hashRange(ph, int64(n-1)*up.o.PartSize, up.partLen(n), buf); partsErr != nil {
				return
			}
			ph.Sum(sums[n-1][:0])
		}
	})
	wg.Go(func() {
		h := sha256.New()
		if wholeErr = up.hashRange(h, 0, up.size, make([]byte, 1<<20)); wholeErr == nil {
			whole = hex.EncodeToString(h.Sum(nil))
		}
	})
	wg.Wait()
	if err := cmp.Or(partsErr, wholeErr); err != nil {
		return nil, "", err
	}
	return sums, whole, nil
}

// hashRange feeds length bytes of the file from off into h.
func (up *upload) hashRange(h io.Writer, off, length int64, buf []byte) error {
	got, err := io.CopyBuffer(h, io.NewSectionReader(up.r, off, length), buf)
	if err != nil {
		return fmt.Errorf("presigned: read %s: %w", up.o.FileName, err)
	}
	if got != length {
		return fmt.Errorf("presigned: %s: %w: it ended early", up.o.FileName, checkpoint.ErrSourceChanged)
	}
	return nil
}

// job is one part read and handed to a worker.
type job struct {
	n    int32
	data []byte
}

// send reads the parts in order, feeding the whole file's SHA-256 (which
// must be wantWhole when that is known), and has workers hash and PUT
// each one the stage does not hold yet; then it completes the upload.
// At most Concurrency+1 part buffers exist at once.
func (up *upload) send(ctx context.Context, urls *urlCache, wantWhole string, held heldFunc) (Result, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	slots := up.o.Concurrency + 1
	free := make(chan []byte, slots)
	made := 0
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range up.o.Concurrency {
		wg.Go(func() {
			for j := range jobs {
				if err := up.part(ctx, urls, j, held); err != nil {
					cancel(err)
				}
				free <- j.data
			}
		})
	}
	whole := sha256.New()
	readErr := func() error {
		defer close(jobs)
		for n := int32(1); int64(n) <= up.count; n++ {
			var buf []byte
			select {
			case buf = <-free:
			default:
				if made < slots {
					buf, made = make([]byte, up.o.PartSize), made+1
					break
				}
				select {
				case buf = <-free:
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			}
			data := buf[:up.partLen(n)]
			if got, err := up.r.ReadAt(data, int64(n-1)*up.o.PartSize); got != len(data) {
				if err == nil || errors.Is(err, io.EOF) {
					return fmt.Errorf("%w: it ended early", checkpoint.ErrSourceChanged)
				}
				return fmt.Errorf("read: %w", err)
			}
			whole.Write(data)
			select {
			case jobs <- job{n: n, data: data}:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		return nil
	}()
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return Result{}, fmt.Errorf("presigned: upload %s: %w", up.o.FileName, err)
	}
	if readErr != nil {
		return Result{}, fmt.Errorf("presigned: upload %s: %w", up.o.FileName, readErr)
	}
	sum := hex.EncodeToString(whole.Sum(nil))
	if wantWhole != "" && sum != wantWhole {
		return Result{}, fmt.Errorf("presigned: upload %s: %w: its SHA-256 differs from the one hashed before", up.o.FileName, checkpoint.ErrSourceChanged)
	}
	if up.path != "" {
		now, err := statSource(up.path)
		if err != nil {
			return Result{}, fmt.Errorf("presigned: upload %s: %w", up.path, err)
		}
		if err := (&checkpoint.Checkpoint{Source: up.src}).CheckSource(now); err != nil {
			return Result{}, fmt.Errorf("presigned: upload %s: %w while it was read", up.path, err)
		}
	}
	if up.cp != nil {
		up.mu.Lock()
		up.cp.SHA256 = sum
		err := up.sess.Save(up.cp)
		up.mu.Unlock()
		if err != nil {
			return Result{}, fmt.Errorf("presigned: %w", err)
		}
	}
	return up.complete(ctx, sum)
}

// part hashes one part and PUTs it, unless the stage holds it already.
func (up *upload) part(ctx context.Context, urls *urlCache, j job, held heldFunc) error {
	raw := sha256.Sum256(j.data)
	sum := hex.EncodeToString(raw[:])
	length := int64(len(j.data))
	if want, ok := urls.knownSum(j.n); ok && want != raw {
		return fmt.Errorf("%w: part %d differs from the one hashed before", checkpoint.ErrSourceChanged, j.n)
	}
	if held != nil {
		if etag, ok := held(j.n, length, sum); ok {
			return up.finish(checkpoint.Part{Number: j.n, Length: length, ETag: etag, SHA256: sum}, true)
		}
	}
	etag, err := up.putPart(ctx, urls, j.n, j.data, sum)
	if err != nil {
		return err
	}
	up.sent.Add(length)
	up.step(StepPartUploaded)
	if err := up.finish(checkpoint.Part{Number: j.n, Length: length, ETag: etag, SHA256: sum}, false); err != nil {
		return err
	}
	if up.cp != nil {
		up.step(StepPartSaved)
	}
	return nil
}

func (up *upload) step(s Step) {
	if up.o.Step != nil {
		up.o.Step(s)
	}
}

// finish records a part that is done: sent, or found held (resumed).
func (up *upload) finish(p checkpoint.Part, resumed bool) error {
	up.mu.Lock()
	defer up.mu.Unlock()
	up.done += p.Length
	if resumed {
		up.resumed++
	}
	if up.cp != nil {
		up.cp.Parts = insertPart(up.cp.Parts, p)
		if err := up.sess.Save(up.cp); err != nil {
			return err
		}
	}
	up.progressLocked(up.done)
	return nil
}

// insertPart puts p into parts in number order, replacing one of its
// number.
func insertPart(parts []checkpoint.Part, p checkpoint.Part) []checkpoint.Part {
	i := 0
	for i < len(parts) && parts[i].Number < p.Number {
		i++
	}
	if i < len(parts) && parts[i].Number == p.Number {
		parts[i] = p
		return parts
	}
	parts = append(parts, checkpoint.Part{})
	copy(parts[i+1:], parts[i:])
	parts[i] = p
	return parts
}

// complete asks the service to publish the upload and records that it
// did.
func (up *upload) complete(ctx context.Context, sum string) (Result, error) {
	size := up.size
	f, err := up.u.act.Complete(ctx, &lakepb.UploadCompleteRequest{
		Table: up.o.Table, Key: up.key, UploadId: up.id, Size: &size, Sha256: sum, ContentType: up.o.ContentType,
	})
	if err != nil {
		return Result{}, fmt.Errorf("presigned: complete the upload of %s at %s: %w", up.o.FileName, up.key, err)
	}
	// A checkpoint missing a part's record (the upload was found
	// completed on a resume) is left as it is: run again, the same path
	// completes it again.
	if up.cp != nil && !up.cp.Completed && int64(len(up.cp.Parts)) == up.count {
		up.mu.Lock()
		up.cp.Completed, up.cp.ETag, up.cp.SHA256 = true, f.GetEtag(), sum
		err := up.sess.Save(up.cp)
		up.mu.Unlock()
		if err != nil {
			return Result{}, fmt.Errorf("presigned: %w", err)
		}
		up.step(StepCompleted)
	}
	up.progress(up.size)
	up.mu.Lock()
	resumed := up.resumed
	up.mu.Unlock()
	return Result{File: f, BytesSent: up.sent.Load(), ResumedParts: resumed}, nil
}

func (up *upload) progress(done int64) {
	up.mu.Lock()
	defer up.mu.Unlock()
	up.progressLocked(done)
}

func (up *upload) progressLocked(done int64) {
	if up.o.Progress != nil {
		up.o.Progress(objects.Progress{Done: done, Total: up.size, ResumedParts: up.resumed})
	}
}

// withPrefix is a granted key as a checkpoint binds it: with the stage's
// prefix, as multipart bindings are.
func withPrefix(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "/" + key
}

// GrantedKey is the key a granted checkpoint's upload was granted at (the
// binding's key without the stage prefix), as the grant actions name it.
func GrantedKey(b checkpoint.Binding) (string, bool) { return withoutPrefix(b.Prefix, b.Key) }

// withoutPrefix is the granted key of a binding's key.
func withoutPrefix(prefix, key string) (string, bool) {
	if prefix == "" {
		return key, true
	}
	return strings.CutPrefix(key, prefix+"/")
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
