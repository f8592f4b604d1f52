package wire

import "errors"

// Sentinel errors of the protocol. Callers wrap them with context
// (fmt.Errorf("...: %w", ErrX)); each role maps them to gRPC codes in one
// place. They never carry secrets.
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

	// NotFound.
	ErrTableNotFound   = errors.New("table not found")
	ErrVersionNotFound = errors.New("version not found")

	// AlreadyExists.
	ErrTableExists = errors.New("table already exists")

	// FailedPrecondition.
	ErrObjectMissing = errors.New("object missing from the stage")
	ErrSizeMismatch  = errors.New("object size differs")

	// Aborted.
	ErrVersionConflict = errors.New("table version differs from expected_version")

	// Unavailable.
	ErrNotLeader = errors.New("no metadata leader available")

	// Unauthenticated.
	ErrUnauthenticated = errors.New("unauthenticated")
)
