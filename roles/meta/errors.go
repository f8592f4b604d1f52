package meta

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/wire"
)

// codeOf is the one place the metadata service maps errors to gRPC codes
// (DESIGN §4).
func codeOf(err error) codes.Code {
	switch {
	case errors.Is(err, wire.ErrMalformedCommand), errors.Is(err, wire.ErrUnknownCommand),
		errors.Is(err, wire.ErrInvalidTable), errors.Is(err, wire.ErrInvalidCommitID),
		errors.Is(err, wire.ErrInvalidKey), errors.Is(err, wire.ErrInvalidFileValue),
		errors.Is(err, wire.ErrSchemaMismatch), errors.Is(err, wire.ErrInvalidSchema),
		errors.Is(err, wire.ErrEmptyAppend), errors.Is(err, wire.ErrInvalidRequest):
		return codes.InvalidArgument
	case errors.Is(err, wire.ErrTableNotFound), errors.Is(err, wire.ErrVersionNotFound):
		return codes.NotFound
	case errors.Is(err, wire.ErrTableExists):
		return codes.AlreadyExists
	case errors.Is(err, wire.ErrObjectMissing), errors.Is(err, wire.ErrSizeMismatch),
		errors.Is(err, objects.ErrNotRegular): // the key is a link or pipe, not an object
		return codes.FailedPrecondition
	case errors.Is(err, wire.ErrVersionConflict):
		return codes.Aborted
	case errors.Is(err, wire.ErrNotLeader), errors.Is(err, ErrClosed):
		return codes.Unavailable
	case errors.Is(err, wire.ErrUnauthenticated):
		return codes.Unauthenticated
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	}
	return codes.Internal
}

// statusErr turns err into a gRPC status error, keeping an existing status.
func statusErr(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codeOf(err), err.Error())
}
