package local

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"log/slog"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/wire"
)

const (
	// TempDir is the directory under root where objects are built before
	// they are published. Other processes writing to the same stage share it.
	TempDir = ".lake-tmp"

	// StaleTempAge is how old a temp file must be before Open removes it. A
	// day is far longer than any live upload, so only crashed writers' files
	// qualify.
	StaleTempAge = 24 * time.Hour

	copyBufSize = 1 << 20
	filePerm    = 0o644
	dirPerm     = 0o755

	// publishAttempts bounds retries when a concurrent Delete removes the
	// directory a writer has just created.
	publishAttempts = 8
)

var (
	_ objects.Store    = (*Store)(nil)
	_ objects.Preparer = (*Store)(nil)
)

// bufPool recycles copy buffers: at 1 MiB, allocating one per Put would
// dominate the garbage of small uploads.
var bufPool = sync.Pool{New: func() any {
	b := make([]byte, copyBufSize)
	return &b
}}

// Store is a stage in a local directory. It is safe for concurrent use, also
// by several processes sharing the directory.
type Store struct {
	root    *os.Root
	res     resolver // Open, Stat and List: no symbolic links followed
	dir     string
	logger  *slog.Logger
	durable durableDirs
	syncs   atomic.Int64 // fsyncs made, files and directories
}

// Open opens the stage at dir, creating it if missing, and removes temp files
// older than StaleTempAge from dir/.lake-tmp. A nil logger discards logs.
func Open(dir string, logger *slog.Logger) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return nil, fmt.Errorf("local: create stage: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("local: open stage: %w", err)
	}
	if err := root.MkdirAll(TempDir, dirPerm); err != nil {
		root.Close()
		return nil, fmt.Errorf("local: create temp dir: %w", err)
	}
	s := &Store{root: root, dir: dir, logger: logger.With("stage", dir)}
	if err := s.res.init(root); err != nil {
		root.Close()
		return nil, fmt.Errorf("local: open stage: %w", err)
	}
	s.removeStaleTemp(time.Now())
	return s, nil
}

// Close implements objects.Store: it releases the handles on the stage
// directory (its os.Root and the descriptor Open, Stat and List resolve
// keys from). Readers returned by Open stay usable. A second Close does
// nothing.
func (s *Store) Close() error {
	return errors.Join(s.res.close(), s.root.Close())
}

// Dir returns the stage directory as given to Open.
func (s *Store) Dir() string {
	return s.dir
}

// removeStaleTemp is best effort: a leftover temp file wastes space but
// breaks nothing, so failures are logged, not returned.
func (s *Store) removeStaleTemp(now time.Time) {
	d, err := s.root.Open(TempDir)
	if err != nil {
		s.logger.Warn("cannot read temp dir", "err", err)
		return
	}
	entries, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		s.logger.Warn("cannot read temp dir", "err", err)
		return
	}
	removed := 0
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		fi, err := e.Info()
		if err != nil || now.Sub(fi.ModTime()) < StaleTempAge {
			continue
		}
		err = s.root.Remove(TempDir + "/" + e.Name())
		switch {
		case err == nil:
			removed++
		case !errors.Is(err, fs.ErrNotExist): // another process got there first
			s.logger.Warn("cannot remove stale temp file", "name", e.Name(), "err", err)
		}
	}
	if removed > 0 {
		s.logger.Info("removed stale temp files", "count", removed)
	}
}

// checkKey applies wire.ValidateKey and keeps keys out of the temp dir, so
// no caller can read, replace or delete an upload in progress.
// EqualFold because the stage may sit on a case-insensitive file system.
func checkKey(key string) error {
	if err := wire.ValidateKey(key); err != nil {
		return err
	}
	first, _, _ := strings.Cut(key, "/")
	if strings.EqualFold(first, TempDir) {
		return fmt.Errorf("%w: %q is reserved by the local stage", wire.ErrInvalidKey, TempDir)
	}
	return nil
}

// isNotExist also treats ENOTDIR as missing: Stat("a/b") when "a" is an
// object is simply a key that does not exist.
func isNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

func etag(modTime time.Time, size int64) string {
	return fmt.Sprintf("%x-%x", modTime.UnixNano(), size)
}

func info(key string, fi fs.FileInfo) objects.Info {
	return objects.Info{Key: key, Size: fi.Size(), ETag: etag(fi.ModTime(), fi.Size()), ModTime: fi.ModTime()}
}

// createTemp makes a fresh temp file. O_EXCL with a random name keeps
// concurrent writers, in this and other processes, apart.
func (s *Store) createTemp() (*os.File, string, error) {
	name := TempDir + "/put-" + rand.Text()
	f, err := s.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
	if errors.Is(err, fs.ErrNotExist) {
		// Someone removed the temp dir while the stage was open.
		if err := s.root.MkdirAll(TempDir, dirPerm); err != nil {
			return nil, "", err
		}
		f, err = s.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
	}
	if err != nil {
		return nil, "", err
	}
	return f, name, nil
}

// Put implements objects.Store.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, opts objects.PutOptions) (objects.Info, error) {
	if err := checkKey(key); err != nil {
		return objects.Info{}, fmt.Errorf("local: put: %w", err)
	}
	return s.put(ctx, key, r, -1, opts.Progress)
}

// put is Put of total bytes (-1: unknown) reporting to progress, if set.
func (s *Store) put(ctx context.Context, key string, r io.Reader, total int64, progress func(objects.Progress)) (objects.Info, error) {
	if err := ctx.Err(); err != nil {
		return objects.Info{}, fmt.Errorf("local: put %s: %w", key, err)
	}
	f, tmp, err := s.createTemp()
	if err != nil {
		return objects.Info{}, fmt.Errorf("local: put %s: %w", key, err)
	}
	published := false
	defer func() {
		if !published {
			f.Close() // may already be closed; the error is irrelevant then
			s.root.Remove(tmp)
		}
	}()

	h := sha256.New()
	n, err := copyCtx(ctx, f, h, r, func(done int64) {
		if progress != nil {
			progress(objects.Progress{Done: done, Total: total})
		}
	})
	if err != nil {
		return objects.Info{}, fmt.Errorf("local: put %s: %w", key, err)
	}
	if err := s.sync(f); err != nil {
		return objects.Info{}, fmt.Errorf("local: put %s: sync: %w", key, err)
	}
	// rename(2) keeps the mtime, so this is what Stat and List report later
	// and the ETags agree.
	fi, err := f.Stat()
	if err != nil {
		return objects.Info{}, fmt.Errorf("local: put %s: %w", key, err)
	}
	if err := f.Close(); err != nil {
		return objects.Info{}, fmt.Errorf("local: put %s: %w", key, err)
	}
	// The last chance to honour a cancel: after the rename the object is out.
	if err := ctx.Err(); err != nil {
		return objects.Info{}, fmt.Errorf("local: put %s: %w", key, err)
	}
	if err := s.publish(key, func() error { return s.root.Rename(tmp, key) }); err != nil {
		return objects.Info{}, fmt.Errorf("local: put %s: %w", key, err)
	}
	published = true
	out := info(key, fi)
	out.Size = n
	out.SHA256 = hex.EncodeToString(h.Sum(nil))
	return out, nil
}

// copyCtx copies r to both f and h, checking ctx between chunks so a
// cancelled upload stops within one chunk. It calls done with the bytes
// copied so far after each chunk.
func copyCtx(ctx context.Context, f io.Writer, h io.Writer, r io.Reader, done func(int64)) (int64, error) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		nr, rerr := r.Read(buf)
		if nr > 0 {
			if _, err := f.Write(buf[:nr]); err != nil {
				return n, err
			}
			h.Write(buf[:nr]) // hash.Hash never fails
			n += int64(nr)
			done(n)
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, fmt.Errorf("read source: %w", rerr)
		}
	}
}

// PutPath implements objects.Store. A local put completes in one step
// (temp file, fsync, rename), so there is nothing to resume and the store
// is no objects.Resumer.
func (s *Store) PutPath(ctx context.Context, key, path string, opts objects.PutOptions) (objects.Info, error) {
	if err := checkKey(key); err != nil {
		return objects.Info{}, fmt.Errorf("local: put: %w", err)
	}
	f, err := os.Open(path)
	if err != nil {
		return objects.Info{}, fmt.Errorf("local: put %s: %w", key, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return objects.Info{}, fmt.Errorf("local: put %s: %w", key, err)
	}
	total := int64(-1)
	if fi.Mode().IsRegular() {
		total = fi.Size()
	}
	return s.put(ctx, key, f, total, opts.Progress)
}

// PutIfAbsent implements objects.Store. link(2), unlike rename(2), refuses
// to replace an existing name, which is what makes it atomic across
// processes.
func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	p, err := s.PrepareIfAbsent(ctx, key, data)
	if err != nil {
		return err
	}
	return p.Publish(ctx)
}

// PrepareIfAbsent implements objects.Preparer: the data is written and
// fsync'd to a temp file now; Publish links it onto the key.
func (s *Store) PrepareIfAbsent(ctx context.Context, key string, data []byte) (objects.Prepared, error) {
	if err := checkKey(key); err != nil {
		return nil, fmt.Errorf("local: put-if-absent: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("local: put-if-absent %s: %w", key, err)
	}
	f, tmp, err := s.createTemp()
	if err != nil {
		return nil, fmt.Errorf("local: put-if-absent %s: %w", key, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = s.sync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		s.root.Remove(tmp)
		return nil, fmt.Errorf("local: put-if-absent %s: %w", key, err)
	}
	return &prepared{s: s, key: key, tmp: tmp}, nil
}

type prepared struct {
	s        *Store
	key, tmp string
}

func (p *prepared) Publish(ctx context.Context) error {
	s, key, tmp := p.s, p.key, p.tmp
	// The temp name goes whatever happens: on success the key holds the
	// second link to the same inode.
	defer s.root.Remove(tmp)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("local: put-if-absent %s: %w", key, err)
	}
	err := s.publish(key, func() error { return s.root.Link(tmp, key) })
	if errors.Is(err, fs.ErrExist) {
		if fi, serr := s.root.Lstat(key); serr == nil && fi.IsDir() {
			// Not an object, so ErrExists would be a lie.
			return fmt.Errorf("local: put-if-absent %s: a directory of that name holds other keys", key)
		}
		return fmt.Errorf("local: put-if-absent %s: %w", key, objects.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("local: put-if-absent %s: %w", key, err)
	}
	return nil
}

func (p *prepared) Discard() { p.s.root.Remove(p.tmp) }

// publish runs place (the rename or link onto key), creating the key's
// directories when missing, then fsyncs what durability needs: the key's
// directory, for its new entry, and each directory on the way up whose own
// entry is not yet known durable (see durableDirs).
func (s *Store) publish(key string, place func() error) error {
	dir := path.Dir(key)
	err := place()
	for attempt := 1; errors.Is(err, fs.ErrNotExist) && dir != "." && attempt <= publishAttempts; attempt++ {
		// The directory is missing: make it, or a concurrent Delete
		// removed it as empty between MkdirAll and place — or, within
		// MkdirAll, removed a parent it had just made (then MkdirAll
		// itself fails with ErrNotExist, and the loop tries again). What
		// was known of it is stale; of an ancestor that was recreated, its
		// identity tells.
		s.durable.forget(dir)
		// ErrExist: another put made the directory while this MkdirAll
		// ran and a Delete removed it again before MkdirAll looked;
		// whatever it is now, place tells.
		if err = s.root.MkdirAll(dir, dirPerm); err == nil || errors.Is(err, fs.ErrExist) {
			err = place()
		}
	}
	if err != nil {
		return err
	}
	return s.syncUp(dir)
}

// syncUp fsyncs dir, which has just gained an entry, and then the parent
// of every directory on the way to root whose entry is not known durable,
// up to the first that is: a new directory (this put's, or one another
// writer made and has not synced yet) is durable only once its parent is
// synced, and so on up. Known-durable directories cost nothing, so a put
// into an existing directory syncs just that one.
func (s *Store) syncUp(dir string) error {
	var fresh []durableDir
	fi, err := s.syncDir(dir)
	for err == nil && dir != "." && !s.durable.has(dir, fi) {
		fresh = append(fresh, durableDir{dir, fi})
		dir = path.Dir(dir)
		fi, err = s.syncDir(dir)
	}
	if err != nil {
		return err
	}
	s.durable.add(fresh)
	return nil
}

// syncDir fsyncs dir and returns what it is, to recognise it later.
//
// Puts at the same time into one directory each fsync it: the kernel
// already lets concurrent fsyncs share a journal commit, and returns at
// once when another's commit has covered the entry. Making a put wait
// for an fsync already running, to share the next, was measured slower
// with 8 puts at a time (docs/benchmarks.md, "Tried and dropped"; that
// variant is not in the tree).
func (s *Store) syncDir(dir string) (fs.FileInfo, error) {
	d, err := s.root.Open(dir)
	if err != nil {
		return nil, err
	}
	err = s.sync(d)
	var fi fs.FileInfo
	if err == nil {
		fi, err = d.Stat()
	}
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return fi, nil
}

// sync fsyncs f, counting it for tests.
func (s *Store) sync(f *os.File) error {
	s.syncs.Add(1)
	return f.Sync()
}

// Open implements objects.Store. Reads from the returned reader fail once
// ctx is done, as they would on a remote backend. Only a regular file
// reached through real directories is opened: a symbolic link, named
// pipe, device or socket at the key, or a link on the way to it →
// objects.ErrNotRegular, and nothing behind it is read.
func (s *Store) Open(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := checkKey(key); err != nil {
		return nil, fmt.Errorf("local: open: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("local: open %s: %w", key, err)
	}
	f, size, err := s.open(key)
	if err != nil {
		return nil, fmt.Errorf("local: open %s: %w", key, err)
	}
	if offset < 0 || offset > size {
		f.Close()
		return nil, fmt.Errorf("local: open %s: offset %d of %d bytes: %w", key, offset, size, objects.ErrInvalidRange)
	}
	n := size - offset
	if length >= 0 && length < n {
		n = length
	}
	return &reader{ctx: ctx, r: io.NewSectionReader(f, offset, n), f: f}, nil
}

type reader struct {
	ctx context.Context
	r   *io.SectionReader
	f   *os.File
}

func (r *reader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

func (r *reader) Close() error {
	return r.f.Close()
}

// Stat implements objects.Store, refusing what Open refuses: the metadata
// service stats every FILE value it commits, and a link must not pass for
// an object with the size of whatever it points at.
func (s *Store) Stat(ctx context.Context, key string) (objects.Info, error) {
	if err := checkKey(key); err != nil {
		return objects.Info{}, fmt.Errorf("local: stat: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return objects.Info{}, fmt.Errorf("local: stat %s: %w", key, err)
	}
	in, err := s.stat(key)
	if err != nil {
		return objects.Info{}, fmt.Errorf("local: stat %s: %w", key, err)
	}
	return in, nil
}

// List implements objects.Store. It walks only the directory named by
// prefix up to its last slash, since every matching key lies below it, and
// prunes subdirectories that cannot hold a match. It neither reports nor
// enters symbolic links.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[objects.Info, error] {
	return func(yield func(objects.Info, error) bool) {
		start := "."
		if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
			start = prefix[:i]
			if checkKey(start) != nil {
				// Every key below start would be invalid too, so none exists.
				return
			}
		}
		infos, err := s.list(ctx, start, prefix)
		if err != nil {
			yield(objects.Info{}, fmt.Errorf("local: list %q: %w", prefix, err))
			return
		}
		// Directory order puts "a/b" before "a.b"; byte order, as on S3, does not.
		slices.SortFunc(infos, func(a, b objects.Info) int { return cmp.Compare(a.Key, b.Key) })
		for _, in := range infos {
			if !yield(in, nil) {
				return
			}
		}
	}
}

// Delete implements objects.Store. It then removes the parent directories
// left empty, up to but not including root.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return fmt.Errorf("local: delete: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("local: delete %s: %w", key, err)
	}
	// A directory is not an object, and Remove would delete an empty one.
	fi, err := s.root.Lstat(key)
	if isNotExist(err) || (err == nil && fi.IsDir()) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("local: delete %s: %w", key, err)
	}
	if err := s.root.Remove(key); err != nil && !isNotExist(err) {
		return fmt.Errorf("local: delete %s: %w", key, err)
	}
	// Remove fails on a directory that is not empty, which ends the climb.
	for dir := path.Dir(key); dir != "."; dir = path.Dir(dir) {
		if s.root.Remove(dir) != nil {
			break
		}
		s.durable.forget(dir)
	}
	return nil
}
