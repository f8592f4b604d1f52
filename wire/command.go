package wire

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/lakedata/lake/wire/lakepb"
)

// AppendTypeURL is the Any type URL of the FILE-append command.
const AppendTypeURL = "type.googleapis.com/lake.file.Append"

// MaxCommitIDLen bounds Append.commit_id (DESIGN §4).
const MaxCommitIDLen = 128

// EncodeAppend validates a and returns the descriptor command bytes:
// a serialized google.protobuf.Any wrapping a.
func EncodeAppend(a *lakepb.Append) ([]byte, error) {
	if err := ValidateAppend(a); err != nil {
		return nil, err
	}
	anyMsg, err := anypb.New(a)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedCommand, err)
	}
	return proto.Marshal(anyMsg)
}

// AppendDescriptor returns the FlightDescriptor that starts a FILE-append
// DoPut stream.
func AppendDescriptor(a *lakepb.Append) (*flight.FlightDescriptor, error) {
	cmd, err := EncodeAppend(a)
	if err != nil {
		return nil, err
	}
	return &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmd}, nil
}

// DecodeAppendDescriptor decodes the descriptor of a DoPut stream. A
// missing or non-CMD descriptor, bytes that are not an Any, an Any of
// another type (Flight SQL's own commands included) and an invalid Append
// are each rejected with a wrapped sentinel.
func DecodeAppendDescriptor(d *flight.FlightDescriptor) (*lakepb.Append, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: the first message carries no flight descriptor", ErrMalformedCommand)
	}
	if d.Type != flight.DescriptorCMD {
		return nil, fmt.Errorf("%w: descriptor type %s, want CMD", ErrMalformedCommand, d.Type)
	}
	return DecodeAppend(d.Cmd)
}

// DecodeAppend decodes the command bytes of a FILE-append descriptor.
func DecodeAppend(cmd []byte) (*lakepb.Append, error) {
	if len(cmd) == 0 {
		return nil, fmt.Errorf("%w: empty command", ErrMalformedCommand)
	}
	var anyMsg anypb.Any
	if err := proto.Unmarshal(cmd, &anyMsg); err != nil {
		return nil, fmt.Errorf("%w: not a google.protobuf.Any: %v", ErrMalformedCommand, err)
	}
	if anyMsg.TypeUrl == "" {
		return nil, fmt.Errorf("%w: Any without a type URL", ErrMalformedCommand)
	}
	if anyMsg.TypeUrl != AppendTypeURL {
		return nil, fmt.Errorf("%w: %q (want %q)", ErrUnknownCommand, clip(anyMsg.TypeUrl, 200), AppendTypeURL)
	}
	var a lakepb.Append
	if err := proto.Unmarshal(anyMsg.Value, &a); err != nil {
		return nil, fmt.Errorf("%w: bad lake.file.Append: %v", ErrMalformedCommand, err)
	}
	if err := checkKnownFieldTypes(&a); err != nil {
		return nil, err
	}
	if err := ValidateAppend(&a); err != nil {
		return nil, err
	}
	return &a, nil
}

// checkKnownFieldTypes rejects an Append carrying one of its own field
// numbers with the wrong wire type. protobuf keeps such a field as an
// unknown field instead of failing, so a client that encoded
// expected_version as, say, fixed64 would otherwise get an unconditional
// commit. Unknown field numbers stay allowed (newer clients).
func checkKnownFieldTypes(a *lakepb.Append) error {
	fields := a.ProtoReflect().Descriptor().Fields()
	b := a.ProtoReflect().GetUnknown()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: bad lake.file.Append: %v", ErrMalformedCommand, protowire.ParseError(n))
		}
		if f := fields.ByNumber(num); f != nil {
			return fmt.Errorf("%w: lake.file.Append field %s has wire type %d", ErrMalformedCommand, f.Name(), typ)
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return fmt.Errorf("%w: bad lake.file.Append: %v", ErrMalformedCommand, protowire.ParseError(m))
		}
		b = b[n+m:]
	}
	return nil
}

// ValidateAppend checks the fields of an Append command.
func ValidateAppend(a *lakepb.Append) error {
	if a == nil {
		return fmt.Errorf("%w: nil append", ErrMalformedCommand)
	}
	if err := ValidateTableName(a.GetTable()); err != nil {
		return err
	}
	if len(a.GetCommitId()) > MaxCommitIDLen {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidCommitID, len(a.GetCommitId()), MaxCommitIDLen)
	}
	if a.ExpectedVersion != nil && a.GetExpectedVersion() < 0 {
		return fmt.Errorf("%w: expected_version %d is negative", ErrMalformedCommand, a.GetExpectedVersion())
	}
	return nil
}

// EncodeAppendResult serializes r for PutResult.app_metadata.
func EncodeAppendResult(r *lakepb.AppendResult) ([]byte, error) {
	return proto.Marshal(r)
}

// DecodeAppendResult decodes PutResult.app_metadata.
func DecodeAppendResult(b []byte) (*lakepb.AppendResult, error) {
	var r lakepb.AppendResult
	if err := proto.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%w: bad lake.file.AppendResult: %v", ErrMalformedCommand, err)
	}
	return &r, nil
}

// clip keeps attacker-controlled strings in error messages short.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
