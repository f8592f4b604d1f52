package console

import (
	"errors"
	"net/http"

	"google.golang.org/grpc/status"

	"github.com/lakedata/lake/wire"
)

// errorText is what a page says of err: the message of a gRPC status
// without its code prefix, or the error itself. lake's errors carry no
// secrets (STYLE), so they may be shown.
func errorText(err error) string {
	if s, ok := status.FromError(err); ok {
		return s.Message()
	}
	return err.Error()
}

// httpStatus maps lake's sentinels to the status a page answers with.
func httpStatus(err error) int {
	switch {
	case errors.Is(err, wire.ErrTableNotFound), errors.Is(err, wire.ErrRowNotFound),
		errors.Is(err, wire.ErrVersionNotFound):
		return http.StatusNotFound
	case errors.Is(err, wire.ErrVersionExpired):
		return http.StatusGone
	case errors.Is(err, wire.ErrPermissionDenied):
		return http.StatusForbidden
	case errors.Is(err, wire.ErrInvalidRequest), errors.Is(err, wire.ErrInvalidKey):
		return http.StatusBadRequest
	}
	return http.StatusBadGateway
}
