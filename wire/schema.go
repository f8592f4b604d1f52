package wire

import (
	"bytes"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// DefaultSchema is the schema of `lake table create T` without --schema:
// name utf8, file FILE, created_at timestamp(us, UTC) (DESIGN §4).
func DefaultSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		FileField("file", true),
		{Name: "created_at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	}, nil)
}

// MaxColumns bounds the width of a table.
const MaxColumns = 1024

// ValidateSchema checks a table schema: at least one column, unique
// non-empty column names and correctly typed FILE columns.
func ValidateSchema(s *arrow.Schema) error {
	if s == nil || s.NumFields() == 0 {
		return fmt.Errorf("%w: a table needs at least one column", ErrInvalidSchema)
	}
	if s.NumFields() > MaxColumns {
		return fmt.Errorf("%w: %d columns, at most %d", ErrInvalidSchema, s.NumFields(), MaxColumns)
	}
	seen := make(map[string]bool, s.NumFields())
	for _, f := range s.Fields() {
		if f.Name == "" {
			return fmt.Errorf("%w: a column has an empty name", ErrInvalidSchema)
		}
		if seen[f.Name] {
			return fmt.Errorf("%w: column %q appears twice", ErrInvalidSchema, clip(f.Name, 80))
		}
		seen[f.Name] = true
		if err := ValidateFileField(f); err != nil {
			return err
		}
	}
	return nil
}

// CheckAppendSchema checks that the schema of an append stream matches the
// table: the same column names in the same order with identical types.
// The top-level nullability flags and metadata of the incoming schema are
// not compared (a client may omit the lake.type marker); the values are
// checked instead. Nested types compare exactly, nullability included: the
// FILE struct is a contract (DESIGN §4), key, size and sha256 are non-null.
func CheckAppendSchema(table, incoming *arrow.Schema) error {
	if incoming.NumFields() != table.NumFields() {
		return fmt.Errorf("%w: %d columns, the table has %d (%s)", ErrSchemaMismatch,
			incoming.NumFields(), table.NumFields(), columnList(table))
	}
	for i, want := range table.Fields() {
		got := incoming.Field(i)
		if got.Name != want.Name {
			return fmt.Errorf("%w: column %d is %q, the table has %q", ErrSchemaMismatch, i, clip(got.Name, 80), want.Name)
		}
		if !arrow.TypeEqual(got.Type, want.Type) {
			return fmt.Errorf("%w: column %q has type %s, the table has %s", ErrSchemaMismatch, want.Name, got.Type, want.Type)
		}
	}
	return nil
}

func columnList(s *arrow.Schema) string {
	var b bytes.Buffer
	for i, f := range s.Fields() {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s", f.Name, f.Type)
	}
	return b.String()
}

// EncodeSchema serializes a schema as an IPC schema message.
func EncodeSchema(s *arrow.Schema) []byte {
	return flight.SerializeSchema(s, memory.DefaultAllocator)
}

// DecodeSchema parses an IPC-serialized schema. It is safe on untrusted
// bytes: allocations stay proportional to len(b) and corrupt input is
// rejected with ErrInvalidSchema.
func DecodeSchema(b []byte) (s *arrow.Schema, err error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty schema bytes", ErrInvalidSchema)
	}
	// The arrow reader trusts lengths and offsets inside the message; vet
	// them first (see checkSchemaMessage) and cap what it may allocate.
	if err := checkSchemaMessage(b); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	defer func() {
		// The IPC reader can panic on some corrupt flatbuffers.
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("%w: corrupt schema message", ErrInvalidSchema)
		}
	}()
	limit := int64(len(b))
	msgs := ipc.NewMessageReader(bytes.NewReader(b),
		ipc.WithAllocator(memory.DefaultAllocator),
		ipc.WithMetadataSizeLimit(limit),
		ipc.WithBodySizeLimit(limit))
	rdr, err := ipc.NewReaderFromMessageReader(msgs, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	defer rdr.Release()
	return rdr.Schema(), nil
}
