package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/checkpoint"
	"github.com/lakedata/lake/wire"
)

const (
	// MetaSHA256 is the user metadata key (x-amz-meta-sha256) holding the
	// lowercase hex SHA-256 of the whole object, when known at upload time.
	MetaSHA256 = "sha256"

	// maxS3KeyLen is S3's limit on a key, prefix included.
	maxS3KeyLen = 1024

	// smallBufSize is what Put reads before it commits to a part-size
	// buffer, so small objects never touch one.
	smallBufSize = 256 << 10

	// conflictAttempts bounds retries of a conditional write that S3
	// answered with 409 ConditionalRequestConflict.
	conflictAttempts = 4
	conflictBackoff  = 50 * time.Millisecond

	// defaultRegion is used with an Endpoint when neither Config nor the
	// AWS chain names a region; S3-compatible services accept it.
	defaultRegion = "us-east-1"
)

var (
	_ objects.Store   = (*Store)(nil)
	_ objects.Resumer = (*Store)(nil)
)

var smallPool = sync.Pool{New: func() any {
	b := make([]byte, smallBufSize)
	return &b
}}

// Store is a stage in an S3 bucket. It is safe for concurrent use.
type Store struct {
	client      *s3.Client
	bucket      string
	prefix      string // "" or ending in "/"
	region      string
	partSize    int64
	concurrency int
	logger      *slog.Logger
	parts       sync.Pool // *[]byte of partSize
	conns       *conns    // the client's connections, for Close
}

// Open builds a store from cfg, with credentials and, unless cfg.Region is
// set, the region from the AWS default chain. It makes no request: a wrong
// bucket or missing permissions show up on first use.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var opts []func(*config.LoadOptions) error
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3: load AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		if cfg.Endpoint == "" {
			return nil, errors.New("s3: no region: set it in the stage configuration or AWS_REGION")
		}
		awsCfg.Region = defaultRegion
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	tracked := &conns{}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
		o.Logger = sdkLogger(logger)
	}, tracked.install)
	s := &Store{
		client:      client,
		bucket:      cfg.Bucket,
		region:      awsCfg.Region,
		partSize:    cfg.PartSize,
		concurrency: cfg.Concurrency,
		logger:      logger.With("stage", "s3://"+strings.TrimSuffix(cfg.Bucket+"/"+cfg.Prefix, "/")),
		conns:       tracked,
	}
	if cfg.Prefix != "" {
		s.prefix = cfg.Prefix + "/"
	}
	s.parts.New = func() any {
		b := make([]byte, s.partSize)
		return &b
	}
	return s, nil
}

// sdkLogger sends the SDK's own log lines to logger at debug level. By
// default the SDK writes them to stderr, including routine notes such as
// "Skipped validation of multipart checksum" on every read of a multipart
// object.
func sdkLogger(logger *slog.Logger) logging.Logger {
	logger = logger.With("source", "aws-sdk")
	return logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
		if !logger.Enabled(context.Background(), slog.LevelDebug) {
			return
		}
		logger.Debug(fmt.Sprintf(format, v...), "level", string(c))
	})
}

// Close implements objects.Store: it closes the store's HTTP connections to
// the service, idle or busy (a request or reader still using one fails),
// and makes every later request fail at once. An S3 store holds nothing
// else: no file, lock or session on the service. A second Close does
// nothing.
func (s *Store) Close() error {
	s.conns.close()
	return nil
}

// Region returns the region the store signs requests for.
func (s *Store) Region() string { return s.region }

// objectKey validates key and returns the bucket key it is stored at.
func (s *Store) objectKey(key string) (string, error) {
	if err := wire.ValidateKey(key); err != nil {
		return "", err
	}
	if len(s.prefix)+len(key) > maxS3KeyLen {
		return "", fmt.Errorf("%w: %d bytes with the stage prefix, S3 allows %d", wire.ErrInvalidKey, len(s.prefix)+len(key), maxS3KeyLen)
	}
	return s.prefix + key, nil
}

// partBuffers hands out at most the store's concurrency of part buffers
// at a time: an upload holds at most concurrency × part size of memory.
// Buffers come back through put when a part is done and go to the pool on
// release, after every part has returned.
type partBuffers struct {
	s    *Store
	size int64
	held int         // buffers handed out or waiting in free
	free chan []byte // buffers of finished parts
}

func (s *Store) newPartBuffers(size int64, held int) *partBuffers {
	return &partBuffers{s: s, size: size, held: held, free: make(chan []byte, s.concurrency)}
}

// get returns a buffer, waiting for a finished part's when all are out;
// nil once ctx ends.
func (p *partBuffers) get(ctx context.Context) []byte {
	if p.held < p.s.concurrency {
		p.held++
		return p.s.getPartBuf(p.size)
	}
	select {
	case b := <-p.free:
		return b
	case <-ctx.Done():
		return nil
	}
}

func (p *partBuffers) put(b []byte) { p.free <- b }

// release returns every buffer to the pool; call it after all parts ended.
func (p *partBuffers) release() {
	close(p.free)
	for b := range p.free {
		p.s.putPartBuf(b)
	}
}

func (s *Store) getPartBuf(size int64) []byte {
	if size == s.partSize {
		return *s.parts.Get().(*[]byte)
	}
	return make([]byte, size)
}

func (s *Store) putPartBuf(b []byte) {
	if int64(cap(b)) == s.partSize {
		b = b[:cap(b)]
		s.parts.Put(&b)
	}
}

// Put implements objects.Store.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, opts objects.PutOptions) (objects.Info, error) {
	k, err := s.objectKey(key)
	if err != nil {
		return objects.Info{}, fmt.Errorf("s3: put: %w", err)
	}
	in, err := s.upload(ctx, k, r, opts, "", s.partSize)
	if err != nil {
		return objects.Info{}, fail(ctx, "put", key, err)
	}
	in.Key = key
	return in, nil
}

// PutPath implements objects.Store. It reads the file twice: once to hash
// it, so the object's metadata carries its SHA-256 from the first request,
// and once to upload it; the upload fails if the bytes changed in between.
// An interrupted upload is aborted and starts over next time; see
// PutPathResumable for one that is not.
func (s *Store) PutPath(ctx context.Context, key, path string, opts objects.PutOptions) (objects.Info, error) {
	k, err := s.objectKey(key)
	if err != nil {
		return objects.Info{}, fmt.Errorf("s3: put: %w", err)
	}
	in, err := s.putPath(ctx, k, path, opts)
	if err != nil {
		return objects.Info{}, fail(ctx, "put", key, err)
	}
	in.Key = key
	return in, nil
}

// PutPathResumable implements objects.Resumer (see resume.go and DESIGN
// §7): a multipart upload, recorded in the checkpoint session cp before
// its first part and after every part, and neither aborted on failure nor
// cancellation. A file no larger than one part has nothing to resume: it
// is one PutObject, as PutPath sends it, and leaves no checkpoint. A
// checkpoint cp already holds is resumed whatever the file's size now.
func (s *Store) PutPathResumable(ctx context.Context, key, path string, cp *checkpoint.Session, opts objects.PutOptions) (objects.Info, error) {
	k, err := s.objectKey(key)
	if err != nil {
		return objects.Info{}, fmt.Errorf("s3: put: %w", err)
	}
	if cp == nil {
		return objects.Info{}, fmt.Errorf("s3: put %s: a resumable upload needs a checkpoint session", key)
	}
	in, err := s.putResumable(ctx, k, path, cp, opts)
	if err != nil {
		return objects.Info{}, fail(ctx, "put", key, err)
	}
	in.Key = key
	return in, nil
}

func (s *Store) putPath(ctx context.Context, k, path string, opts objects.PutOptions) (objects.Info, error) {
	f, err := os.Open(path)
	if err != nil {
		return objects.Info{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return objects.Info{}, err
	}
	if !fi.Mode().IsRegular() {
		return objects.Info{}, fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Size() <= s.partSize {
		return s.putFileSingle(ctx, k, f, fi.Size(), opts)
	}
	h := sha256.New()
	if _, err := copyCtx(ctx, h, f); err != nil {
		return objects.Info{}, fmt.Errorf("hash %s: %w", path, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return objects.Info{}, err
	}
	if report := opts.Progress; report != nil {
		size := fi.Size()
		opts.Progress = func(p objects.Progress) {
			p.Total = size
			report(p)
		}
	}
	return s.upload(ctx, k, f, opts, hex.EncodeToString(h.Sum(nil)), partSizeFor(s.partSize, fi.Size()))
}

// putFileSingle sends a file of size bytes, at most one part, in one
// PutObject: read once into memory and hashed there, its SHA-256 as the
// request's checksum (S3 verifies the bytes), as the signed payload hash
// and as the object's metadata. A file that is no longer size bytes long
// fails with errChanged and sends nothing.
func (s *Store) putFileSingle(ctx context.Context, k string, f *os.File, size int64, opts objects.PutOptions) (objects.Info, error) {
	if err := ctx.Err(); err != nil {
		return objects.Info{}, err
	}
	var buf []byte
	if size <= smallBufSize {
		bp := smallPool.Get().(*[]byte)
		defer smallPool.Put(bp)
		buf = *bp
	} else {
		buf = s.getPartBuf(s.partSize)
		defer s.putPartBuf(buf)
	}
	// One byte more than expected tells a file that grew.
	data := buf[:min(size+1, int64(len(buf)))]
	n, err := io.ReadFull(f, data)
	switch {
	case err == io.ErrUnexpectedEOF || err == io.EOF:
	case err != nil:
		return objects.Info{}, fmt.Errorf("read source: %w", err)
	}
	if int64(n) != size {
		return objects.Info{}, errChanged
	}
	if int64(len(data)) == size { // a full part: no room for the byte more
		var more [1]byte
		if m, _ := f.Read(more[:]); m > 0 {
			return objects.Info{}, errChanged
		}
	}
	data = data[:n]
	sum := sha256.Sum256(data)
	etag, err := s.putObject(ctx, k, data, sum[:], opts.ContentType, false)
	if err != nil {
		return objects.Info{}, err
	}
	newTracker(opts.Progress, size).add(size)
	return published(size, hex.EncodeToString(sum[:]), etag), nil
}

// tracker serializes the progress reports of one upload.
type tracker struct {
	mu      sync.Mutex
	report  func(objects.Progress) // nil: no reports
	done    int64
	total   int64
	resumed int
}

func newTracker(report func(objects.Progress), total int64) *tracker {
	return &tracker{report: report, total: total}
}

// add counts n more bytes stored and reports.
func (t *tracker) add(n int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done += n
	if t.report != nil {
		t.report(objects.Progress{Done: t.done, Total: t.total, ResumedParts: t.resumed})
	}
}

// partSizeFor raises partSize, in whole MiB, until size fits in MaxParts.
func partSizeFor(partSize, size int64) int64 {
	if size <= partSize*MaxParts {
		return partSize
	}
	const mib = 1 << 20
	need := (size + MaxParts - 1) / MaxParts
	return min((need+mib-1)/mib*mib, MaxPartSize)
}

// copyCtx copies r to w, checking ctx between chunks.
func copyCtx(ctx context.Context, w io.Writer, r io.Reader) (int64, error) {
	bp := smallPool.Get().(*[]byte)
	defer smallPool.Put(bp)
	buf := *bp
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		nr, err := r.Read(buf)
		w.Write(buf[:nr])
		n += int64(nr)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// errChanged: PutPath's file changed between hashing and uploading.
var errChanged = errors.New("source changed during upload")

// upload sends everything r yields to bucket key k: one PutObject when it
// fits in partSize, a multipart upload otherwise. wantSHA, when not empty, is
// the hex SHA-256 the caller computed beforehand: it goes into the metadata
// of a multipart upload too, and the upload fails unless r's bytes match it.
func (s *Store) upload(ctx context.Context, k string, r io.Reader, opts objects.PutOptions, wantSHA string, partSize int64) (objects.Info, error) {
	if err := ctx.Err(); err != nil {
		return objects.Info{}, err
	}
	src := &source{r: r, hash: sha256.New()}
	tr := newTracker(opts.Progress, -1)

	bp := smallPool.Get().(*[]byte)
	defer smallPool.Put(bp)
	small := (*bp)[:min(int64(len(*bp)), partSize)]
	n, err := src.fill(ctx, small)
	if err != nil {
		return objects.Info{}, err
	}
	if src.eof {
		return s.uploadSingle(ctx, k, small[:n], src, opts, wantSHA, tr)
	}

	buf := s.getPartBuf(partSize)
	copy(buf, small[:n])
	m, err := src.fill(ctx, buf[n:])
	n += m
	if err != nil {
		s.putPartBuf(buf)
		return objects.Info{}, err
	}
	if src.eof {
		defer s.putPartBuf(buf)
		return s.uploadSingle(ctx, k, buf[:n], src, opts, wantSHA, tr)
	}
	return s.uploadMultipart(ctx, k, src, buf[:n], partSize, opts, wantSHA, tr)
}

// uploadSingle sends an object that src has yielded completely.
func (s *Store) uploadSingle(ctx context.Context, k string, data []byte, src *source, opts objects.PutOptions, wantSHA string, tr *tracker) (objects.Info, error) {
	sum := src.sum()
	hexSum := hex.EncodeToString(sum)
	if wantSHA != "" && hexSum != wantSHA {
		return objects.Info{}, errChanged
	}
	etag, err := s.putObject(ctx, k, data, sum, opts.ContentType, false)
	if err != nil {
		return objects.Info{}, err
	}
	tr.add(src.n)
	return published(src.n, hexSum, etag), nil
}

// published is the Info of a finished upload. S3 does not return the
// Last-Modified time of a PUT, so ModTime is this machine's clock.
func published(size int64, sha, etag string) objects.Info {
	return objects.Info{Size: size, SHA256: sha, ETag: unquote(etag), ModTime: time.Now().UTC()}
}

// putObject sends data in one request, with its SHA-256 as checksum and
// metadata; ifAbsent adds If-None-Match: *. It returns the ETag.
func (s *Store) putObject(ctx context.Context, k string, data, sum []byte, contentType string, ifAbsent bool) (string, error) {
	in := &s3.PutObjectInput{
		Bucket:         aws.String(s.bucket),
		Key:            aws.String(k),
		Body:           bytes.NewReader(data),
		ContentLength:  aws.Int64(int64(len(data))),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sum)),
		Metadata:       map[string]string{MetaSHA256: hex.EncodeToString(sum)},
	}
	if contentType != "" {
		in.ContentType = aws.String(contentType)
	}
	if ifAbsent {
		in.IfNoneMatch = aws.String("*")
	}
	out, err := s.client.PutObject(ctx, in, withPayloadHash(sum))
	if err != nil {
		return "", err
	}
	return aws.ToString(out.ETag), nil
}

// withPayloadHash hands the SigV4 signer the body's SHA-256, which the
// caller has computed anyway for the checksum, so the SDK does not read
// and hash the body a second time. A wrong sum fails the request
// (the server checks x-amz-content-sha256), it cannot store wrong data.
func withPayloadHash(sum []byte) func(*s3.Options) {
	h := hex.EncodeToString(sum)
	return func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			const computeID = "ComputePayloadHash" // v4.ComputePayloadSHA256's ID
			if _, ok := st.Finalize.Get(computeID); !ok {
				return nil // unsigned payload: nothing to compute
			}
			return st.Finalize.Insert(middleware.FinalizeMiddlewareFunc("lake.PayloadHash",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					return next.HandleFinalize(v4.SetPayloadHash(ctx, h), in)
				}), computeID, middleware.Before)
		})
	}
}

func unquote(etag string) string { return strings.Trim(etag, `"`) }

// source reads an upload's bytes part by part, hashing them, and tells when
// the reader is exhausted: after a full buffer it reads one byte ahead, so
// an object of exactly one part is sent in one request.
type source struct {
	r       io.Reader
	hash    hash.Hash
	n       int64 // bytes handed out
	eof     bool
	peek    []byte
	peekBuf [1]byte
}

// fill fills buf, or as much of it as the reader has left, checking ctx
// between reads.
func (src *source) fill(ctx context.Context, buf []byte) (int, error) {
	n := copy(buf, src.peek)
	src.peek = nil
	for n < len(buf) && !src.eof {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		k, err := src.r.Read(buf[n:])
		n += k
		if err := src.readErr(err); err != nil {
			return n, err
		}
	}
	for len(src.peek) == 0 && !src.eof {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		k, err := src.r.Read(src.peekBuf[:])
		src.peek = src.peekBuf[:k]
		if err := src.readErr(err); err != nil {
			return n, err
		}
	}
	src.hash.Write(buf[:n])
	src.n += int64(n)
	return n, nil
}

func (src *source) readErr(err error) error {
	switch {
	case err == io.EOF:
		src.eof = true
	case err != nil:
		return fmt.Errorf("read source: %w", err)
	}
	return nil
}

func (src *source) sum() []byte { return src.hash.Sum(nil) }

// PutIfAbsent implements objects.Store.
func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	k, err := s.objectKey(key)
	if err != nil {
		return fmt.Errorf("s3: put-if-absent: %w", err)
	}
	sum := sha256.Sum256(data)
	err = retryConflict(ctx, func() error {
		_, err := s.putObject(ctx, k, data, sum[:], "", true)
		return err
	})
	if err != nil {
		return fail(ctx, "put-if-absent", key, err)
	}
	return nil
}

// retryConflict runs a conditional write again while S3 answers 409
// ConditionalRequestConflict (another conditional write to the key was in
// flight), up to conflictAttempts times; the last answer stands, and a
// persisting conflict maps to objects.ErrExists.
func retryConflict(ctx context.Context, write func() error) error {
	for attempt := 1; ; attempt++ {
		err := write()
		if err == nil || !isConflict(err) || attempt == conflictAttempts {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt) * conflictBackoff):
		}
	}
}

// Open implements objects.Store.
func (s *Store) Open(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	k, err := s.objectKey(key)
	if err != nil {
		return nil, fmt.Errorf("s3: open: %w", err)
	}
	if offset < 0 {
		return nil, fmt.Errorf("s3: open %s: offset %d: %w", key, offset, objects.ErrInvalidRange)
	}
	if length == 0 {
		return s.openEmpty(ctx, key, k, offset)
	}
	in := &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(k)}
	switch {
	case length > 0 && length <= (1<<63-1)-offset:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", offset, offset+length-1))
	case offset > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", offset))
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		if isInvalidRange(err) {
			// S3 refuses a range that starts at the end; the contract
			// reads nothing there.
			return s.openEmpty(ctx, key, k, offset)
		}
		return nil, fail(ctx, "open", key, err)
	}
	return out.Body, nil
}

// openEmpty returns an empty reader if offset is within or at the end of k.
func (s *Store) openEmpty(ctx context.Context, key, k string, offset int64) (io.ReadCloser, error) {
	in, err := s.head(ctx, k)
	if err != nil {
		return nil, fail(ctx, "open", key, err)
	}
	if offset > in.Size {
		return nil, fmt.Errorf("s3: open %s: offset %d of %d bytes: %w", key, offset, in.Size, objects.ErrInvalidRange)
	}
	return http.NoBody, nil
}

// Stat implements objects.Store.
func (s *Store) Stat(ctx context.Context, key string) (objects.Info, error) {
	k, err := s.objectKey(key)
	if err != nil {
		return objects.Info{}, fmt.Errorf("s3: stat: %w", err)
	}
	in, err := s.head(ctx, k)
	if err != nil {
		return objects.Info{}, fail(ctx, "stat", key, err)
	}
	in.Key = key
	return in, nil
}

func (s *Store) head(ctx context.Context, k string) (objects.Info, error) {
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(k)})
	if err != nil {
		return objects.Info{}, err
	}
	return objects.Info{
		Size:    aws.ToInt64(out.ContentLength),
		ETag:    unquote(aws.ToString(out.ETag)),
		ModTime: aws.ToTime(out.LastModified),
	}, nil
}

// List implements objects.Store. S3 lists keys in UTF-8 byte order. Keys
// under the stage prefix that are not valid stage keys (written by other
// tools) are skipped.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[objects.Info, error] {
	return func(yield func(objects.Info, error) bool) {
		pages := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
			Bucket: aws.String(s.bucket),
			Prefix: aws.String(s.prefix + prefix),
		})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				yield(objects.Info{}, fail(ctx, "list", fmt.Sprintf("%q", prefix), err))
				return
			}
			for _, o := range page.Contents {
				key, ok := strings.CutPrefix(aws.ToString(o.Key), s.prefix)
				if !ok || wire.ValidateKey(key) != nil {
					s.logger.Debug("list: skipping a key that is not a stage key", "key", aws.ToString(o.Key))
					continue
				}
				in := objects.Info{
					Key:     key,
					Size:    aws.ToInt64(o.Size),
					ETag:    unquote(aws.ToString(o.ETag)),
					ModTime: aws.ToTime(o.LastModified),
				}
				if !yield(in, nil) {
					return
				}
			}
		}
	}
}

// Delete implements objects.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	k, err := s.objectKey(key)
	if err != nil {
		return fmt.Errorf("s3: delete: %w", err)
	}
	_, err = s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(k)})
	if err != nil && !errors.Is(mapErr(err), objects.ErrNotFound) {
		return fail(ctx, "delete", key, err)
	}
	return nil
}
