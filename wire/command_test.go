package wire

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	flightpb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/lakedata/lake/wire/lakepb"
)

func TestFileAppendRequestRoundtrip(t *testing.T) {
	tests := []struct {
		name string
		in   *lakepb.Append
	}{
		{"table only", &lakepb.Append{Table: "videos"}},
		{"with commit id", &lakepb.Append{Table: "videos", CommitId: "upload-7f3a"}},
		{"commit id of max length", &lakepb.Append{Table: "t", CommitId: strings.Repeat("c", MaxCommitIDLen)}},
		{"commit id not ascii", &lakepb.Append{Table: "t", CommitId: "prüfung-✓"}},
		{"expected version 0", &lakepb.Append{Table: "videos", ExpectedVersion: proto.Int64(0)}},
		{"expected version > 0", &lakepb.Append{Table: "videos", ExpectedVersion: proto.Int64(42)}},
		{"expected version max", &lakepb.Append{Table: "videos", ExpectedVersion: proto.Int64(1<<63 - 1)}},
		{"everything", &lakepb.Append{Table: "model_weights_2", CommitId: "c1", ExpectedVersion: proto.Int64(7)}},
		{"underscore table", &lakepb.Append{Table: "_"}},
		{"longest table name", &lakepb.Append{Table: strings.Repeat("a", MaxTableNameLen)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := AppendDescriptor(tt.in)
			if err != nil {
				t.Fatalf("AppendDescriptor: %v", err)
			}
			if d.Type != flight.DescriptorCMD || len(d.Path) != 0 {
				t.Fatalf("descriptor type %v path %v, want CMD without path", d.Type, d.Path)
			}
			cmd, err := EncodeAppend(tt.in)
			if err != nil {
				t.Fatalf("EncodeAppend: %v", err)
			}
			if !proto.Equal(mustUnmarshalAny(t, cmd), mustUnmarshalAny(t, d.Cmd)) {
				t.Fatal("EncodeAppend and AppendDescriptor disagree")
			}

			// What a third-party client sees: an Any with the exact type URL.
			anyMsg := mustUnmarshalAny(t, d.Cmd)
			if anyMsg.GetTypeUrl() != "type.googleapis.com/lake.file.Append" {
				t.Fatalf("type_url %q", anyMsg.GetTypeUrl())
			}
			var inner lakepb.Append
			if err := anyMsg.UnmarshalTo(&inner); err != nil {
				t.Fatalf("Any.UnmarshalTo: %v", err)
			}
			if !proto.Equal(&inner, tt.in) {
				t.Fatalf("Any payload %v, want %v", &inner, tt.in)
			}

			got, err := DecodeAppendDescriptor(d)
			if err != nil {
				t.Fatalf("DecodeAppendDescriptor: %v", err)
			}
			if !proto.Equal(got, tt.in) {
				t.Fatalf("DecodeAppendDescriptor = %v, want %v", got, tt.in)
			}
			got, err = DecodeAppend(cmd)
			if err != nil {
				t.Fatalf("DecodeAppend: %v", err)
			}
			if !proto.Equal(got, tt.in) {
				t.Fatalf("DecodeAppend = %v, want %v", got, tt.in)
			}
			// Presence of expected_version is part of the contract: 0 means
			// "the table must be at version 0", absent means "any version".
			if (got.ExpectedVersion == nil) != (tt.in.ExpectedVersion == nil) {
				t.Fatalf("expected_version presence lost: got %v, want %v", got.ExpectedVersion, tt.in.ExpectedVersion)
			}
		})
	}

	t.Run("AppendResult", func(t *testing.T) {
		for _, r := range []*lakepb.AppendResult{
			{},
			{Table: "videos", Version: 1, Rows: 1},
			{Table: "videos", Version: 12, Rows: 3, Duplicate: true},
			{Table: "t", Version: 1<<63 - 1, Rows: 1<<63 - 1},
		} {
			b, err := EncodeAppendResult(r)
			if err != nil {
				t.Fatalf("EncodeAppendResult(%v): %v", r, err)
			}
			got, err := DecodeAppendResult(b)
			if err != nil {
				t.Fatalf("DecodeAppendResult(%v): %v", r, err)
			}
			if !proto.Equal(got, r) {
				t.Fatalf("roundtrip %v, want %v", got, r)
			}
			// Serialized as is, not wrapped in an Any.
			var direct lakepb.AppendResult
			if err := proto.Unmarshal(b, &direct); err != nil || !proto.Equal(&direct, r) {
				t.Fatalf("app_metadata is not a bare AppendResult: %v, %v", &direct, err)
			}
		}
		if _, err := DecodeAppendResult([]byte{0x0a, 0x05, 'a'}); !errors.Is(err, ErrMalformedCommand) {
			t.Fatalf("DecodeAppendResult(truncated) error %v, want ErrMalformedCommand", err)
		}
	})
}

func mustUnmarshalAny(t *testing.T, b []byte) *anypb.Any {
	t.Helper()
	var a anypb.Any
	if err := proto.Unmarshal(b, &a); err != nil {
		t.Fatalf("not a google.protobuf.Any: %v", err)
	}
	return &a
}

// TestAppendHandBuiltWire encodes the descriptor with nothing but the field
// numbers of DESIGN §4, as a client in another language would, and checks
// lake decodes it.
func TestAppendHandBuiltWire(t *testing.T) {
	var inner []byte
	inner = protowire.AppendTag(inner, 1, protowire.BytesType)
	inner = protowire.AppendString(inner, "videos")
	inner = protowire.AppendTag(inner, 2, protowire.BytesType)
	inner = protowire.AppendString(inner, "job-1")
	inner = protowire.AppendTag(inner, 3, protowire.VarintType)
	inner = protowire.AppendVarint(inner, 0)
	var cmd []byte
	cmd = protowire.AppendTag(cmd, 1, protowire.BytesType)
	cmd = protowire.AppendString(cmd, "type.googleapis.com/lake.file.Append")
	cmd = protowire.AppendTag(cmd, 2, protowire.BytesType)
	cmd = protowire.AppendBytes(cmd, inner)

	got, err := DecodeAppend(cmd)
	if err != nil {
		t.Fatalf("DecodeAppend: %v", err)
	}
	want := &lakepb.Append{Table: "videos", CommitId: "job-1", ExpectedVersion: proto.Int64(0)}
	if !proto.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}

	// And the result the other way round: field 1 table, 2 version, 3 rows,
	// 4 duplicate.
	b, err := EncodeAppendResult(&lakepb.AppendResult{Table: "videos", Version: 3, Rows: 2, Duplicate: true})
	if err != nil {
		t.Fatal(err)
	}
	var want2 []byte
	want2 = protowire.AppendTag(want2, 1, protowire.BytesType)
	want2 = protowire.AppendString(want2, "videos")
	want2 = protowire.AppendTag(want2, 2, protowire.VarintType)
	want2 = protowire.AppendVarint(want2, 3)
	want2 = protowire.AppendTag(want2, 3, protowire.VarintType)
	want2 = protowire.AppendVarint(want2, 2)
	want2 = protowire.AppendTag(want2, 4, protowire.VarintType)
	want2 = protowire.AppendVarint(want2, 1)
	if string(b) != string(want2) {
		t.Fatalf("AppendResult bytes %x, want %x", b, want2)
	}
}

// TestProtoContract pins the message and field names, numbers and kinds of
// DESIGN §4 so a regenerated lakepb cannot drift from the contract.
func TestProtoContract(t *testing.T) {
	type field struct {
		num      protowire.Number
		name     string
		kind     protoreflect.Kind
		presence bool
	}
	check := func(m protoreflect.MessageDescriptor, fullName string, want []field) {
		t.Helper()
		if m.FullName() != protoreflect.FullName(fullName) {
			t.Errorf("message %s, want %s", m.FullName(), fullName)
		}
		if m.Fields().Len() != len(want) {
			t.Errorf("%s has %d fields, want %d", fullName, m.Fields().Len(), len(want))
		}
		for _, w := range want {
			f := m.Fields().ByNumber(w.num)
			if f == nil {
				t.Errorf("%s: no field %d", fullName, w.num)
				continue
			}
			if string(f.Name()) != w.name || f.Kind() != w.kind || f.HasPresence() != w.presence || f.Cardinality() == protoreflect.Repeated {
				t.Errorf("%s field %d: %s %v presence=%v, want %s %v presence=%v", fullName, w.num, f.Name(), f.Kind(), f.HasPresence(), w.name, w.kind, w.presence)
			}
		}
	}
	check((&lakepb.Append{}).ProtoReflect().Descriptor(), "lake.file.Append", []field{
		{1, "table", protoreflect.StringKind, false},
		{2, "commit_id", protoreflect.StringKind, false},
		{3, "expected_version", protoreflect.Int64Kind, true},
	})
	check((&lakepb.AppendResult{}).ProtoReflect().Descriptor(), "lake.file.AppendResult", []field{
		{1, "table", protoreflect.StringKind, false},
		{2, "version", protoreflect.Int64Kind, false},
		{3, "rows", protoreflect.Int64Kind, false},
		{4, "duplicate", protoreflect.BoolKind, false},
	})
	if AppendTypeURL != "type.googleapis.com/"+string((&lakepb.Append{}).ProtoReflect().Descriptor().FullName()) {
		t.Errorf("AppendTypeURL %q does not name lake.file.Append", AppendTypeURL)
	}
}

func mustAny(t testing.TB, m proto.Message) []byte {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustMarshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// flightSQLCommands are Flight SQL's own DoPut/DoGet commands, each wrapped
// in an Any as a Flight SQL client sends them.
func flightSQLCommands(t testing.TB) map[string][]byte {
	return map[string][]byte{
		"CommandStatementQuery":  mustAny(t, &flightpb.CommandStatementQuery{Query: "SELECT * FROM videos"}),
		"CommandStatementUpdate": mustAny(t, &flightpb.CommandStatementUpdate{Query: "DELETE FROM videos"}),
		"CommandStatementIngest": mustAny(t, &flightpb.CommandStatementIngest{
			Table: "videos",
			TableDefinitionOptions: &flightpb.CommandStatementIngest_TableDefinitionOptions{
				IfNotExist: flightpb.CommandStatementIngest_TableDefinitionOptions_TABLE_NOT_EXIST_OPTION_CREATE,
				IfExists:   flightpb.CommandStatementIngest_TableDefinitionOptions_TABLE_EXISTS_OPTION_APPEND,
			},
		}),
		"CommandPreparedStatementQuery":  mustAny(t, &flightpb.CommandPreparedStatementQuery{PreparedStatementHandle: []byte("handle-1")}),
		"CommandPreparedStatementUpdate": mustAny(t, &flightpb.CommandPreparedStatementUpdate{PreparedStatementHandle: []byte("handle-2")}),
	}
}

func TestFlightSQLCommandsAreUnknown(t *testing.T) {
	for name, cmd := range flightSQLCommands(t) {
		t.Run(name, func(t *testing.T) {
			// The premise: this really is what Flight SQL puts on the wire.
			if url := mustUnmarshalAny(t, cmd).GetTypeUrl(); url != "type.googleapis.com/arrow.flight.protocol.sql."+name {
				t.Fatalf("type_url %q", url)
			}
			_, err := DecodeAppend(cmd)
			if !errors.Is(err, ErrUnknownCommand) {
				t.Fatalf("DecodeAppend error %v, want ErrUnknownCommand", err)
			}
			_, err = DecodeAppendDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmd})
			if !errors.Is(err, ErrUnknownCommand) {
				t.Fatalf("DecodeAppendDescriptor error %v, want ErrUnknownCommand", err)
			}
		})
	}
}

func TestDecodeAppendRejects(t *testing.T) {
	valid := &lakepb.Append{Table: "videos", CommitId: "c", ExpectedVersion: proto.Int64(3)}
	anyOf := func(url string, value []byte) []byte {
		return mustMarshal(t, &anypb.Any{TypeUrl: url, Value: value})
	}
	appendAny := func(a *lakepb.Append) []byte { return anyOf(AppendTypeURL, mustMarshal(t, a)) }

	tests := []struct {
		name string
		cmd  []byte
		want error
	}{
		{"nil cmd", nil, ErrMalformedCommand},
		{"empty cmd", []byte{}, ErrMalformedCommand},
		{"garbage 0xff", []byte{0xff, 0xff, 0xff, 0xff}, ErrMalformedCommand},
		{"garbage truncated length", []byte{0x0a, 0x05, 'a'}, ErrMalformedCommand},
		{"garbage text", []byte("SELECT 1 FROM videos;"), ErrMalformedCommand},
		{"garbage end group", []byte{0x0c}, ErrMalformedCommand},
		{"type url not utf8", anyOfRaw(1, []byte{0xff, 0xfe}), ErrMalformedCommand},
		{"Any with empty type url", anyOf("", mustMarshal(t, valid)), ErrMalformedCommand},
		{"Any with only unknown fields", []byte{0x18, 0x01}, ErrMalformedCommand},
		{"Any with right url, garbage value", anyOf(AppendTypeURL, []byte{0xff, 0xff}), ErrMalformedCommand},
		{"Any with right url, table not utf8", anyOf(AppendTypeURL, anyOfRaw(1, []byte{'a', 0xff})), ErrMalformedCommand},
		// protobuf keeps a known field number with the wrong wire type as
		// an unknown field; for expected_version that would silently turn
		// a conditional commit into an unconditional one.
		{"expected_version as bytes", anyOf(AppendTypeURL, append(anyOfRaw(1, []byte("t")), anyOfRaw(3, []byte("7"))...)), ErrMalformedCommand},
		{"expected_version as fixed64", anyOf(AppendTypeURL, protowire.AppendFixed64(protowire.AppendTag(anyOfRaw(1, []byte("t")), 3, protowire.Fixed64Type), 7)), ErrMalformedCommand},
		{"table as varint", anyOf(AppendTypeURL, protowire.AppendVarint(protowire.AppendTag(anyOfRaw(1, []byte("t")), 1, protowire.VarintType), 1)), ErrMalformedCommand},
		{"Any with right url, empty value", anyOf(AppendTypeURL, nil), ErrInvalidTable},

		// A bare Append (not wrapped in Any) parses as an Any — fields 1 and
		// 2 are strings/bytes in both — so its table becomes the type URL
		// and its commit_id the value. A valid table name never contains
		// '/' or '.', so it can never be the Append type URL: the command
		// is rejected as unknown. Without a table the type URL is empty.
		{"raw Append", mustMarshal(t, &lakepb.Append{Table: "videos"}), ErrUnknownCommand},
		{"raw Append with all fields", mustMarshal(t, valid), ErrUnknownCommand},
		{"raw Append without table", mustMarshal(t, &lakepb.Append{CommitId: "c", ExpectedVersion: proto.Int64(1)}), ErrMalformedCommand},
		{"raw AppendResult", mustMarshal(t, &lakepb.AppendResult{Table: "videos", Version: 1}), ErrUnknownCommand},

		{"empty table", appendAny(&lakepb.Append{}), ErrInvalidTable},
		{"uppercase table", appendAny(&lakepb.Append{Table: "Videos"}), ErrInvalidTable},
		{"leading digit", appendAny(&lakepb.Append{Table: "1videos"}), ErrInvalidTable},
		{"table too long", appendAny(&lakepb.Append{Table: strings.Repeat("a", MaxTableNameLen+1)}), ErrInvalidTable},
		{"table with space", appendAny(&lakepb.Append{Table: "my videos"}), ErrInvalidTable},
		{"table with dash", appendAny(&lakepb.Append{Table: "a-b"}), ErrInvalidTable},
		{"table with dot", appendAny(&lakepb.Append{Table: "main.videos"}), ErrInvalidTable},
		{"table quoted", appendAny(&lakepb.Append{Table: `"videos"`}), ErrInvalidTable},
		{"table not ascii", appendAny(&lakepb.Append{Table: "vidéos"}), ErrInvalidTable},
		{"table with NUL", appendAny(&lakepb.Append{Table: "a\x00"}), ErrInvalidTable},
		{"commit id too long", appendAny(&lakepb.Append{Table: "t", CommitId: strings.Repeat("c", MaxCommitIDLen+1)}), ErrInvalidCommitID},
		{"commit id too long in bytes", appendAny(&lakepb.Append{Table: "t", CommitId: strings.Repeat("é", MaxCommitIDLen/2+1)}), ErrInvalidCommitID},
		{"negative expected version", appendAny(&lakepb.Append{Table: "t", ExpectedVersion: proto.Int64(-1)}), ErrMalformedCommand},
		{"min int64 expected version", appendAny(&lakepb.Append{Table: "t", ExpectedVersion: proto.Int64(-1 << 63)}), ErrMalformedCommand},

		{"AppendResult type url", anyOf("type.googleapis.com/lake.file.AppendResult", mustMarshal(t, valid)), ErrUnknownCommand},
		{"type url without host", anyOf("lake.file.Append", mustMarshal(t, valid)), ErrUnknownCommand},
		{"type url other host", anyOf("example.com/lake.file.Append", mustMarshal(t, valid)), ErrUnknownCommand},
		{"type url other case", anyOf("type.googleapis.com/Lake.File.Append", mustMarshal(t, valid)), ErrUnknownCommand},
		{"type url trailing space", anyOf(AppendTypeURL+" ", mustMarshal(t, valid)), ErrUnknownCommand},
		{"type url huge", anyOf(strings.Repeat("x", 1<<16), mustMarshal(t, valid)), ErrUnknownCommand},
		{"Any of an Any", anyOf("type.googleapis.com/google.protobuf.Any", appendAny(valid)), ErrUnknownCommand},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeAppend(tt.cmd)
			if !errors.Is(err, tt.want) {
				t.Fatalf("DecodeAppend = %v, %v; want error %v", got, err, tt.want)
			}
			if got != nil {
				t.Fatalf("DecodeAppend returned %v with an error", got)
			}
			if n := len(err.Error()); n > 600 {
				t.Fatalf("error message of %d bytes; attacker input must be clipped", n)
			}
			_, err = DecodeAppendDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: tt.cmd})
			if !errors.Is(err, tt.want) {
				t.Fatalf("DecodeAppendDescriptor error %v, want %v", err, tt.want)
			}
		})
	}
}

// anyOfRaw encodes a single length-delimited field, for hand-made invalid
// messages.
func anyOfRaw(num protowire.Number, v []byte) []byte {
	b := protowire.AppendTag(nil, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func TestDecodeAppendDescriptorRejects(t *testing.T) {
	cmd, err := EncodeAppend(&lakepb.Append{Table: "videos"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		d    *flight.FlightDescriptor
		want error
	}{
		{"nil descriptor", nil, ErrMalformedCommand},
		{"PATH descriptor", &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"videos"}}, ErrMalformedCommand},
		{"PATH descriptor carrying a valid cmd", &flight.FlightDescriptor{Type: flight.DescriptorPATH, Cmd: cmd}, ErrMalformedCommand},
		{"UNKNOWN descriptor type", &flight.FlightDescriptor{Type: flight.DescriptorUNKNOWN, Cmd: cmd}, ErrMalformedCommand},
		{"out of range descriptor type", &flight.FlightDescriptor{Type: 7, Cmd: cmd}, ErrMalformedCommand},
		{"CMD without cmd", &flight.FlightDescriptor{Type: flight.DescriptorCMD}, ErrMalformedCommand},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeAppendDescriptor(tt.d)
			if !errors.Is(err, tt.want) || got != nil {
				t.Fatalf("DecodeAppendDescriptor = %v, %v; want error %v", got, err, tt.want)
			}
		})
	}
}

func TestEncodeAppendRejects(t *testing.T) {
	tests := []struct {
		name string
		in   *lakepb.Append
		want error
	}{
		{"nil", nil, ErrMalformedCommand},
		{"empty table", &lakepb.Append{}, ErrInvalidTable},
		{"bad table", &lakepb.Append{Table: "a-b"}, ErrInvalidTable},
		{"commit id too long", &lakepb.Append{Table: "t", CommitId: strings.Repeat("x", MaxCommitIDLen+1)}, ErrInvalidCommitID},
		{"negative expected version", &lakepb.Append{Table: "t", ExpectedVersion: proto.Int64(-5)}, ErrMalformedCommand},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := ValidateAppend(tt.in); !errors.Is(err, tt.want) {
				t.Errorf("ValidateAppend error %v, want %v", err, tt.want)
			}
			if b, err := EncodeAppend(tt.in); !errors.Is(err, tt.want) || b != nil {
				t.Errorf("EncodeAppend = %x, %v; want error %v", b, err, tt.want)
			}
			if d, err := AppendDescriptor(tt.in); !errors.Is(err, tt.want) || d != nil {
				t.Errorf("AppendDescriptor = %v, %v; want error %v", d, err, tt.want)
			}
		})
	}
}

// TestDecodeAppendKeepsUnknownFields: a newer client may send fields this
// version does not know; they are ignored, not an error, and survive a
// relay (query → meta) unchanged.
func TestDecodeAppendKeepsUnknownFields(t *testing.T) {
	inner := mustMarshal(t, &lakepb.Append{Table: "videos"})
	inner = protowire.AppendTag(inner, 9, protowire.VarintType)
	inner = protowire.AppendVarint(inner, 1)
	cmd := mustMarshal(t, &anypb.Any{TypeUrl: AppendTypeURL, Value: inner})
	got, err := DecodeAppend(cmd)
	if err != nil {
		t.Fatalf("DecodeAppend: %v", err)
	}
	if got.GetTable() != "videos" {
		t.Fatalf("table %q", got.GetTable())
	}
	again, err := EncodeAppend(got)
	if err != nil {
		t.Fatal(err)
	}
	got2, err := DecodeAppend(again)
	if err != nil || !proto.Equal(got, got2) {
		t.Fatalf("relay changed the command: %v, %v", got2, err)
	}
}

func FuzzDecodeAppend(f *testing.F) {
	for _, a := range []*lakepb.Append{
		{Table: "videos"},
		{Table: "videos", CommitId: "c-1", ExpectedVersion: proto.Int64(0)},
		{Table: "t", ExpectedVersion: proto.Int64(9)},
	} {
		b, err := EncodeAppend(a)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(mustMarshal(f, a)) // bare, not wrapped
	}
	for _, cmd := range flightSQLCommands(f) {
		f.Add(cmd)
	}
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff})
	f.Add(mustMarshal(f, &anypb.Any{Value: []byte("x")}))

	f.Fuzz(func(t *testing.T, cmd []byte) {
		a, err := DecodeAppend(cmd)

		// A bare Append that is valid on its own must never be taken for
		// a wrapped one (see TestDecodeAppendRejects).
		var bare lakepb.Append
		if proto.Unmarshal(cmd, &bare) == nil && ValidateAppend(&bare) == nil && err == nil {
			t.Fatalf("bare Append %v accepted as %v", &bare, a)
		}

		if err != nil {
			if a != nil {
				t.Fatalf("result %v with error %v", a, err)
			}
			if !errors.Is(err, ErrMalformedCommand) && !errors.Is(err, ErrUnknownCommand) &&
				!errors.Is(err, ErrInvalidTable) && !errors.Is(err, ErrInvalidCommitID) {
				t.Fatalf("error %v wraps no wire sentinel", err)
			}
			if len(err.Error()) > 600 {
				t.Fatalf("error message of %d bytes", len(err.Error()))
			}
			return
		}
		if err := ValidateAppend(a); err != nil {
			t.Fatalf("decoded %v fails ValidateAppend: %v", a, err)
		}
		again, err := EncodeAppend(a)
		if err != nil {
			t.Fatalf("re-encode %v: %v", a, err)
		}
		b, err := DecodeAppend(again)
		if err != nil {
			t.Fatalf("decode of re-encoded %v: %v", a, err)
		}
		if !proto.Equal(a, b) {
			t.Fatalf("re-encoded %v decodes as %v", a, b)
		}
	})
}
