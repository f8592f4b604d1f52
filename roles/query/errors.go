package query

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lakedata/lake/roles/query/sqlguard"
	"github.com/lakedata/lake/wire"
)

// ErrRelayFull is the answer to an append that would push the frames the
// relay holds past Config.RelayBuffer: the caller may retry later.
var ErrRelayFull = errors.New("the append relay is at its memory budget")

// codeOf is the one place the query service maps its own errors to gRPC
// codes. Errors relayed from the metadata service keep their status.
func codeOf(err error) codes.Code {
	switch {
	case errors.Is(err, ErrNotReadOnly), errors.Is(err, errSQL), errors.Is(err, errUnsupported),
		errors.Is(err, sqlguard.ErrRefused),
		errors.Is(err, wire.ErrInvalidRequest), errors.Is(err, wire.ErrMalformedCommand),
		errors.Is(err, wire.ErrUnknownCommand), errors.Is(err, wire.ErrInvalidKey),
		errors.Is(err, wire.ErrEmptyAppend), errors.Is(err, wire.ErrSchemaMismatch),
		errors.Is(err, wire.ErrInvalidSchema), errors.Is(err, wire.ErrInvalidTable),
		errors.Is(err, wire.ErrInvalidCommitID):
		return codes.InvalidArgument
	case errors.Is(err, wire.ErrTableNotFound):
		return codes.NotFound
	case errors.Is(err, ErrRelayFull), errors.Is(err, ErrMemoryExhausted):
		return codes.ResourceExhausted
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	}
	return codes.Internal
}

// statusErr turns err into a gRPC status error, keeping an existing status
// (a relayed answer of the metadata service) as it is.
func statusErr(err error) error {
	if err == nil {
		return nil
	}
	// FromError also finds a status wrapped with context.
	if s, ok := status.FromError(err); ok {
		return s.Err()
	}
	return status.Error(codeOf(err), err.Error())
}
