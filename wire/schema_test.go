package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lakedata/lake/wire/lakepb"
)

var tsUTC = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

func TestDefaultSchema(t *testing.T) {
	s := DefaultSchema()
	if err := ValidateSchema(s); err != nil {
		t.Fatalf("ValidateSchema(DefaultSchema()) = %v", err)
	}
	if s.NumFields() != 3 {
		t.Fatalf("DefaultSchema = %s", s)
	}
	name, file, created := s.Field(0), s.Field(1), s.Field(2)
	if name.Name != "name" || !arrow.TypeEqual(name.Type, arrow.BinaryTypes.String) {
		t.Errorf("column 0 = %s, want name utf8", name)
	}
	if file.Name != "file" || !arrow.TypeEqual(file.Type, FileType()) || !IsFileField(file) {
		t.Errorf("column 1 = %s, want file FILE", file)
	}
	if created.Name != "created_at" || !arrow.TypeEqual(created.Type, tsUTC) {
		t.Errorf("column 2 = %s, want created_at timestamp[us, tz=UTC]", created)
	}
	// Each call returns a fresh schema.
	if DefaultSchema() == s {
		t.Error("DefaultSchema returns a shared value")
	}
}

func TestValidateSchema(t *testing.T) {
	str := arrow.BinaryTypes.String
	many := make([]arrow.Field, MaxColumns+1)
	for i := range many {
		many[i] = arrow.Field{Name: fmt.Sprintf("c%d", i), Type: str}
	}
	badFile := arrow.Field{Name: "file", Type: str, Metadata: arrow.NewMetadata([]string{FileTypeKey}, []string{FileTypeValue})}

	ok := map[string]*arrow.Schema{
		"default":      DefaultSchema(),
		"one column":   arrow.NewSchema([]arrow.Field{{Name: "a", Type: str}}, nil),
		"two FILEs":    arrow.NewSchema([]arrow.Field{FileField("a", true), FileField("b", false)}, nil),
		"max columns":  arrow.NewSchema(many[:MaxColumns], nil),
		"names differ": arrow.NewSchema([]arrow.Field{{Name: "a", Type: str}, {Name: "A", Type: str}}, nil),
	}
	for name, s := range ok {
		if err := ValidateSchema(s); err != nil {
			t.Errorf("%s: ValidateSchema = %v", name, err)
		}
	}
	bad := map[string]*arrow.Schema{
		"nil":             nil,
		"no columns":      arrow.NewSchema(nil, nil),
		"duplicate":       arrow.NewSchema([]arrow.Field{{Name: "a", Type: str}, {Name: "b", Type: str}, {Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil),
		"duplicate FILE":  arrow.NewSchema([]arrow.Field{FileField("f", true), FileField("f", true)}, nil),
		"empty name":      arrow.NewSchema([]arrow.Field{{Name: "a", Type: str}, {Name: "", Type: str}}, nil),
		"too many":        arrow.NewSchema(many, nil),
		"bad FILE column": arrow.NewSchema([]arrow.Field{{Name: "a", Type: str}, badFile}, nil),
	}
	for name, s := range bad {
		if err := ValidateSchema(s); !errors.Is(err, ErrInvalidSchema) {
			t.Errorf("%s: ValidateSchema = %v, want ErrInvalidSchema", name, err)
		}
	}
}

func TestCheckAppendSchema(t *testing.T) {
	table := DefaultSchema()
	str := arrow.BinaryTypes.String

	// What a client that knows nothing of lake's metadata sends: the same
	// names and types, other nullability, no lake.type marker.
	plain := arrow.NewSchema([]arrow.Field{
		{Name: "name", Type: str, Nullable: false},
		{Name: "file", Type: FileType(), Nullable: false},
		{Name: "created_at", Type: tsUTC, Nullable: false, Metadata: arrow.NewMetadata([]string{"x"}, []string{"y"})},
	}, func() *arrow.Metadata { m := arrow.NewMetadata([]string{"k"}, []string{"v"}); return &m }())
	for name, s := range map[string]*arrow.Schema{"same": DefaultSchema(), "plain": plain} {
		if err := CheckAppendSchema(table, s); err != nil {
			t.Errorf("%s: CheckAppendSchema = %v", name, err)
		}
	}

	f := table.Fields()
	with := func(i int, fld arrow.Field) *arrow.Schema {
		fs := table.Fields()
		fs[i] = fld
		return arrow.NewSchema(fs, nil)
	}
	keyNullable := FileType().Fields()
	keyNullable[0].Nullable = true
	bad := map[string]*arrow.Schema{
		"fewer":             arrow.NewSchema(f[:2], nil),
		"more":              arrow.NewSchema(append(table.Fields(), arrow.Field{Name: "extra", Type: str}), nil),
		"none":              arrow.NewSchema(nil, nil),
		"renamed":           with(0, arrow.Field{Name: "title", Type: str}),
		"other case":        with(0, arrow.Field{Name: "Name", Type: str}),
		"reordered":         arrow.NewSchema([]arrow.Field{f[1], f[0], f[2]}, nil),
		"large_utf8":        with(0, arrow.Field{Name: "name", Type: arrow.BinaryTypes.LargeString}),
		"binary":            with(0, arrow.Field{Name: "name", Type: arrow.BinaryTypes.Binary}),
		"timestamp ns":      with(2, arrow.Field{Name: "created_at", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}}),
		"timestamp no zone": with(2, arrow.Field{Name: "created_at", Type: &arrow.TimestampType{Unit: arrow.Microsecond}}),
		"timestamp zone":    with(2, arrow.Field{Name: "created_at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "Europe/Paris"}}),
		"FILE as utf8":      with(1, arrow.Field{Name: "file", Type: str}),
		"FILE key nullable": with(1, arrow.Field{Name: "file", Type: arrow.StructOf(keyNullable...)}),
	}
	for name, s := range bad {
		if err := CheckAppendSchema(table, s); !errors.Is(err, ErrSchemaMismatch) {
			t.Errorf("%s: CheckAppendSchema = %v, want ErrSchemaMismatch", name, err)
		}
	}
}

func TestSchemaRoundtrip(t *testing.T) {
	mdOf := func(kv ...string) arrow.Metadata {
		var k, v []string
		for i := 0; i < len(kv); i += 2 {
			k, v = append(k, kv[i]), append(v, kv[i+1])
		}
		return arrow.NewMetadata(k, v)
	}
	schemaMD := mdOf("lake.table", "videos", "big", strings.Repeat("v", 100_000))
	many := make([]arrow.Field, MaxColumns)
	for i := range many {
		many[i] = arrow.Field{Name: fmt.Sprintf("column_%d_%s", i, strings.Repeat("x", 200)), Type: arrow.PrimitiveTypes.Int32, Nullable: true,
			Metadata: mdOf("doc", fmt.Sprint("column ", i))}
	}
	deep := arrow.Field{Name: "leaf", Type: arrow.BinaryTypes.String, Nullable: true}
	for range maxSchemaDepth - 1 {
		deep = arrow.Field{Name: "s", Type: arrow.StructOf(deep), Nullable: true}
	}

	schemas := map[string]*arrow.Schema{
		"default": DefaultSchema(),
		"every kind": arrow.NewSchema([]arrow.Field{
			FileField("file", false),
			{Name: "ny", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "America/New_York"}, Nullable: true},
			{Name: "naive", Type: &arrow.TimestampType{Unit: arrow.Second}},
			{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true, Metadata: mdOf("a", "1", "b", "2")},
			{Name: "attrs", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Float64)},
			{Name: "kind", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}},
			{Name: "u", Type: arrow.DenseUnionOf([]arrow.Field{{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, {Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}, []arrow.UnionTypeCode{5, 9})},
			{Name: "sp", Type: arrow.SparseUnionOf([]arrow.Field{{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true}}, []arrow.UnionTypeCode{0})},
			{Name: "dec", Type: &arrow.Decimal128Type{Precision: 20, Scale: 4}},
			{Name: "hash", Type: &arrow.FixedSizeBinaryType{ByteWidth: 32}},
			{Name: "vec", Type: arrow.FixedSizeListOf(3, arrow.PrimitiveTypes.Float32)},
			{Name: "d", Type: arrow.FixedWidthTypes.Date32},
			{Name: "dur", Type: arrow.FixedWidthTypes.Duration_us},
			{Name: "bin", Type: arrow.BinaryTypes.LargeBinary},
			{Name: "ünïcode name ✓", Type: arrow.Null, Nullable: true},
			{Name: "empty_struct", Type: arrow.StructOf()},
		}, &schemaMD),
		"max columns":         arrow.NewSchema(many, nil),
		"nested to the limit": arrow.NewSchema([]arrow.Field{deep}, nil),
	}
	for name, s := range schemas {
		t.Run(name, func(t *testing.T) {
			b := EncodeSchema(s)
			got, err := DecodeSchema(b)
			if err != nil {
				t.Fatalf("DecodeSchema: %v", err)
			}
			if !got.Equal(s) {
				t.Fatalf("roundtrip\n%s\nwant\n%s", got, s)
			}
			// Equal compares field metadata and time zones; spell out the two
			// the contract depends on.
			for i, f := range s.Fields() {
				g := got.Field(i)
				if IsFileField(f) != IsFileField(g) || !g.Metadata.Equal(f.Metadata) {
					t.Errorf("column %s: metadata %v, want %v", f.Name, g.Metadata, f.Metadata)
				}
				if ts, ok := f.Type.(*arrow.TimestampType); ok && g.Type.(*arrow.TimestampType).TimeZone != ts.TimeZone {
					t.Errorf("column %s: time zone %q, want %q", f.Name, g.Type.(*arrow.TimestampType).TimeZone, ts.TimeZone)
				}
			}
			if !got.Metadata().Equal(s.Metadata()) {
				t.Errorf("schema metadata %v, want %v", got.Metadata(), s.Metadata())
			}
		})
	}

	// The FILE column's nested uploaded_at keeps its zone too.
	got, err := DecodeSchema(EncodeSchema(DefaultSchema()))
	if err != nil {
		t.Fatal(err)
	}
	file := got.Field(1)
	if !IsFileField(file) || ValidateFileField(file) != nil {
		t.Fatalf("decoded FILE column %s", file)
	}
	if tz := file.Type.(*arrow.StructType).Field(fileUploadedAt).Type.(*arrow.TimestampType).TimeZone; tz != "UTC" {
		t.Fatalf("uploaded_at zone %q", tz)
	}
	if err := ValidateSchema(got); err != nil {
		t.Fatalf("ValidateSchema(decoded default) = %v", err)
	}
}

// TestDecodeSchemaOfAStream: DecodeSchema accepts a whole IPC stream, as
// written by any Arrow implementation, and reads only its schema.
func TestDecodeSchemaOfAStream(t *testing.T) {
	s := DefaultSchema()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(s))
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).Append("a.mp4")
	AppendFileValue(b.Field(1).(*array.StructBuilder), FileValue{Key: "objects/a", Size: 1, SHA256: sumA})
	b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(time.Now().UnixMicro()))
	rec := b.NewRecordBatch()
	defer rec.Release()
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := DecodeSchema(buf.Bytes())
	if err != nil || !got.Equal(s) {
		t.Fatalf("DecodeSchema(stream) = %v, %v", got, err)
	}
}

func TestDecodeSchemaRejects(t *testing.T) {
	valid := EncodeSchema(DefaultSchema())
	recordFirst := func() []byte {
		// A record batch message where the schema should be.
		var buf bytes.Buffer
		s := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil)
		w := ipc.NewWriter(&buf, ipc.WithSchema(s))
		b := array.NewRecordBuilder(memory.DefaultAllocator, s)
		defer b.Release()
		b.Field(0).(*array.Int64Builder).Append(1)
		rec := b.NewRecordBatch()
		defer rec.Release()
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		schemaLen := len(EncodeSchema(s)) - 8 // minus the end-of-stream marker
		return buf.Bytes()[schemaLen:]
	}

	tests := map[string][]byte{
		"nil":                nil,
		"empty":              {},
		"garbage":            []byte("this is not an arrow schema"),
		"one byte":           {0xff},
		"continuation only":  {0xff, 0xff, 0xff, 0xff},
		"end of stream":      {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0},
		"zero length legacy": {0, 0, 0, 0},
		"negative length":    {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0x80},
		"length too short":   {0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 1, 2},
		"metadata all zero":  append([]byte{0xff, 0xff, 0xff, 0xff, 16, 0, 0, 0}, make([]byte, 16)...),
		"metadata all ones":  append([]byte{0xff, 0xff, 0xff, 0xff, 16, 0, 0, 0}, bytes.Repeat([]byte{0xff}, 16)...),
		"record batch first": recordFirst(),
		"protobuf":           mustAppendCmd(t),
	}
	for n := 0; n < len(valid)-8; n++ {
		tests[fmt.Sprintf("truncated to %d", n)] = valid[:n]
	}
	for name, b := range tests {
		s, err := DecodeSchema(b)
		if !errors.Is(err, ErrInvalidSchema) || s != nil {
			t.Errorf("%s: DecodeSchema = %v, %v; want ErrInvalidSchema", name, s, err)
		}
	}

	// Every single-byte corruption of a valid schema is either decoded or
	// rejected with ErrInvalidSchema — never a panic.
	for i := range valid {
		for _, x := range []byte{0x01, 0x80, 0xff} {
			b := bytes.Clone(valid)
			b[i] ^= x
			if _, err := DecodeSchema(b); err != nil && !errors.Is(err, ErrInvalidSchema) {
				t.Fatalf("byte %d ^ %#x: error %v is not ErrInvalidSchema", i, x, err)
			}
		}
	}
}

func mustAppendCmd(t *testing.T) []byte {
	t.Helper()
	b, err := EncodeAppend(&lakepb.Append{Table: "videos"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodeSchemaHostile feeds hand-made messages that, before
// checkSchemaMessage, made the arrow IPC reader allocate gigabytes, abort
// the process out of memory or overflow the stack. Each must be refused
// quickly and cheaply.
func TestDecodeSchemaHostile(t *testing.T) {
	// A valid hand-made message first, to show the builder is right.
	w, el := schemaMessage(2, 2)
	f, _ := w.field("a", fbTypeUtf8, false)
	w.ref(el[0], f)
	s, ch := w.field("s", fbTypeStruct, true)
	w.ref(el[1], s)
	v, ce := w.vector(1, 1)
	w.ref(ch, v)
	c, _ := w.field("c", fbTypeUtf8, false)
	w.ref(ce[0], c)
	got, err := DecodeSchema(ipcFrame(w.b))
	want := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "s", Type: arrow.StructOf(arrow.Field{Name: "c", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
	}, nil)
	if err != nil || !got.Equal(want) {
		t.Fatalf("hand-made schema: %v, %v; want %v", got, err, want)
	}

	hostile := map[string][]byte{}

	// IPC framing claiming a 2 GiB metadata block (8 bytes of input).
	hostile["metadata length 2GiB"] = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}
	hostile["legacy metadata length 2GiB"] = []byte{0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0}

	// A schema message claiming a body of 32 TiB.
	hostile["body length 32TiB"] = ipcFrame(setBodyLength(t, 1<<45))
	hostile["body length 2GiB"] = ipcFrame(setBodyLength(t, 1<<31))

	// A fields vector claiming 2^32-16 elements: the reader made a slice of
	// that many arrow.Field (hundreds of GiB).
	w, _ = schemaMessage(0xFFFFFFF0, 0)
	hostile["fields vector length"] = ipcFrame(w.b)

	// A struct field whose children vector claims 2^28 elements.
	w, el = schemaMessage(1, 1)
	s, ch = w.field("s", fbTypeStruct, true)
	w.ref(el[0], s)
	v, _ = w.vector(1<<28, 0)
	w.ref(ch, v)
	hostile["children vector length"] = ipcFrame(w.b)

	// A struct field that is its own child: unbounded recursion, a fatal
	// stack overflow.
	w, el = schemaMessage(1, 1)
	s, ch = w.field("s", fbTypeStruct, true)
	w.ref(el[0], s)
	v, ce = w.vector(1, 1)
	w.ref(ch, v)
	w.ref(ce[0], s)
	hostile["self-cycle"] = ipcFrame(w.b)

	// A cycle through the fields vector: the child points back to the
	// top-level field, with a backward (wrapped) offset.
	w, el = schemaMessage(1, 1)
	s, ch = w.field("s", fbTypeStruct, true)
	w.ref(el[0], s)
	v, ce = w.vector(1, 1)
	w.ref(ch, v)
	s2, ch2 := w.field("t", fbTypeStruct, true)
	w.ref(ce[0], s2)
	v2, ce2 := w.vector(1, 1)
	w.ref(ch2, v2)
	w.ref(ce2[0], s)
	hostile["two-field cycle"] = ipcFrame(w.b)

	// A DAG: 16 children that are all the same field, 8 levels deep —
	// 16^8 fields to build from a few hundred bytes.
	w, el = schemaMessage(1, 1)
	var prev int
	for level := range 8 {
		kind, children := uint64(fbTypeStruct), true
		if level == 0 {
			kind, children = fbTypeUtf8, false
		}
		node, nch := w.field("n", kind, children)
		if children {
			vv, elems := w.vector(16, 16)
			w.ref(nch, vv)
			for _, e := range elems {
				w.ref(e, prev)
			}
		}
		prev = node
	}
	w.ref(el[0], prev)
	hostile["shared children"] = ipcFrame(w.b)

	// Distinct fields all naming one 64 KiB string: 1024 copies of it.
	w, el = schemaMessage(1024, 1024)
	name := w.str(strings.Repeat("n", 64<<10))
	for _, e := range el {
		f, _ := w.field("x", fbTypeUtf8, false)
		// Point the name at the shared string (slot 0 of the field table).
		w.ref(f+4, name)
		w.ref(e, f)
	}
	hostile["shared name string"] = ipcFrame(w.b)

	// Nesting one level deeper than Arrow allows.
	w, el = schemaMessage(1, 1)
	parentChildren := el[0]
	for level := 0; level <= maxSchemaDepth; level++ {
		leaf := level == maxSchemaDepth
		kind := uint64(fbTypeStruct)
		if leaf {
			kind = fbTypeUtf8
		}
		node, nch := w.field("d", kind, !leaf)
		w.ref(parentChildren, node)
		if !leaf {
			vv, elems := w.vector(1, 1)
			w.ref(nch, vv)
			parentChildren = elems[0]
		}
	}
	hostile["too deep"] = ipcFrame(w.b)

	for name, b := range hostile {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			s, err := DecodeSchema(b)
			elapsed := time.Since(start)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrInvalidSchema) || s != nil {
				t.Fatalf("DecodeSchema = %v, %v; want ErrInvalidSchema", s, err)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
				t.Errorf("allocated %d MiB for %d bytes of input", n>>20, len(b))
			}
			if elapsed > 2*time.Second {
				t.Errorf("took %v", elapsed)
			}
		})
	}
}

// setBodyLength returns a schema message (no fields) whose bodyLength is n.
func setBodyLength(t *testing.T, n uint64) []byte {
	t.Helper()
	w, _ := schemaMessage(0, 0)
	// Find the message table through the root offset and its bodyLength
	// slot (3) through the vtable.
	root := int(binary.LittleEndian.Uint32(w.b))
	vt := root - int(int32(binary.LittleEndian.Uint32(w.b[root:])))
	off := int(binary.LittleEndian.Uint16(w.b[vt+4+2*3:]))
	if off == 0 {
		t.Fatal("no bodyLength slot")
	}
	binary.LittleEndian.PutUint64(w.b[root+off:], n)
	return w.b
}

func FuzzDecodeSchema(f *testing.F) {
	f.Add(EncodeSchema(DefaultSchema()))
	f.Add(EncodeSchema(arrow.NewSchema([]arrow.Field{
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "kind", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}},
		{Name: "u", Type: arrow.DenseUnionOf([]arrow.Field{{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, []arrow.UnionTypeCode{3})},
	}, nil)))
	f.Add([]byte{})
	f.Add([]byte("garbage"))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	w, el := schemaMessage(1, 1)
	s, ch := w.field("s", fbTypeStruct, true)
	w.ref(el[0], s)
	v, ce := w.vector(1, 1)
	w.ref(ch, v)
	w.ref(ce[0], s)
	f.Add(ipcFrame(w.b))

	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeSchema(b)
		if err != nil {
			if !errors.Is(err, ErrInvalidSchema) || s != nil {
				t.Fatalf("DecodeSchema = %v, %v", s, err)
			}
			return
		}
		if s == nil {
			t.Fatal("nil schema without an error")
		}
		// Whatever decodes must survive our own encoding.
		again, err := DecodeSchema(EncodeSchema(s))
		if err != nil {
			t.Fatalf("re-encoded %s: %v", s, err)
		}
		if !again.Equal(s) {
			t.Fatalf("re-encoded\n%s\ndecodes as\n%s", s, again)
		}
	})
}
