package wire

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// ErrorDomain is the domain of the google.rpc.ErrorInfo that every lake
// status carries.
const ErrorDomain = "lake"

// ErrorEntry is one row of the error table: a sentinel, the gRPC code a
// service answers it with, and the reason its status carries in a
// google.rpc.ErrorInfo (AIP-193). Reasons are stable: clients in any
// language match on them, never on the message.
type ErrorEntry struct {
	Err    error
	Code   codes.Code
	Reason string
}

// errorTable is the one place lake maps errors to gRPC codes and reasons
// (DESIGN §4). An error takes the first row whose sentinel it wraps, so a
// row that should win over another for an error wrapping both comes
// first.
var errorTable = []ErrorEntry{
	// InvalidArgument. ErrNotReadOnly before ErrUnknownCommand: a Flight
	// SQL DoPut (an update, an ingest) on the query endpoint is both.
	{ErrNotReadOnly, codes.InvalidArgument, "NOT_READ_ONLY"},
	{ErrMalformedCommand, codes.InvalidArgument, "MALFORMED_COMMAND"},
	{ErrUnknownCommand, codes.InvalidArgument, "UNKNOWN_COMMAND"},
	{ErrInvalidTable, codes.InvalidArgument, "INVALID_TABLE_NAME"},
	{ErrInvalidCommitID, codes.InvalidArgument, "INVALID_COMMIT_ID"},
	{ErrInvalidKey, codes.InvalidArgument, "INVALID_KEY"},
	{ErrInvalidFileValue, codes.InvalidArgument, "INVALID_FILE_VALUE"},
	{ErrSchemaMismatch, codes.InvalidArgument, "SCHEMA_MISMATCH"},
	{ErrInvalidSchema, codes.InvalidArgument, "INVALID_SCHEMA"},
	{ErrEmptyAppend, codes.InvalidArgument, "EMPTY_APPEND"},
	{ErrInvalidRequest, codes.InvalidArgument, "INVALID_REQUEST"},
	{ErrSQLNotAllowed, codes.InvalidArgument, "SQL_NOT_ALLOWED"},
	{ErrInvalidSQL, codes.InvalidArgument, "INVALID_SQL"},
	{ErrUnsupported, codes.InvalidArgument, "UNSUPPORTED"},
	{ErrTimestampInFuture, codes.InvalidArgument, "TIMESTAMP_IN_FUTURE"},

	{ErrTableNotFound, codes.NotFound, "TABLE_NOT_FOUND"},
	{ErrVersionNotFound, codes.NotFound, "VERSION_NOT_FOUND"},
	{ErrRowNotFound, codes.NotFound, "ROW_NOT_FOUND"},
	{ErrUploadNotFound, codes.NotFound, "UPLOAD_NOT_FOUND"},

	{ErrTableExists, codes.AlreadyExists, "TABLE_EXISTS"},

	{ErrObjectMissing, codes.FailedPrecondition, "OBJECT_MISSING"},
	{ErrSizeMismatch, codes.FailedPrecondition, "SIZE_MISMATCH"},
	{ErrNotRegular, codes.FailedPrecondition, "OBJECT_NOT_REGULAR"},
	{ErrVersionExpired, codes.FailedPrecondition, "VERSION_EXPIRED"},
	{ErrKeyNotFound, codes.FailedPrecondition, "KEY_NOT_FOUND"},
	{ErrUploadIncomplete, codes.FailedPrecondition, "UPLOAD_INCOMPLETE"},
	{ErrChecksumMismatch, codes.FailedPrecondition, "CHECKSUM_MISMATCH"},

	{ErrVersionConflict, codes.Aborted, "VERSION_CONFLICT"},

	// ErrClosed before ErrNotLeader: a node that is shutting down answers
	// "not the leader because closed", and says the more precise one.
	{ErrClosed, codes.Unavailable, "SERVICE_CLOSED"},
	{ErrNotLeader, codes.Unavailable, "NOT_LEADER"},

	{ErrRelayFull, codes.ResourceExhausted, "RELAY_FULL"},
	{ErrMemoryExhausted, codes.ResourceExhausted, "MEMORY_EXHAUSTED"},
	{ErrResourceExhausted, codes.ResourceExhausted, "RESOURCE_EXHAUSTED"},

	{ErrUnauthenticated, codes.Unauthenticated, "UNAUTHENTICATED"},
	{ErrPermissionDenied, codes.PermissionDenied, "PERMISSION_DENIED"},

	// Last: an error that names a lake sentinel and a context error
	// says more with the sentinel.
	{context.Canceled, codes.Canceled, "CANCELED"},
	{context.DeadlineExceeded, codes.DeadlineExceeded, "DEADLINE_EXCEEDED"},
}

// byCodeAlone is what a status without a lake reason means when its code
// has one meaning whoever made it: gRPC itself reports a cancelled call,
// a passed deadline and refused credentials with these, and no lake
// reason. Every other code needs the reason: an Unavailable without one
// is a connection refused, not ErrNotLeader.
var byCodeAlone = map[codes.Code]error{
	codes.Canceled:         context.Canceled,
	codes.DeadlineExceeded: context.DeadlineExceeded,
	codes.Unauthenticated:  ErrUnauthenticated,
}

// ErrorTable returns a copy of the error table, in matching order.
func ErrorTable() []ErrorEntry { return append([]ErrorEntry(nil), errorTable...) }

// ToStatus turns err into the gRPC status error a service returns: the
// code of the first table row whose sentinel err wraps, err's message, and
// a google.rpc.ErrorInfo{reason, domain: "lake"} in the details. An error
// that already is or wraps a status (an answer relayed from another
// service) keeps its code and details. Anything else is Internal, without
// a reason.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok {
		return st.Err()
	}
	for _, e := range errorTable {
		if errors.Is(err, e.Err) {
			return withReason(status.New(e.Code, err.Error()), e.Reason).Err()
		}
	}
	return status.Error(codes.Internal, err.Error())
}

func withReason(st *status.Status, reason string) *status.Status {
	withInfo, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain})
	if err != nil { // only for code OK, which the table never holds
		return st
	}
	return withInfo
}

// FromStatus turns an error a lake service returned into a *StatusError:
// errors.Is matches the sentinel its reason names, status.Code still sees
// the code, and the message is the server's. A status without a lake
// reason matches no sentinel, except for the codes gRPC itself uses with
// one meaning (Canceled, DeadlineExceeded, Unauthenticated). An error
// that wraps a status becomes a *StatusError of that status, its message
// err's whole text (as status.FromError has it). An error that carries no
// status, or already holds a *StatusError, is returned as it is.
func FromStatus(err error) error {
	if err == nil {
		return nil
	}
	var se *StatusError
	if errors.As(err, &se) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok || st.Code() == codes.OK {
		return err
	}
	e := &StatusError{status: st, reason: Reason(st)}
	if e.reason != "" {
		e.sentinel = sentinel(e.reason)
	}
	if e.sentinel == nil {
		e.sentinel = byCodeAlone[st.Code()]
	}
	return e
}

var errorInfoName = (&errdetails.ErrorInfo{}).ProtoReflect().Descriptor().FullName()

// Reason is the reason of the first lake ErrorInfo in st's details, or ""
// when it has none. Details that do not decode are skipped.
func Reason(st *status.Status) string {
	for _, a := range st.Proto().GetDetails() {
		if a.MessageName() != errorInfoName {
			continue
		}
		var info errdetails.ErrorInfo
		if err := proto.Unmarshal(a.GetValue(), &info); err != nil {
			continue
		}
		if info.GetDomain() == ErrorDomain && info.GetReason() != "" {
			return info.GetReason()
		}
	}
	return ""
}

// sentinel is the sentinel of reason, nil for a reason this build does
// not know (a newer server's).
func sentinel(reason string) error {
	for _, e := range errorTable {
		if e.Reason == reason {
			return e.Err
		}
	}
	return nil
}

// StatusError is an error a lake service returned, as FromStatus makes
// it. Its message is the server's; errors.Is matches the sentinel the
// server reported, and status.FromError and status.Code still see the
// gRPC status with its details.
type StatusError struct {
	status   *status.Status
	reason   string
	sentinel error // nil when the status names none
}

func (e *StatusError) Error() string {
	if msg := e.status.Message(); msg != "" {
		return msg
	}
	return e.status.Code().String()
}

// Unwrap is the sentinel the status names, or nil.
func (e *StatusError) Unwrap() error { return e.sentinel }

// GRPCStatus lets status.FromError and status.Code see through the wrap.
func (e *StatusError) GRPCStatus() *status.Status { return e.status }

// Code is the gRPC status code.
func (e *StatusError) Code() codes.Code { return e.status.Code() }

// Reason is the status's lake reason (TABLE_NOT_FOUND, …), "" when it has
// none.
func (e *StatusError) Reason() string { return e.reason }
