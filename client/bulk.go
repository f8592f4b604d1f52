package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"mime"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/lakedata/lake/internal/failpoint"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/checkpoint"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// Defaults of PutFilesOptions.
const (
	// DefaultJobs uploads eight files at once: enough to hide a disk's
	// fsync or an S3 request's round trip behind the others, few enough
	// not to crowd a small machine.
	DefaultJobs = 8
	// DefaultBatchRows commits up to 256 rows per table version. A batch
	// costs one append, one data file and two saves of the run
	// checkpoint, whatever its size, so bigger batches are cheaper; but
	// its append waits for the server to check every object it names, and
	// a batch sent again after a crash is resent whole.
	DefaultBatchRows = 256
	// DefaultBatchWait commits what has been uploaded at least once a
	// second, so slow uploads (large files) still show up in the table
	// soon, and a table grows by about one version per second of a run at
	// most.
	DefaultBatchWait = time.Second
)

// Failpoints of PutFiles (internal/failpoint).
const (
	// FailBeforeBatchAppend: a batch is recorded pending in the run
	// checkpoint; its append is not sent yet.
	FailBeforeBatchAppend = "client-before-batch-append"
	// FailAfterBatchAppend: a batch's append is acknowledged; the run
	// checkpoint does not say so yet.
	FailAfterBatchAppend = "client-after-batch-append"
)

// Errors of PutFiles.
var (
	// ErrIsDirectory: a path given to PutFiles is a directory and
	// Recursive is not set.
	ErrIsDirectory = errors.New("is a directory (put it recursively: lake put -r)")
	// ErrNotRegular: a path given to PutFiles is neither a regular file
	// nor a directory.
	ErrNotRegular = errors.New("not a regular file")
	// ErrBadOptions: PutFilesOptions out of range (negative jobs, say).
	ErrBadOptions = errors.New("invalid put options")
	// ErrFilesFailed: PutFiles committed what it could, but some files
	// failed (their FileResult.Err says why).
	ErrFilesFailed = errors.New("some files failed")
)

// PutFilesOptions shape a bulk put.
type PutFilesOptions struct {
	// Set fills columns of every row, as PutOptions.Set.
	Set map[string]string
	// ContentType of every file; default the type registered for each
	// file's extension.
	ContentType string
	// Recursive puts every regular file under a directory path (symbolic
	// links and other entries inside it are skipped). Without it a
	// directory is refused with ErrIsDirectory.
	Recursive bool
	// Jobs is how many files upload at once; 0 means DefaultJobs.
	Jobs int
	// BatchRows bounds the rows of one append (one table version); 0
	// means DefaultBatchRows.
	BatchRows int
	// BatchWait bounds how long an uploaded file waits for its batch to
	// be sent; 0 means DefaultBatchWait.
	BatchWait time.Duration
	// Progress, when set, is told how the run goes after every change.
	// Calls are serialized; it must not block for long.
	Progress func(BulkProgress)
	// NoDedup uploads every file even when the stage holds its content
	// already.
	NoDedup bool
	// OnFile, when set, is told each file's outcome as it is known: when
	// its batch commits, when it fails, or (Skipped) when an earlier run
	// committed it. Calls are serialized, in no particular file order.
	OnFile func(FileResult)
}

// BulkProgress is a snapshot of a PutFiles run.
type BulkProgress struct {
	// FilesDone counts files whose row is committed (or was, by an
	// earlier run); FilesFailed those that failed; FilesTotal all files.
	FilesDone, FilesFailed, FilesTotal int
	// Bytes is how much this run uploaded of BytesTotal, the size of the
	// files it has to upload (not those an earlier run did).
	Bytes, BytesTotal int64
}

// FileResult is the outcome of one file of a PutFiles run.
type FileResult struct {
	// Path is the file as PutFiles found it: an argument, or a path under
	// a directory argument.
	Path string
	// File, Version, Duplicate, Deduplicated and BytesSent are as in
	// PutResult; unset when Err is set or Skipped. A row resent from an
	// earlier run's checkpoint says nothing of its upload.
	File         wire.FileValue
	Version      int64
	Duplicate    bool
	Deduplicated bool
	BytesSent    int64
	// Skipped: an earlier, interrupted run of the same put committed the
	// file's row, so this run did not put it again.
	Skipped bool
	// Err says why the file was not put (it vanished, cannot be read…).
	Err error
}

// PutFilesResult sums up a PutFiles run.
type PutFilesResult struct {
	Files     []FileResult // every file, in the order OnFile saw them
	Committed int          // rows this run committed (resent ones included)
	Skipped   int          // files an earlier run had committed
	Failed    int
	Batches   int // appends this run sent
}

// PutFiles uploads files straight to the stage, Jobs at a time, and
// appends a row for each to table, many rows per append: a batch is sent
// once it holds BatchRows rows or its first row waited BatchWait. Rows are
// made as PutFile makes them (name, Set, created_at, content type).
//
// paths are files, and with Recursive directories. A path that does not
// exist, is a directory without Recursive, or is neither file nor
// directory fails the call before anything is uploaded. Once the run has
// started, a file that vanishes or cannot be read is reported in its
// FileResult and the others go on; the call then returns its result and an
// error wrapping ErrFilesFailed.
//
// A run is resumable. Its checkpoint (checkpoint.Run, in the checkpoint
// directory) is named from the stage, the table, the paths and the
// options that shape rows (Set, ContentType, Recursive), and is held
// locked while the run goes on, so the same run cannot start twice at
// once (checkpoint.ErrInProgress). Each batch is recorded in it, rows and
// commit id, before its append is sent, and marked committed once it is
// acknowledged. The same call after a crash or an error first resends the
// batches left pending, with the same commit ids and the same rows (the
// service answers duplicate when the lost append had committed), skips
// the files of committed batches, and puts the rest: each file is
// committed exactly once. The checkpoint is removed when a run ends with
// every file committed. Without a checkpoint directory nothing is
// recorded and a re-run puts every file again.
//
// Files smaller than checkpoint.MinPartSize are uploaded in one request
// each, with no upload checkpoint of their own: nothing of them is worth
// resuming. Larger ones, on a stage that resumes uploads (S3), go through
// the resumable path of PutFile, each with its upload checkpoint.
func (c *Client) PutFiles(ctx context.Context, table string, paths []string, o PutFilesOptions) (*PutFilesResult, error) {
	if err := o.fill(); err != nil {
		return nil, err
	}
	files, walkErrs, err := expandPaths(paths, o.Recursive)
	if err != nil {
		return nil, fmt.Errorf("client: put files into %s: %w", table, err)
	}
	schema, err := c.schema(ctx, table)
	if err != nil {
		return nil, err
	}
	plan, err := planRow(schema, "", o.Set)
	if err != nil {
		return nil, fmt.Errorf("client: put into %s: %w", table, err)
	}
	if c.uploadMode() == modeLocal {
		// Small files are written before any call that checks the scope.
		if err := c.checkWriteScope(ctx, table); err != nil {
			return nil, err
		}
	}
	b := &bulk{c: c, table: table, plan: plan, o: o, res: &PutFilesResult{}}
	b.progress.FilesTotal = len(files) + len(walkErrs)
	if err := b.openRun(paths); err != nil {
		return nil, err
	}
	defer b.closeRun()

	for _, we := range walkErrs {
		b.fail(we.path, we.err)
	}
	if err := b.resendPending(ctx); err != nil {
		return b.res, err
	}
	todo := b.skipDone(files)
	if err := b.putAll(ctx, todo); err != nil {
		return b.res, err
	}
	if b.res.Failed > 0 {
		return b.res, fmt.Errorf("client: put files into %s: %w: %d of %d", table, ErrFilesFailed, b.res.Failed, b.progress.FilesTotal)
	}
	if b.sess != nil {
		if err := b.sess.Remove(); err != nil {
			c.log.Warn("cannot remove the run checkpoint", "err", err)
		}
	}
	return b.res, nil
}

func (o *PutFilesOptions) fill() error {
	switch {
	case o.Jobs < 0:
		return fmt.Errorf("%w: jobs %d, want at least 1", ErrBadOptions, o.Jobs)
	case o.BatchRows < 0:
		return fmt.Errorf("%w: batch rows %d, want at least 1", ErrBadOptions, o.BatchRows)
	case o.BatchWait < 0:
		return fmt.Errorf("%w: batch wait %s is negative", ErrBadOptions, o.BatchWait)
	}
	if o.Jobs == 0 {
		o.Jobs = DefaultJobs
	}
	if o.BatchRows == 0 {
		o.BatchRows = DefaultBatchRows
	}
	if o.BatchWait == 0 {
		o.BatchWait = DefaultBatchWait
	}
	return nil
}

// bulkFile is a file a run puts.
type bulkFile struct {
	index   int    // in the run's order: a batch's rows keep it
	path    string // as found: an argument or under one
	abs     string // canonical
	name    string
	size    int64 // as listed; the upload reports what it sent
	modTime time.Time
}

type walkError struct {
	path string
	err  error
}

// expandPaths lists the files of paths, in order, each canonical file
// once. Bad arguments fail it; a directory entry that cannot be read
// while walking is returned as a walkError, to be reported with the
// files.
func expandPaths(paths []string, recursive bool) ([]bulkFile, []walkError, error) {
	var files []bulkFile
	var errs []walkError
	seen := make(map[string]bool)
	add := func(shown, abs string, fi fs.FileInfo) {
		if seen[abs] {
			return
		}
		seen[abs] = true
		files = append(files, bulkFile{index: len(files), path: shown, abs: abs, name: filepath.Base(shown),
			size: fi.Size(), modTime: fi.ModTime()})
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, nil, err
		}
		switch {
		case fi.Mode().IsRegular():
			abs, err := canonicalPath(p)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", p, err)
			}
			add(p, abs, fi)
			continue
		case !fi.IsDir():
			return nil, nil, fmt.Errorf("%s: %w", p, ErrNotRegular)
		case !recursive:
			return nil, nil, fmt.Errorf("%s: %w", p, ErrIsDirectory)
		}
		root, err := filepath.Abs(p)
		if err == nil {
			root, err = filepath.EvalSymlinks(root)
		}
		if err != nil {
			return nil, nil, err
		}
		// WalkDir goes in lexical order and follows no symbolic link, so
		// every path under the canonical root is canonical too: no file
		// costs a resolution of its own.
		err = filepath.WalkDir(root, func(abs string, d fs.DirEntry, err error) error {
			shown := p
			if rel, rerr := filepath.Rel(root, abs); rerr == nil && rel != "." {
				shown = filepath.Join(p, rel)
			}
			if err != nil {
				errs = append(errs, walkError{shown, err})
				return nil // the rest of the tree goes on; a dir's error skips it
			}
			if !d.Type().IsRegular() {
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				errs = append(errs, walkError{shown, err})
				return nil
			}
			add(shown, abs, fi)
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	return files, errs, nil
}

// runCheckpointPath names the checkpoint of a run: the same command finds
// the same one. The paths count as a set (order and repeats do not
// matter); Set, ContentType and Recursive count because they change the
// rows or the files.
func (c *Client) runCheckpointPath(table string, paths []string, o PutFilesOptions) string {
	if c.checkpointDir == "" {
		return ""
	}
	args := make([]string, 0, len(paths))
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err == nil {
			if real, err := filepath.EvalSymlinks(abs); err == nil {
				abs = real
			}
		}
		args = append(args, abs)
	}
	slices.Sort(args)
	args = slices.Compact(args)
	h := sha256.New()
	field := func(s string) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	field("put-run")
	field(c.stage.GetRootUri())
	field(table)
	field(fmt.Sprint(o.Recursive))
	field(o.ContentType)
	for _, k := range slices.Sorted(maps.Keys(o.Set)) {
		field(k + "=" + o.Set[k])
	}
	for _, a := range args {
		field(a)
	}
	return filepath.Join(c.checkpointDir, "put-"+hex.EncodeToString(h.Sum(nil))+checkpoint.RunSuffix)
}

// bulk is one PutFiles run.
type bulk struct {
	c     *Client
	table string
	plan  *rowPlan
	o     PutFilesOptions

	sess *checkpoint.RunSession // nil: no checkpoint directory

	// runMu guards run and its saves, mu the rest: a save fsyncs twice,
	// and the uploads telling their progress must not wait for it.
	runMu  sync.Mutex
	run    *checkpoint.Run
	resent map[string]bool // paths of the pending batches this run sent again
	// reuploaded: commit ids of batches whose files were put again after
	// an object they named was gone; only the committer touches it.
	reuploaded map[string]bool

	mu       sync.Mutex // guards res, progress, sent and the callbacks
	res      *PutFilesResult
	progress BulkProgress
	sent     map[string]uploadStat // by canonical path, the uploads of this run
}

// uploadStat is what one upload of a run sent.
type uploadStat struct {
	dedup bool
	bytes int64
}

func (b *bulk) openRun(paths []string) error {
	stageID := checkpoint.StageID(b.c.stage.GetRootUri())
	b.run = &checkpoint.Run{Version: checkpoint.RunVersion, StageID: stageID, Table: b.table}
	p := b.c.runCheckpointPath(b.table, paths, b.o)
	if p == "" {
		return nil
	}
	sess, err := checkpoint.OpenRun(p)
	if err != nil {
		return fmt.Errorf("client: put files into %s: %w", b.table, err)
	}
	run, err := sess.Load()
	switch {
	case errors.Is(err, checkpoint.ErrNoCheckpoint):
	case err != nil:
		sess.Close()
		return fmt.Errorf("client: put files into %s: %w (remove it to start the run over; files it committed would then be put again)", b.table, err)
	default:
		if err := run.CheckOwner(stageID, b.table); err != nil {
			sess.Close()
			return fmt.Errorf("client: put files into %s: run checkpoint %s: %w", b.table, p, err)
		}
		b.run = run
	}
	b.sess = sess
	return nil
}

func (b *bulk) closeRun() {
	if b.sess == nil {
		return
	}
	if err := b.sess.Close(); err != nil {
		b.c.log.Warn("cannot unlock the run checkpoint", "err", err)
	}
}

// save writes the run checkpoint; b.runMu is held.
func (b *bulk) save() error {
	if b.sess == nil {
		return nil
	}
	return b.sess.Save(b.run)
}

// report records a file's outcome; b.mu is held.
func (b *bulk) report(r FileResult) {
	switch {
	case r.Err != nil:
		b.res.Failed++
		b.progress.FilesFailed++
	case r.Skipped:
		b.res.Skipped++
		b.progress.FilesDone++
	default:
		b.res.Committed++
		b.progress.FilesDone++
	}
	b.res.Files = append(b.res.Files, r)
	if b.o.OnFile != nil {
		b.o.OnFile(r)
	}
	b.tell()
}

// tell passes the progress on; b.mu is held.
func (b *bulk) tell() {
	if b.o.Progress != nil {
		b.o.Progress(b.progress)
	}
}

func (b *bulk) fail(path string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.report(FileResult{Path: path, Err: err})
}

func (b *bulk) addBytes(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.progress.Bytes += n
	b.tell()
}

// resendPending appends again every batch an earlier run left pending,
// with its commit id and rows, and marks it committed.
func (b *bulk) resendPending(ctx context.Context) error {
	b.resent = make(map[string]bool)
	for _, rb := range b.run.Pending {
		for _, f := range rb.Files {
			b.resent[f.Path] = true
		}
	}
	for len(b.run.Pending) > 0 {
		if err := b.commit(ctx, b.run.Pending[0], nil); err != nil {
			return err
		}
	}
	return nil
}

// skipDone reports the files an earlier run committed and returns the
// rest.
func (b *bulk) skipDone(files []bulkFile) []bulkFile {
	done := make(map[string]bool)
	b.runMu.Lock()
	for _, cb := range b.run.Committed {
		for _, p := range cb.Paths {
			done[p] = true
		}
	}
	b.runMu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	var todo []bulkFile
	for _, f := range files {
		if done[f.abs] {
			if !b.resent[f.abs] { // a resent row was reported as it committed
				b.report(FileResult{Path: f.path, Skipped: true})
			}
			continue
		}
		todo = append(todo, f)
		b.progress.BytesTotal += f.size
	}
	b.tell()
	return todo
}

// uploaded is a file whose object is in the stage, waiting for its batch.
type uploaded struct {
	f   bulkFile
	row checkpoint.RunFile
	err error
}

// viaGrant is a file's object as an upload grant answered it.
type viaGrant struct {
	file *lakepb.UploadedFile
	stat uploadStat
}

// putAll uploads todo through Jobs workers and commits their rows in
// batches: the workers feed a batcher, which seals a batch on its row
// count or its age and hands it to one committer, so uploads go on while
// a batch commits.
func (b *bulk) putAll(ctx context.Context, todo []bulkFile) error {
	if len(todo) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	queue := make(chan bulkFile)
	results := make(chan uploaded, b.o.BatchRows)
	var workers sync.WaitGroup
	for range min(b.o.Jobs, len(todo)) {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for f := range queue {
				results <- b.upload(ctx, f)
			}
		}()
	}
	go func() {
		defer close(queue)
		for _, f := range todo {
			select {
			case queue <- f:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		workers.Wait()
		close(results)
	}()

	sealed := make(chan []uploaded, 1)
	committed := make(chan error, 1)
	go func() {
		var err error
		for batch := range sealed {
			if err != nil {
				continue // drain: the run has failed
			}
			if err = b.commitUploads(ctx, batch); err != nil {
				cancel(err)
			}
		}
		committed <- err
	}()

	var batch []uploaded
	var timer *time.Timer
	var timeout <-chan time.Time
	seal := func() {
		if len(batch) > 0 {
			sealed <- batch
			batch = nil
		}
		if timer != nil {
			timer.Stop()
		}
		timeout = nil
	}
	for open := true; open; {
		select {
		case u, ok := <-results:
			if !ok {
				open = false
				break
			}
			if u.err != nil {
				if ctx.Err() == nil {
					b.fail(u.f.path, u.err)
				}
				break
			}
			batch = append(batch, u)
			if len(batch) == 1 {
				timer = time.NewTimer(b.o.BatchWait)
				timeout = timer.C
			}
			if len(batch) >= b.o.BatchRows {
				seal()
			}
		case <-timeout:
			seal()
		}
	}
	if ctx.Err() == nil {
		seal()
	}
	close(sealed)
	err := <-committed
	if err == nil {
		err = context.Cause(ctx)
	}
	return err
}

// upload puts one file's bytes in the stage.
func (b *bulk) upload(ctx context.Context, f bulkFile) uploaded {
	u := uploaded{f: f}
	// No stat of its own: the listing's is recent, and a file gone since
	// fails its upload.
	contentType := b.o.ContentType
	if contentType == "" {
		contentType = mime.TypeByExtension(filepath.Ext(f.name))
	}
	key := objects.NewObjectKey(f.name, time.Now())
	var sent int64
	opts := objects.PutOptions{ContentType: contentType, Progress: func(p objects.Progress) {
		b.addBytes(p.Done - sent)
		sent = p.Done
	}}
	var info objects.Info
	var err error
	switch {
	case b.granted():
		var g viaGrant
		if g, err = b.uploadGranted(ctx, f, opts, b.o.NoDedup); err == nil {
			b.addBytes(g.file.GetSize() - sent)
			b.noteSent(f.abs, g.stat)
			u.row = runFileOf(f, g.file)
			return u
		}
	case b.resumable(f.size):
		info, err = b.uploadResumable(ctx, f, key, opts)
	case b.hasUploadCheckpoint(f):
		err = errInterruptedPut
	case b.c.uploadMode() == modeLocal && f.size >= localProbeMin:
		var lg localGranted
		if lg, err = b.c.putLocalGranted(ctx, b.table, f.name, f.abs, f.size, opts, b.o.NoDedup); err == nil {
			b.addBytes(lg.file.GetSize() - sent)
			b.noteSent(f.abs, uploadStat{dedup: lg.dedup, bytes: lg.written})
			u.row = runFileOf(f, lg.file)
			return u
		}
	default:
		info, err = b.c.store.PutPath(ctx, key, f.abs, opts)
	}
	if err == nil && info.SHA256 == "" {
		err = fmt.Errorf("the stage did not report a SHA-256 of %s", info.Key)
	}
	if err != nil {
		u.err = err
		return u
	}
	b.addBytes(info.Size - sent)
	b.noteSent(f.abs, uploadStat{bytes: info.Size})
	u.row = checkpoint.RunFile{
		Path: f.abs, Name: f.name, Size: info.Size, ModTime: f.modTime,
		Key: info.Key, SHA256: info.SHA256, ContentType: opts.ContentType, ETag: info.ETag,
		UploadedAt: time.Now().UTC(),
	}
	return u
}

// runFileOf is the run checkpoint's row of f, whose object a grant
// answered: exactly the answered FILE value.
func runFileOf(f bulkFile, up *lakepb.UploadedFile) checkpoint.RunFile {
	v := uploadedValue(up)
	return checkpoint.RunFile{
		Path: f.abs, Name: f.name, Size: v.Size, ModTime: f.modTime,
		Key: v.Key, SHA256: v.SHA256, ContentType: v.ContentType, ETag: v.ETag, UploadedAt: v.UploadedAt,
	}
}

func (b *bulk) noteSent(abs string, st uploadStat) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sent == nil {
		b.sent = make(map[string]uploadStat)
	}
	b.sent[abs] = st
}

// granted reports whether the run uploads through grants: the stage
// takes no upload with this client's own credentials.
func (b *bulk) granted() bool { return b.c.uploadMode() == modePresigned }

// uploadGranted puts one file through a grant: a large one resumably,
// through its upload checkpoint (kept, completed, until its batch
// commits, as uploadResumable keeps it), a small one in one go.
func (b *bulk) uploadGranted(ctx context.Context, f bulkFile, opts objects.PutOptions, noDedup bool) (viaGrant, error) {
	po := b.c.grantOptions(b.table, f.name, opts.ContentType, "", opts.Progress)
	po.NoDedup = noDedup
	var sess *checkpoint.Session
	if b.resumable(f.size) {
		var err error
		if sess, _, err = b.openUpload(f, "", &po.ContentType); err != nil {
			return viaGrant{}, err
		}
		defer sess.Close()
	} else if b.hasUploadCheckpoint(f) {
		return viaGrant{}, errInterruptedPut
	}
	res, err := b.c.uploader().PutFile(ctx, f.abs, sess, po)
	if err != nil {
		return viaGrant{}, err
	}
	return viaGrant{file: res.File, stat: uploadStat{dedup: res.Deduplicated, bytes: res.BytesSent}}, nil
}

// errInterruptedPut: a single `lake put` of the file into the table left a
// checkpoint naming its commit id; it may have committed the row, and
// only that put (run again) can tell.
var errInterruptedPut = errors.New("an interrupted `lake put` of this file may have committed it; run that put again, or cancel it (lake uploads cancel)")

// hasUploadCheckpoint reports whether a single put of the small file f
// into the table left its checkpoint (a record of its upload and commit
// id): one stat, no lock, for a file that takes no checkpoint itself.
func (b *bulk) hasUploadCheckpoint(f bulkFile) bool {
	if b.c.checkpointDir == "" {
		return false
	}
	_, err := os.Stat(b.c.checkpointPath(f.abs, b.table))
	return err == nil
}

// resumable reports whether a file of size bytes takes the resumable path
// with an upload checkpoint of its own: only when there is more than one
// part's worth to resume, on a stage that resumes.
func (b *bulk) resumable(size int64) bool {
	_, ok := b.c.store.(objects.Resumer)
	return (ok || b.granted()) && size >= checkpoint.MinPartSize && b.c.checkpointDir != ""
}

// uploadResumable uploads a large file as PutFile does, through its upload
// checkpoint, which stays (completed) until the file's batch commits, so
// a crash before then finds the object instead of sending it again.
func (b *bulk) uploadResumable(ctx context.Context, f bulkFile, key string, opts objects.PutOptions) (objects.Info, error) {
	sess, key, err := b.openUpload(f, key, &opts.ContentType)
	if err != nil {
		return objects.Info{}, err
	}
	defer sess.Close()
	return b.c.store.(objects.Resumer).PutPathResumable(ctx, key, f.abs, sess, opts)
}

// openUpload opens and locks the upload checkpoint of the large file f.
// One an earlier run left (no commit id yet) is taken over: its object
// key replaces key and its content type *contentType. One that holds a
// commit id is a single put's, which may have committed, and only that
// put (run again) can tell: errInterruptedPut.
func (b *bulk) openUpload(f bulkFile, key string, contentType *string) (*checkpoint.Session, string, error) {
	sess, err := checkpoint.Open(b.c.checkpointPath(f.abs, b.table))
	if err != nil {
		return nil, "", err
	}
	cp, err := sess.Load()
	switch {
	case errors.Is(err, checkpoint.ErrNoCheckpoint):
		return sess, key, nil
	case err != nil:
	case cp.CommitID != "":
		err = errInterruptedPut
	default:
		po := PutOptions{}
		if key, err = resumeFrom(cp, b.table, "", &po); err == nil {
			*contentType = po.ContentType
			return sess, key, nil
		}
	}
	sess.Close()
	return nil, "", err
}

// commitUploads records a batch of uploaded files as pending and commits
// it.
func (b *bulk) commitUploads(ctx context.Context, batch []uploaded) error {
	// Uploads finish in any order; rows go in the order of the arguments,
	// so a run of few files lists them as given.
	slices.SortFunc(batch, func(x, y uploaded) int { return x.f.index - y.f.index })
	rb := checkpoint.RunBatch{CommitID: uuid.NewString(), Files: make([]checkpoint.RunFile, len(batch))}
	shown := make(map[string]string, len(batch))
	for i, u := range batch {
		rb.Files[i] = u.row
		shown[u.row.Path] = u.f.path
	}
	b.runMu.Lock()
	b.run.Pending = append(b.run.Pending, rb)
	err := b.save()
	b.runMu.Unlock()
	if err != nil {
		return fmt.Errorf("client: put files into %s: %w", b.table, err)
	}
	return b.commit(ctx, rb, shown)
}

// commit sends the pending batch rb (recorded in the run checkpoint) and,
// once acknowledged, marks it committed and reports its files. shown maps
// canonical paths to the paths the caller gave; nil shows canonical ones.
func (b *bulk) commit(ctx context.Context, rb checkpoint.RunBatch, shown map[string]string) error {
	failpoint.Hit(FailBeforeBatchAppend)
	rows := make([]fileRow, len(rb.Files))
	values := make([]wire.FileValue, len(rb.Files))
	for i, f := range rb.Files {
		values[i] = wire.FileValue{
			Key: f.Key, Size: f.Size, SHA256: f.SHA256,
			ContentType: f.ContentType, ETag: f.ETag, UploadedAt: f.UploadedAt,
		}
		rows[i] = fileRow{name: f.Name, file: values[i], at: f.UploadedAt}
	}
	rec, err := b.plan.records(rows)
	if err != nil {
		return fmt.Errorf("client: put into %s: %w", b.table, err)
	}
	start := time.Now()
	res, err := b.c.Append(ctx, b.table, rec, AppendOptions{CommitID: rb.CommitID})
	rec.Release()
	b.c.log.Debug("batch appended", "table", b.table, "rows", len(rows), "took", time.Since(start), "err", err)
	if err != nil && objectGone(err) && !b.reuploaded[rb.CommitID] {
		// A deduplicated answer went stale: its object is gone.
		if rb, err = b.reupload(ctx, rb); err != nil {
			return err
		}
		return b.commit(ctx, rb, shown)
	}
	if err != nil {
		if b.sess != nil {
			return fmt.Errorf("%w (its batch of %d rows stays pending in %s; the same command sends it again)", err, len(rows), b.sess.Path())
		}
		return err
	}
	failpoint.Hit(FailAfterBatchAppend)

	paths := make([]string, len(rb.Files))
	for i, f := range rb.Files {
		paths[i] = f.Path
	}
	b.runMu.Lock()
	b.run.Pending = slices.DeleteFunc(b.run.Pending, func(p checkpoint.RunBatch) bool { return p.CommitID == rb.CommitID })
	b.run.Committed = append(b.run.Committed, checkpoint.CommittedBatch{CommitID: rb.CommitID, TableVersion: res.GetVersion(), Paths: paths})
	err = b.save()
	b.runMu.Unlock()
	if err != nil {
		return fmt.Errorf("client: put files into %s: %w", b.table, err)
	}
	for _, f := range rb.Files {
		if b.resumable(f.Size) {
			b.dropUploadCheckpoint(f.Path)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.res.Batches++
	for i, f := range rb.Files {
		p := f.Path
		if s, ok := shown[p]; ok {
			p = s
		}
		st := b.sent[f.Path]
		b.report(FileResult{Path: p, File: values[i], Version: res.GetVersion(), Duplicate: res.GetDuplicate(),
			Deduplicated: st.dedup, BytesSent: st.bytes})
	}
	return nil
}

// reupload puts every file of the batch rb again with no_dedup, once its
// append was refused for an object that is gone (a stale dedup answer:
// which row it was the service does not say), and records the new rows
// under the same commit id: the refused append committed nothing.
func (b *bulk) reupload(ctx context.Context, rb checkpoint.RunBatch) (checkpoint.RunBatch, error) {
	if b.reuploaded == nil {
		b.reuploaded = make(map[string]bool)
	}
	b.reuploaded[rb.CommitID] = true
	next := checkpoint.RunBatch{CommitID: rb.CommitID, Files: make([]checkpoint.RunFile, len(rb.Files))}
	for i, rf := range rb.Files {
		f := bulkFile{path: rf.Path, abs: rf.Path, name: rf.Name, size: rf.Size, modTime: rf.ModTime}
		opts := objects.PutOptions{ContentType: rf.ContentType}
		var up *lakepb.UploadedFile
		switch {
		case b.granted():
			g, err := b.uploadGranted(ctx, f, opts, true)
			if err != nil {
				return rb, fmt.Errorf("client: put %s again: %w", rf.Path, err)
			}
			up = g.file
			b.noteSent(f.abs, g.stat)
		case b.c.uploadMode() == modeLocal:
			lg, err := b.c.putLocalGranted(ctx, b.table, f.name, f.abs, f.size, opts, true)
			if err != nil {
				return rb, fmt.Errorf("client: put %s again: %w", rf.Path, err)
			}
			up = lg.file
			b.noteSent(f.abs, uploadStat{bytes: lg.written})
		default:
			return rb, fmt.Errorf("client: put files into %s: an object of the batch is gone: %w", b.table, wire.ErrObjectMissing)
		}
		next.Files[i] = runFileOf(f, up)
	}
	b.runMu.Lock()
	for i := range b.run.Pending {
		if b.run.Pending[i].CommitID == rb.CommitID {
			b.run.Pending[i] = next
		}
	}
	err := b.save()
	b.runMu.Unlock()
	if err != nil {
		return rb, fmt.Errorf("client: put files into %s: %w", b.table, err)
	}
	return next, nil
}

// dropUploadCheckpoint removes the completed upload checkpoint of a large
// file whose row committed. Failing is harmless: a later put of the file
// finds its upload completed.
func (b *bulk) dropUploadCheckpoint(abs string) {
	sess, err := checkpoint.Open(b.c.checkpointPath(abs, b.table))
	if err == nil {
		err = sess.Remove()
		sess.Close()
	}
	if err != nil {
		b.c.log.Warn("cannot remove an upload checkpoint", "err", err)
	}
}
