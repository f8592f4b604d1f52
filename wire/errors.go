package wire

import "errors"

// Sentinel errors of the protocol. Callers wrap them with context
// (fmt.Errorf("...: %w", ErrX)). Each has one row in the error table
// (status.go): the gRPC code a service answers with and the stable reason
// its status carries, from which a Go caller gets the sentinel back
// (FromStatus). They never carry secrets.
//
// Sentinels of other packages are these same values under another name
// (objects.ErrNotRegular, sqlguard.ErrRefused, query.ErrRelayFull, …) or
// wrap one of them (meta.ErrClosed), so that wire knows every error that
// crosses the wire without importing anything of lake. The table also
// holds context.Canceled and context.DeadlineExceeded.
var (
	// InvalidArgument.
	ErrMalformedCommand = errors.New("malformed command descriptor")
	ErrUnknownCommand   = errors.New("unknown command type")
	ErrInvalidTable     = errors.New("invalid table name")
	ErrInvalidCommitID  = errors.New("invalid commit id")
	ErrInvalidKey       = errors.New("invalid object key")
	ErrInvalidFileValue = errors.New("invalid FILE value")
	ErrSchemaMismatch   = errors.New("schema mismatch")
	ErrInvalidSchema    = errors.New("invalid schema")
	ErrEmptyAppend      = errors.New("empty append: no rows")
	ErrInvalidRequest   = errors.New("invalid request")
	// ErrNotReadOnly: SQL that is not a single SELECT, or a DoPut that is
	// not a FILE append (query.ErrNotReadOnly).
	ErrNotReadOnly = errors.New("only a single read-only SELECT statement is allowed")
	// ErrSQLNotAllowed: a SELECT that uses a function, table or construct
	// lake SQL does not allow (sqlguard.ErrRefused).
	ErrSQLNotAllowed = errors.New("not allowed in lake SQL")
	// ErrInvalidSQL: SQL that does not parse or bind.
	ErrInvalidSQL = errors.New("SQL error")
	// ErrUnsupported: SQL that lake does not support yet (statement
	// parameters).
	ErrUnsupported = errors.New("not supported")
	// ErrTimestampInFuture: time travel to a time that has not come yet
	// (AT (TIMESTAMP => …) after now), DESIGN §10.
	ErrTimestampInFuture = errors.New("timestamp in the future")

	// NotFound.
	ErrTableNotFound   = errors.New("table not found")
	ErrVersionNotFound = errors.New("version not found")
	// ErrRowNotFound: a read URL was asked for a key that no row of the
	// table's current version has (lake.table.url). A delete of such a
	// key is ErrKeyNotFound instead, a failed precondition of a change.
	ErrRowNotFound = errors.New("no row of the table has the key")
	// ErrUploadNotFound: a granted upload that the stage does not hold
	// (never granted, completed or aborted).
	ErrUploadNotFound = errors.New("no such upload")

	// AlreadyExists.
	ErrTableExists = errors.New("table already exists")

	// FailedPrecondition.
	ErrObjectMissing = errors.New("object missing from the stage")
	ErrSizeMismatch  = errors.New("object size differs")
	// ErrNotRegular: the key names something that is not an object the
	// stage stored, such as a symbolic link or a named pipe
	// (objects.ErrNotRegular).
	ErrNotRegular = errors.New("objects: not a regular file")
	// ErrVersionExpired: a table version that was committed but has
	// expired, so time travel cannot read it (DESIGN §10).
	ErrVersionExpired = errors.New("version expired")
	// ErrKeyNotFound: a delete names a FILE key that no row of the
	// table's current version has (DESIGN §11); nothing was deleted.
	ErrKeyNotFound = errors.New("no row has the key")
	// ErrUploadIncomplete: lake.upload.complete found parts missing or of
	// the wrong size; the upload stays, to be finished and completed.
	ErrUploadIncomplete = errors.New("upload incomplete")
	// ErrChecksumMismatch: the bytes the service read have another
	// SHA-256 than the one claimed.
	ErrChecksumMismatch = errors.New("object checksum differs")

	// Aborted.
	ErrVersionConflict = errors.New("table version differs from expected_version")

	// Unavailable.
	ErrNotLeader = errors.New("no metadata leader available")
	// ErrClosed: the service is shutting down (meta.ErrClosed wraps it).
	ErrClosed = errors.New("service is closed")

	// ResourceExhausted.
	ErrResourceExhausted = errors.New("resource exhausted")
	// ErrRelayFull: the query role's append relay is at its memory budget
	// (query.ErrRelayFull); the caller may retry later.
	ErrRelayFull = errors.New("the append relay is at its memory budget")
	// ErrMemoryExhausted: a statement was stopped because the query role
	// ran out of memory (query.ErrMemoryExhausted).
	ErrMemoryExhausted = errors.New("statement stopped: the query role is out of memory")

	// Unauthenticated.
	ErrUnauthenticated = errors.New("unauthenticated")

	// PermissionDenied: the caller's token does not allow the call.
	ErrPermissionDenied = errors.New("permission denied")
)
