package client

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lakedata/lake/wire"
)

// Sentinel errors of the client. Errors that the endpoint returns unwrap to
// the wire sentinels instead (wire.ErrTableNotFound, …).
var (
	// ErrIntegrity: an object read back from the stage does not have the
	// size or SHA-256 its FILE value records.
	ErrIntegrity = errors.New("client: object integrity check failed")
	// ErrUnknownColumn: a PutOptions.Set column the table does not have.
	ErrUnknownColumn = errors.New("no such column")
	// ErrInvalidValue: a PutOptions.Set value that does not parse as its
	// column's type, or a column Set cannot fill.
	ErrInvalidValue = errors.New("invalid value")
	// ErrMissingValue: a non-nullable column a put would leave null.
	ErrMissingValue = errors.New("missing value for a non-nullable column")
	// ErrNoFileColumn: the table has no FILE column to put a file into.
	ErrNoFileColumn = errors.New("the table has no FILE column")
	// ErrFileNotFound: no row of the table holds a FILE value with that key.
	ErrFileNotFound = errors.New("no such file in the table")
	// ErrStageUnsupported: the endpoint's stage is of a kind this client
	// cannot upload to yet.
	ErrStageUnsupported = errors.New("stage not supported")
)

// ValueError reports a row value a put cannot fill. It is returned before
// anything is uploaded.
type ValueError struct {
	Column string
	Err    error // wraps ErrUnknownColumn, ErrInvalidValue or ErrMissingValue
}

func (e *ValueError) Error() string { return fmt.Sprintf("column %q: %v", e.Column, e.Err) }
func (e *ValueError) Unwrap() error { return e.Err }

// StatusError is an error the endpoint returned (wire.FromStatus makes
// it). Its message is the server's; errors.Is matches the wire sentinel
// the server's ErrorInfo reason names, and status.Code still sees the
// gRPC code.
type StatusError = wire.StatusError

// remoteError maps a gRPC status error of an endpoint call to a
// *StatusError; other errors pass through. A status without a lake
// reason, such as the Unavailable of a refused connection, matches no
// lake sentinel.
func remoteError(err error) error { return wire.FromStatus(err) }

// retryable reports whether an append that failed with err may have been
// lost in flight or never arrived, so resending it with the same commit id
// is safe and may succeed.
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}
