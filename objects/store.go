package objects

import (
	"context"
	"errors"
	"io"
	"iter"
	"time"

	"github.com/lakedata/lake/objects/checkpoint"
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
	// return it.
	ErrNotRegular = errors.New("objects: not a regular file")
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
type Store interface {
	// Put writes everything r yields under key and returns its Info with
	// Size and SHA256 set. The object becomes visible only complete: a
	// reader never sees a partial object, and a failed or cancelled Put
	// leaves nothing at key. An existing object at key is replaced.
	// An invalid key → wire.ErrInvalidKey.
	Put(ctx context.Context, key string, r io.Reader, opts PutOptions) (Info, error)

	// PutPath uploads the file at path under key, with Put's guarantees.
	//
	// cp, when not nil, is an open checkpoint session (DESIGN §7) owned by
	// the caller: a backend that resumes uploads (S3) keeps the upload's
	// progress in it and, when it already holds a checkpoint, resumes that
	// upload — which must be of the same file (else an error wrapping
	// checkpoint.ErrSourceChanged, and nothing is uploaded) to the same
	// key (checkpoint.ErrBindingMismatch). A failed or cancelled upload
	// then leaves its parts and checkpoint for the next call instead of
	// removing them; nothing is visible at key until it completes. On
	// success the checkpoint may be left marked completed; the caller
	// removes it once it no longer needs it. Backends that complete in one
	// step (local) ignore cp and write no checkpoint. cp nil: no resume.
	PutPath(ctx context.Context, key, path string, cp *checkpoint.Session, opts PutOptions) (Info, error)

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
