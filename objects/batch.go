package objects

import "context"

// BatchDeleter is an optional Store capability: remove many keys in one
// request, for garbage collection (DESIGN §11), which may free millions
// of objects. The S3 backend has it (DeleteObjects); the local one
// removes a file per system call whatever the interface, and lacks it.
type BatchDeleter interface {
	// MaxDeleteBatch is the most keys one DeleteMany call takes.
	MaxDeleteBatch() int

	// DeleteMany removes keys (at most MaxDeleteBatch of them), a missing
	// key being no error, as Delete does for each. On an error some of
	// the keys may be removed and others not; a second call with the same
	// keys finishes the job.
	DeleteMany(ctx context.Context, keys []string) error
}
