package objects

import (
	"context"
	"errors"
	"io"
	"iter"
	"time"

	"github.com/lakedata/lake/objects/checkpoint"
	"github.com/lakedata/lake/wire"
)

// Sentinel errors. Backends map their own failures to these at their edge.
var (
	// ErrNotFound: the key does not exist.
	ErrNotFound = errors.New("objects: not found")
	// ErrExists: PutIfAbsent found the key already present.
	ErrExists = errors.New("objects: already exists")
	// ErrInvalidRange: an Open range outside the object.
	ErrInvalidRange = errors.New("objects: invalid range")
	// ErrNotRegular: the key names something that is not an object the
	// backend stored, so it must be neither read nor accepted in a FILE
	// value. On the local stage: a symbolic link, named pipe, device or
	// socket at the key, or a symbolic link on the way to it; whatever it
	// points at stays unread. Backends without such entries (S3) never
	// return it. It is wire.ErrNotRegular, so a FILE append that names
	// such a key fails with FailedPrecondition, OBJECT_NOT_REGULAR.
	ErrNotRegular = wire.ErrNotRegular
)

// Info describes a stored object.
type Info struct {
	Key     string
	Size    int64
	ETag    string    // backend tag; may be empty
	ModTime time.Time // when the object was published
	// SHA256 is the lowercase hex SHA-256 of the whole object when the
	// backend computed it (Put, PutPath); empty when unknown (Stat, List).
	SHA256 string
}

// PutOptions are optional attributes of an uploaded object.
type PutOptions struct {
	ContentType string
	// Progress, when set, is told how far an upload got as its bytes
	// complete: at least once per part (S3) or per copy chunk (local); the
	// last call, if any, reports every byte. Calls of one upload are
	// serialized; the function must not block for long, and may cancel the
	// upload's context.
	Progress func(p Progress)
}

// Progress is a snapshot of one upload, passed to PutOptions.Progress.
type Progress struct {
	// Done is how many bytes are stored (for S3: in parts recorded in the
	// checkpoint, resumed ones included).
	Done int64
	// Total is the object's size, or -1 when unknown (Put from a stream).
	Total int64
	// ResumedParts is how many parts a resumed upload found already
	// uploaded and did not send again.
	ResumedParts int
}

// Store is a managed stage: a flat namespace of immutable objects addressed
// by clean relative keys (wire.ValidateKey). Every method takes a context
// first and honours its cancellation. Implementations are safe for
// concurrent use by several goroutines and several processes.
//
// Extra powers of a backend are optional interfaces of their own, found by
// a type assertion on the Store: Resumer (uploads that survive a crash)
// and Preparer.
type Store interface {
	// Close releases what the store holds open: the stage directory's
	// handles (local), the HTTP connections to the service (S3). Close
	// the readers Open returned first: a backend may end them (S3 does;
	// local ones stay usable). No other method may be called after it. A
	// second Close does nothing and returns nil.
	io.Closer

	// Put writes everything r yields under key and returns its Info with
	// Size and SHA256 set. The object becomes visible only complete: a
	// reader never sees a partial object, and a failed or cancelled Put
	// leaves nothing at key. An existing object at key is replaced.
	// An invalid key → wire.ErrInvalidKey.
	Put(ctx context.Context, key string, r io.Reader, opts PutOptions) (Info, error)

	// PutPath uploads the file at path under key, with Put's guarantees:
	// a failed or cancelled upload leaves nothing behind, and the next
	// call starts over. A resumable upload is Resumer.PutPathResumable.
	PutPath(ctx context.Context, key, path string, opts PutOptions) (Info, error)

	// PutIfAbsent atomically creates key with data unless key exists, in
	// which case it returns ErrExists and changes nothing. Exactly one of
	// any number of concurrent callers for the same key succeeds. Meant for
	// small records (log entries, catalog entries). Durable on return.
	PutIfAbsent(ctx context.Context, key string, data []byte) error

	// Open returns a reader of length bytes of key starting at offset;
	// length < 0 reads to the end. Missing key → ErrNotFound; offset beyond
	// the end → ErrInvalidRange. A range reaching past the end is cut at the
	// end. A key that names no object of the store's own making (a symbolic
	// link, say) → ErrNotRegular.
	Open(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)

	// Stat returns the Info of key (SHA256 empty). Missing → ErrNotFound;
	// not an object of the store's own making → ErrNotRegular, as Open.
	Stat(ctx context.Context, key string) (Info, error)

	// List yields the objects whose keys start with prefix, in ascending
	// key order, with SHA256 empty. prefix need not be a clean key ("" lists
	// everything; "a/b" matches "a/b/c" and "a/bc"). Objects being written
	// are not listed, nor is anything Open and Stat refuse with
	// ErrNotRegular.
	List(ctx context.Context, prefix string) iter.Seq2[Info, error]

	// Delete removes key. A missing key is not an error.
	Delete(ctx context.Context, key string) error
}

// ReadAll returns the whole content of key.
func ReadAll(ctx context.Context, s Store, key string) ([]byte, error) {
	rc, err := s.Open(ctx, key, 0, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// Preparer is an optional Store capability: make a small object durable
// now and publish it later with put-if-absent semantics. The metadata
// service uses it to overlap writing the next log record with writing the
// data file that record refers to; the record still becomes visible only
// after the data file is durable.
type Preparer interface {
	// PrepareIfAbsent validates key and makes data durable, unpublished.
	PrepareIfAbsent(ctx context.Context, key string, data []byte) (Prepared, error)
}

// Prepared is a durable, unpublished object.
type Prepared interface {
	// Publish makes it visible at its key unless the key exists
	// (ErrExists), exactly as PutIfAbsent. Call it at most once.
	Publish(ctx context.Context) error
	// Discard drops an unpublished object. Safe after Publish.
	Discard()
}

// Resumer is an optional Store capability: uploads of a file that survive
// a failure, a cancellation or a crash of the uploading process and go on
// from where they stopped (DESIGN §7). Find it with a type assertion:
//
//	if r, ok := store.(objects.Resumer); ok { … }
//
// The S3 backend has it; the local one completes an upload in one step
// (temp file, fsync, rename), so it has nothing to resume and lacks it.
//
// The caller owns the checkpoint session (checkpoint.Open): it picks the
// checkpoint's path, holds its lock for the whole upload, may read and add
// to what the Resumer saved (the commit id of the append that follows),
// and removes the checkpoint when it no longer needs it. The Resumer owns
// the upload state in it: what it saves there is its own to interpret.
type Resumer interface {
	// PutPathResumable uploads the file at path under key as PutPath
	// does, keeping the upload's progress in the checkpoint session cp.
	// When cp already holds a checkpoint, it resumes that upload, which
	// must be of the same file (else an error wrapping
	// checkpoint.ErrSourceChanged, and nothing is uploaded) to the same
	// key of the same stage (checkpoint.ErrBindingMismatch). A failed or
	// cancelled upload leaves its parts and checkpoint for the next call
	// instead of removing them; nothing is visible at key until it
	// completes. On success the checkpoint may be left marked completed,
	// and the same call again returns the same object without sending it.
	// A file with nothing to resume (an empty one, or one small enough
	// for a single request) may be uploaded in one step and leave no
	// checkpoint.
	PutPathResumable(ctx context.Context, key, path string, cp *checkpoint.Session, opts PutOptions) (Info, error)

	// Uploads returns the checkpoints in dir (checkpoint.List) of uploads
	// to this stage: interrupted ones, which PutPathResumable resumes and
	// Cancel gives up, and running ones (Entry.Locked). A checkpoint that
	// cannot be read names no stage and is left out; checkpoint.List
	// reports it. A missing dir holds none.
	Uploads(ctx context.Context, dir string) ([]checkpoint.Entry, error)

	// Cancel gives up the upload cp records, dropping what it stored of
	// it (S3: its parts). cp must be of this stage (else
	// checkpoint.ErrBindingMismatch). An upload already gone is cancelled;
	// one that completed is not (its object exists) and Cancel fails.
	// Removing the checkpoint, under its session's lock, is the caller's
	// part.
	Cancel(ctx context.Context, cp *checkpoint.Checkpoint) error
}

// Sweeper is an optional Store capability: list and remove what failed or
// abandoned writes left in the stage, for garbage collection (DESIGN §11).
// The S3 backend has unfinished multipart uploads; the local one has the
// temp files of writes that crashed before their rename.
type Sweeper interface {
	// Leftovers lists the leftovers started before before, in no
	// particular order. Never one of a write that may still finish in
	// time: the caller picks before with a grace.
	Leftovers(ctx context.Context, before time.Time) iter.Seq2[Leftover, error]
	// RemoveLeftover removes one; one already gone is ErrNotFound.
	RemoveLeftover(ctx context.Context, l Leftover) error
}

// Kinds of Leftover.
const (
	LeftoverUpload = "upload" // an unfinished multipart upload
	LeftoverTemp   = "temp"   // a temp file
)

// Leftover is one thing a failed write left.
type Leftover struct {
	Kind    string    // LeftoverUpload or LeftoverTemp
	Key     string    // the key the write was for (a temp file: its own path below the stage)
	ID      string    // the upload id of an upload
	Size    int64     // bytes it holds, where known cheaply (a temp file)
	Started time.Time // when the write began
}
