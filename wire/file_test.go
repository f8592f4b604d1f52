package wire

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

const sumA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

func TestFileTypeContract(t *testing.T) {
	want := []struct {
		name     string
		typ      arrow.DataType
		nullable bool
	}{
		{"key", arrow.BinaryTypes.String, false},
		{"size", arrow.PrimitiveTypes.Int64, false},
		{"sha256", arrow.BinaryTypes.String, false},
		{"content_type", arrow.BinaryTypes.String, true},
		{"etag", arrow.BinaryTypes.String, true},
		{"uploaded_at", &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, true},
	}
	ft := FileType()
	if ft.NumFields() != len(want) {
		t.Fatalf("FILE struct has %d fields, want %d: %s", ft.NumFields(), len(want), ft)
	}
	for i, w := range want {
		f := ft.Field(i)
		if f.Name != w.name || !arrow.TypeEqual(f.Type, w.typ) || f.Nullable != w.nullable {
			t.Errorf("field %d = %s %s nullable=%v, want %s %s nullable=%v", i, f.Name, f.Type, f.Nullable, w.name, w.typ, w.nullable)
		}
		if f.HasMetadata() {
			t.Errorf("field %s carries metadata %v", f.Name, f.Metadata)
		}
	}
	ts, ok := ft.Field(5).Type.(*arrow.TimestampType)
	if !ok || ts.Unit != arrow.Microsecond || ts.TimeZone != "UTC" {
		t.Errorf("uploaded_at is %s, want timestamp[us, tz=UTC]", ft.Field(5).Type)
	}
	if FileTypeKey != "lake.type" || FileTypeValue != "file" {
		t.Errorf("marker %s=%s, want lake.type=file", FileTypeKey, FileTypeValue)
	}
}

func TestFileField(t *testing.T) {
	for _, nullable := range []bool{true, false} {
		f := FileField("video", nullable)
		if f.Name != "video" || f.Nullable != nullable || !arrow.TypeEqual(f.Type, FileType()) {
			t.Errorf("FileField = %s", f)
		}
		if f.Metadata.Len() != 1 {
			t.Errorf("metadata %v, want exactly lake.type=file", f.Metadata)
		}
		if v, ok := f.Metadata.GetValue("lake.type"); !ok || v != "file" {
			t.Errorf("metadata %v, want lake.type=file", f.Metadata)
		}
		if !IsFileField(f) {
			t.Error("IsFileField(FileField) = false")
		}
		if err := ValidateFileField(f); err != nil {
			t.Errorf("ValidateFileField(FileField) = %v", err)
		}
	}
}

func TestIsFileField(t *testing.T) {
	marked := func(typ arrow.DataType, keys, vals []string) arrow.Field {
		return arrow.Field{Name: "f", Type: typ, Metadata: arrow.NewMetadata(keys, vals)}
	}
	tests := []struct {
		name string
		f    arrow.Field
		want bool
	}{
		{"FileField", FileField("f", true), true},
		{"marker among other metadata", marked(FileType(), []string{"comment", "lake.type"}, []string{"x", "file"}), true},
		{"FILE struct without marker", arrow.Field{Name: "f", Type: FileType()}, false},
		{"other lake.type", marked(FileType(), []string{"lake.type"}, []string{"image"}), false},
		{"marker value in other case", marked(FileType(), []string{"lake.type"}, []string{"FILE"}), false},
		{"marker key in other case", marked(FileType(), []string{"Lake.Type"}, []string{"file"}), false},
		{"plain utf8", arrow.Field{Name: "f", Type: arrow.BinaryTypes.String}, false},
	}
	for _, tt := range tests {
		if got := IsFileField(tt.f); got != tt.want {
			t.Errorf("%s: IsFileField = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestValidateFileField(t *testing.T) {
	md := arrow.NewMetadata([]string{FileTypeKey}, []string{FileTypeValue})
	fields := FileType().Fields()
	reordered := arrow.StructOf(append([]arrow.Field{fields[1], fields[0]}, fields[2:]...)...)
	keyNullable := FileType().Fields()
	keyNullable[0].Nullable = true
	nanos := FileType().Fields()
	nanos[5].Type = &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}
	noTZ := FileType().Fields()
	noTZ[5].Type = &arrow.TimestampType{Unit: arrow.Microsecond}
	extra := append(FileType().Fields(), arrow.Field{Name: "extra", Type: arrow.BinaryTypes.String, Nullable: true})

	bad := map[string]arrow.DataType{
		"utf8":                arrow.BinaryTypes.String,
		"int64":               arrow.PrimitiveTypes.Int64,
		"empty struct":        arrow.StructOf(),
		"reordered":           reordered,
		"key nullable":        arrow.StructOf(keyNullable...),
		"uploaded_at ns":      arrow.StructOf(nanos...),
		"uploaded_at no zone": arrow.StructOf(noTZ...),
		"extra field":         arrow.StructOf(extra...),
		"first five fields":   arrow.StructOf(fields[:5]...),
		"list of FILE":        arrow.ListOf(FileType()),
	}
	for name, typ := range bad {
		f := arrow.Field{Name: "f", Type: typ, Nullable: true, Metadata: md}
		if err := ValidateFileField(f); !errors.Is(err, ErrInvalidSchema) {
			t.Errorf("%s: ValidateFileField = %v, want ErrInvalidSchema", name, err)
		}
	}
	// Unmarked fields are not FILE columns, whatever their type.
	for name, typ := range bad {
		if err := ValidateFileField(arrow.Field{Name: "f", Type: typ}); err != nil {
			t.Errorf("%s unmarked: ValidateFileField = %v, want nil", name, err)
		}
	}
}

func TestFileValueValidate(t *testing.T) {
	good := FileValue{Key: "objects/ab/cd/video.mp4", Size: 10, SHA256: sumA}
	with := func(f func(*FileValue)) FileValue {
		v := good
		f(&v)
		return v
	}
	tests := []struct {
		name string
		v    FileValue
		want error // nil = valid
	}{
		{"minimal", good, nil},
		{"empty object", with(func(v *FileValue) { v.Size = 0 }), nil},
		{"all fields", with(func(v *FileValue) {
			v.ContentType, v.ETag, v.UploadedAt = "video/mp4", `"9b2cf535f27731c974343645a3985328"`, time.Now()
		}), nil},
		{"huge size", with(func(v *FileValue) { v.Size = 1<<63 - 1 }), nil},
		{"all hex digits", with(func(v *FileValue) { v.SHA256 = strings.Repeat("0123456789abcdef", 4) }), nil},

		{"empty key", with(func(v *FileValue) { v.Key = "" }), ErrInvalidKey},
		{"dot-dot", with(func(v *FileValue) { v.Key = "objects/../_lake/catalog" }), ErrInvalidKey},
		{"trailing dot-dot", with(func(v *FileValue) { v.Key = "objects/a/.." }), ErrInvalidKey},
		{"dot", with(func(v *FileValue) { v.Key = "objects/./a" }), ErrInvalidKey},
		{"absolute", with(func(v *FileValue) { v.Key = "/etc/passwd" }), ErrInvalidKey},
		{"absolute under objects", with(func(v *FileValue) { v.Key = "/objects/a" }), ErrInvalidKey},
		{"outside objects", with(func(v *FileValue) { v.Key = "_lake/tables/x/data/y.parquet" }), ErrInvalidKey},
		{"prefix look-alike", with(func(v *FileValue) { v.Key = "objectsx/a" }), ErrInvalidKey},
		{"objects itself", with(func(v *FileValue) { v.Key = "objects/" }), ErrInvalidKey},
		{"NUL", with(func(v *FileValue) { v.Key = "objects/a\x00.mp4" }), ErrInvalidKey},
		{"control character", with(func(v *FileValue) { v.Key = "objects/a\r" }), ErrInvalidKey},
		{"backslash", with(func(v *FileValue) { v.Key = `objects\a` }), ErrInvalidKey},
		{"backslash dot-dot", with(func(v *FileValue) { v.Key = `objects/..\..\a` }), ErrInvalidKey},
		{"double slash", with(func(v *FileValue) { v.Key = "objects//a" }), ErrInvalidKey},
		{"not utf8", with(func(v *FileValue) { v.Key = "objects/\xc3" }), ErrInvalidKey},
		{"key too long", with(func(v *FileValue) { v.Key = "objects/" + strings.Repeat("a", MaxKeyLen) }), ErrInvalidKey},

		{"negative size", with(func(v *FileValue) { v.Size = -1 }), ErrInvalidFileValue},
		{"min int64 size", with(func(v *FileValue) { v.Size = -1 << 63 }), ErrInvalidFileValue},
		{"sha256 empty", with(func(v *FileValue) { v.SHA256 = "" }), ErrInvalidFileValue},
		{"sha256 uppercase", with(func(v *FileValue) { v.SHA256 = strings.ToUpper(sumA) }), ErrInvalidFileValue},
		{"sha256 one uppercase digit", with(func(v *FileValue) { v.SHA256 = "E" + sumA[1:] }), ErrInvalidFileValue},
		{"sha256 short", with(func(v *FileValue) { v.SHA256 = sumA[:63] }), ErrInvalidFileValue},
		{"sha256 long", with(func(v *FileValue) { v.SHA256 = sumA + "0" }), ErrInvalidFileValue},
		{"sha256 non-hex", with(func(v *FileValue) { v.SHA256 = "g" + sumA[1:] }), ErrInvalidFileValue},
		{"sha256 with prefix", with(func(v *FileValue) { v.SHA256 = "sha256:" + sumA[7:] }), ErrInvalidFileValue},
		{"sha256 base64", with(func(v *FileValue) { v.SHA256 = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=" }), ErrInvalidFileValue},
		{"sha256 multibyte", with(func(v *FileValue) { v.SHA256 = "é" + sumA[2:] }), ErrInvalidFileValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.v.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Validate = %v, want %v", err, tt.want)
			}
		})
	}
}

// buildFileColumn builds a FILE column; a nil entry is a null row.
func buildFileColumn(t *testing.T, mem memory.Allocator, rows []*FileValue) *array.Struct {
	t.Helper()
	b := array.NewStructBuilder(mem, FileType())
	defer b.Release()
	for _, v := range rows {
		if v == nil {
			b.AppendNull()
			continue
		}
		AppendFileValue(b, *v)
	}
	return b.NewStructArray()
}

func TestFileColumnRoundtrip(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)

	at := time.Date(2025, 3, 1, 12, 30, 45, 123456000, time.UTC)
	rows := []*FileValue{
		{Key: "objects/aa/one.mp4", Size: 1 << 40, SHA256: sumA, ContentType: "video/mp4", ETag: `"abc-2"`, UploadedAt: at},
		{Key: "objects/bb/two.bin", Size: 0, SHA256: strings.Repeat("0", 64)}, // optional fields null
		nil, // null FILE
		{Key: "objects/cc/three", Size: 3, SHA256: sumA, ETag: "e"},
		{Key: "objects/dd/old", Size: 4, SHA256: sumA, UploadedAt: time.Date(1960, 1, 2, 3, 4, 5, 6000, time.UTC)},
	}
	arr := buildFileColumn(t, mem, rows)
	defer arr.Release()

	if arr.Len() != len(rows) || arr.NullN() != 1 || !arr.IsNull(2) {
		t.Fatalf("column len %d nulls %d", arr.Len(), arr.NullN())
	}
	// Empty optional values are stored as nulls, not as "".
	if !arr.Field(fileContentType).IsNull(1) || !arr.Field(fileETag).IsNull(1) || !arr.Field(fileUploadedAt).IsNull(1) {
		t.Error("optional fields of row 1 are not null")
	}
	if arr.Field(fileETag).IsNull(3) || !arr.Field(fileContentType).IsNull(3) {
		t.Error("row 3: etag should be set, content_type null")
	}
	if arr.Field(fileKey).NullN() != 1 || arr.Field(fileSize).NullN() != 1 || arr.Field(fileSHA256).NullN() != 1 {
		t.Error("required children have nulls beyond the null row")
	}

	values, valid, err := FileValues(arr)
	if err != nil {
		t.Fatalf("FileValues: %v", err)
	}
	checkFileValues(t, values, valid, rows)

	// A slice of the column reads back the same rows.
	sl := array.NewSlice(arr, 1, 4)
	defer sl.Release()
	values, valid, err = FileValues(sl)
	if err != nil {
		t.Fatalf("FileValues(slice): %v", err)
	}
	checkFileValues(t, values, valid, rows[1:4])
}

func checkFileValues(t *testing.T, values []FileValue, valid []bool, want []*FileValue) {
	t.Helper()
	if len(values) != len(want) || len(valid) != len(want) {
		t.Fatalf("%d values, %d valid flags, want %d", len(values), len(valid), len(want))
	}
	for i, w := range want {
		if w == nil {
			if valid[i] || values[i] != (FileValue{}) {
				t.Errorf("row %d: valid=%v value %+v, want null", i, valid[i], values[i])
			}
			continue
		}
		got := values[i]
		if !valid[i] {
			t.Errorf("row %d: not valid", i)
		}
		if got.Key != w.Key || got.Size != w.Size || got.SHA256 != w.SHA256 || got.ContentType != w.ContentType || got.ETag != w.ETag {
			t.Errorf("row %d: %+v, want %+v", i, got, *w)
		}
		if !got.UploadedAt.Equal(w.UploadedAt) || got.UploadedAt.IsZero() != w.UploadedAt.IsZero() {
			t.Errorf("row %d: uploaded_at %v, want %v", i, got.UploadedAt, w.UploadedAt)
		}
		if !got.UploadedAt.IsZero() && got.UploadedAt.Location() != time.UTC {
			t.Errorf("row %d: uploaded_at in %v, want UTC", i, got.UploadedAt.Location())
		}
	}
}

// TestFileValueTimePrecision: uploaded_at is microseconds in UTC; finer
// precision and the zone of the time.Time are not kept.
func TestFileValueTimePrecision(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	zone := time.FixedZone("UTC+5", 5*3600)
	at := time.Date(2025, 3, 1, 17, 0, 0, 999_999_999, zone)
	arr := buildFileColumn(t, mem, []*FileValue{{Key: "objects/a", Size: 1, SHA256: sumA, UploadedAt: at}})
	defer arr.Release()
	values, _, err := FileValues(arr)
	if err != nil {
		t.Fatal(err)
	}
	got := values[0].UploadedAt
	if want := at.Truncate(time.Microsecond); !got.Equal(want) || got.Location() != time.UTC {
		t.Fatalf("uploaded_at %v, want %v in UTC", got, want.UTC())
	}
}

func TestFileValuesRejects(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)

	t.Run("not a struct", func(t *testing.T) {
		b := array.NewStringBuilder(mem)
		defer b.Release()
		b.Append("objects/a")
		arr := b.NewArray()
		defer arr.Release()
		if _, _, err := FileValues(arr); !errors.Is(err, ErrSchemaMismatch) {
			t.Fatalf("FileValues = %v, want ErrSchemaMismatch", err)
		}
	})

	t.Run("other struct types", func(t *testing.T) {
		fields := FileType().Fields()
		keyNullable := FileType().Fields()
		keyNullable[0].Nullable = true
		for name, st := range map[string]*arrow.StructType{
			"reordered":    arrow.StructOf(append([]arrow.Field{fields[1], fields[0]}, fields[2:]...)...),
			"missing etc":  arrow.StructOf(fields[:3]...),
			"key nullable": arrow.StructOf(keyNullable...),
			"renamed": arrow.StructOf(append([]arrow.Field{{Name: "path", Type: arrow.BinaryTypes.String}},
				fields[1:]...)...),
		} {
			b := array.NewStructBuilder(mem, st)
			b.AppendNull()
			arr := b.NewArray()
			b.Release()
			_, _, err := FileValues(arr)
			arr.Release()
			if !errors.Is(err, ErrSchemaMismatch) {
				t.Errorf("%s: FileValues = %v, want ErrSchemaMismatch", name, err)
			}
		}
	})

	// Rows whose struct slot is valid but whose required children are null.
	for i, name := range []string{"null key", "null size", "null sha256"} {
		t.Run(name, func(t *testing.T) {
			b := array.NewStructBuilder(mem, FileType())
			defer b.Release()
			AppendFileValue(b, FileValue{Key: "objects/ok", Size: 1, SHA256: sumA})
			b.Append(true)
			appendOrNull := func(j int, f func()) {
				if i == j {
					b.FieldBuilder(j).AppendNull()
				} else {
					f()
				}
			}
			appendOrNull(fileKey, func() { b.FieldBuilder(fileKey).(*array.StringBuilder).Append("objects/x") })
			appendOrNull(fileSize, func() { b.FieldBuilder(fileSize).(*array.Int64Builder).Append(1) })
			appendOrNull(fileSHA256, func() { b.FieldBuilder(fileSHA256).(*array.StringBuilder).Append(sumA) })
			for _, j := range []int{fileContentType, fileETag, fileUploadedAt} {
				b.FieldBuilder(j).AppendNull()
			}
			arr := b.NewArray()
			defer arr.Release()
			values, valid, err := FileValues(arr)
			if !errors.Is(err, ErrInvalidFileValue) || values != nil || valid != nil {
				t.Fatalf("FileValues = %v, %v, %v; want ErrInvalidFileValue", values, valid, err)
			}
			if !strings.Contains(err.Error(), "row 1") {
				t.Errorf("error %q does not name row 1", err)
			}
		})
	}

	t.Run("invalid value", func(t *testing.T) {
		for name, tt := range map[string]struct {
			v    FileValue
			want error
		}{
			"escaping key":   {FileValue{Key: "objects/../../etc/passwd", Size: 1, SHA256: sumA}, ErrInvalidKey},
			"negative size":  {FileValue{Key: "objects/a", Size: -1, SHA256: sumA}, ErrInvalidFileValue},
			"uppercase hash": {FileValue{Key: "objects/a", Size: 1, SHA256: strings.ToUpper(sumA)}, ErrInvalidFileValue},
		} {
			arr := buildFileColumn(t, mem, []*FileValue{nil, {Key: "objects/ok", Size: 1, SHA256: sumA}, &tt.v})
			_, _, err := FileValues(arr)
			arr.Release()
			if !errors.Is(err, tt.want) {
				t.Errorf("%s: FileValues = %v, want %v", name, err, tt.want)
			} else if !strings.Contains(err.Error(), "row 2") {
				t.Errorf("%s: error %q does not name row 2", name, err)
			}
		}
	})
}
