package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

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

// sentinelsByCode lists, per gRPC code, the wire sentinels a lake service
// maps to it (roles/meta codeOf). The server's message is the wrapped
// sentinel's text, which picks the right one among several.
var sentinelsByCode = map[codes.Code][]error{
	codes.InvalidArgument: {
		wire.ErrMalformedCommand, wire.ErrUnknownCommand, wire.ErrInvalidTable, wire.ErrInvalidCommitID,
		wire.ErrInvalidKey, wire.ErrInvalidFileValue, wire.ErrSchemaMismatch, wire.ErrInvalidSchema,
		wire.ErrEmptyAppend, wire.ErrInvalidRequest,
	},
	codes.NotFound:           {wire.ErrTableNotFound, wire.ErrVersionNotFound},
	codes.AlreadyExists:      {wire.ErrTableExists},
	codes.FailedPrecondition: {wire.ErrObjectMissing, wire.ErrSizeMismatch},
	codes.Aborted:            {wire.ErrVersionConflict},
	codes.Unavailable:        {wire.ErrNotLeader},
	codes.Unauthenticated:    {wire.ErrUnauthenticated},
}

// StatusError is an error the endpoint returned. Its message is the
// server's; errors.Is matches the wire sentinel the server reported, and
// status.Code still sees the gRPC code.
type StatusError struct {
	status   *status.Status
	sentinel error // nil when the message names none
}

func (e *StatusError) Error() string {
	if msg := e.status.Message(); msg != "" {
		return msg
	}
	return e.status.Code().String()
}

func (e *StatusError) Unwrap() error { return e.sentinel }

// GRPCStatus lets status.FromError and status.Code see through the wrap.
func (e *StatusError) GRPCStatus() *status.Status { return e.status }

// Code is the gRPC status code.
func (e *StatusError) Code() codes.Code { return e.status.Code() }

// remoteError maps a gRPC status error of an endpoint call to a
// *StatusError; other errors pass through.
func remoteError(err error) error {
	if err == nil {
		return nil
	}
	var se *StatusError
	if errors.As(err, &se) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	e := &StatusError{status: st}
	switch st.Code() {
	case codes.Canceled:
		e.sentinel = context.Canceled
	case codes.DeadlineExceeded:
		e.sentinel = context.DeadlineExceeded
	case codes.Unauthenticated:
		e.sentinel = wire.ErrUnauthenticated // whatever the message says
	default:
		// Matching on the text, not the code alone: a connection refused is
		// also Unavailable, and it is not "no metadata leader".
		for _, s := range sentinelsByCode[st.Code()] {
			if strings.Contains(st.Message(), s.Error()) {
				e.sentinel = s
				break
			}
		}
	}
	return e
}

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
