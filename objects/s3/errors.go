package s3

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/lakedata/lake/objects"
)

// S3 error codes this package acts on.
const (
	codeNoSuchKey          = "NoSuchKey"
	codeNotFound           = "NotFound" // HEAD responses have no body, hence no precise code
	codeNoSuchUpload       = "NoSuchUpload"
	codePreconditionFailed = "PreconditionFailed"
	codeConflict           = "ConditionalRequestConflict"
	codeInvalidRange       = "InvalidRange"
)

func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func httpStatus(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// mapErr adds the objects sentinel that an SDK error stands for, keeping the
// SDK error (operation, status, request id) in the chain. The SDK's messages
// carry neither credentials nor signatures.
//
// A 404 without a body (HEAD) is read as a missing key, though it may also
// be a missing bucket: HEAD cannot tell them apart.
func mapErr(err error) error {
	code, status := errorCode(err), httpStatus(err)
	switch {
	case code == codeNoSuchKey || code == codeNotFound || (code == "" && status == http.StatusNotFound):
		return fmt.Errorf("%w: %w", objects.ErrNotFound, err)
	case code == codePreconditionFailed || code == codeConflict || status == http.StatusPreconditionFailed:
		// Only conditional writes (If-None-Match: *) can fail this way.
		return fmt.Errorf("%w: %w", objects.ErrExists, err)
	case code == codeInvalidRange || status == http.StatusRequestedRangeNotSatisfiable:
		return fmt.Errorf("%w: %w", objects.ErrInvalidRange, err)
	}
	return err
}

// isConflict: a concurrent conditional write to the same key was in flight
// (AWS answers 409 ConditionalRequestConflict); retrying settles it.
func isConflict(err error) bool {
	return errorCode(err) == codeConflict
}

func isInvalidRange(err error) bool {
	return errorCode(err) == codeInvalidRange || httpStatus(err) == http.StatusRequestedRangeNotSatisfiable
}

// fail is the error a Store method returns: mapped, wrapped with the
// operation and key, and matching ctx's error when ctx ended, whatever
// the SDK made of the cancellation.
func fail(ctx context.Context, op, key string, err error) error {
	err = mapErr(err)
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	if key == "" {
		return fmt.Errorf("s3: %s: %w", op, err)
	}
	return fmt.Errorf("s3: %s %s: %w", op, key, err)
}
