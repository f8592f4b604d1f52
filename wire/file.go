package wire

import (
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// FileTypeKey and FileTypeValue mark a FILE column in its Arrow field
// metadata (DESIGN §4).
const (
	FileTypeKey   = "lake.type"
	FileTypeValue = "file"
)

// Field positions of the FILE struct (DESIGN §4; the order is the contract).
const (
	fileKey = iota
	fileSize
	fileSHA256
	fileContentType
	fileETag
	fileUploadedAt
)

var fileType = arrow.StructOf(
	arrow.Field{Name: "key", Type: arrow.BinaryTypes.String, Nullable: false},
	arrow.Field{Name: "size", Type: arrow.PrimitiveTypes.Int64, Nullable: false},
	arrow.Field{Name: "sha256", Type: arrow.BinaryTypes.String, Nullable: false},
	arrow.Field{Name: "content_type", Type: arrow.BinaryTypes.String, Nullable: true},
	arrow.Field{Name: "etag", Type: arrow.BinaryTypes.String, Nullable: true},
	arrow.Field{Name: "uploaded_at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
)

// FileType returns the Arrow struct type of a FILE value.
func FileType() *arrow.StructType { return fileType }

// FileField returns a FILE column named name, carrying lake.type=file.
func FileField(name string, nullable bool) arrow.Field {
	return arrow.Field{
		Name:     name,
		Type:     fileType,
		Nullable: nullable,
		Metadata: arrow.NewMetadata([]string{FileTypeKey}, []string{FileTypeValue}),
	}
}

// IsFileField reports whether f is marked as a FILE column.
func IsFileField(f arrow.Field) bool {
	v, ok := f.Metadata.GetValue(FileTypeKey)
	return ok && v == FileTypeValue
}

// ValidateFileField checks a field marked lake.type=file has exactly the
// FILE struct type.
func ValidateFileField(f arrow.Field) error {
	if !IsFileField(f) {
		return nil
	}
	if !arrow.TypeEqual(f.Type, fileType) {
		return fmt.Errorf("%w: column %q is marked %s=%s but its type is %s, want %s",
			ErrInvalidSchema, f.Name, FileTypeKey, FileTypeValue, f.Type, fileType)
	}
	return nil
}

// FileValue is one FILE value: where an object is in the stage, how big it
// is and its SHA-256.
type FileValue struct {
	Key         string
	Size        int64
	SHA256      string // lowercase hex
	ContentType string // "" = null
	ETag        string // "" = null
	UploadedAt  time.Time
}

// Validate checks the value on its own: a clean key under objects/, a
// non-negative size and a lowercase hex SHA-256. Whether the object exists
// is the metadata service's check.
func (v FileValue) Validate() error {
	if err := ValidateObjectKey(v.Key); err != nil {
		return err
	}
	if v.Size < 0 {
		return fmt.Errorf("%w: size %d is negative", ErrInvalidFileValue, v.Size)
	}
	if !IsSHA256Hex(v.SHA256) {
		return fmt.Errorf("%w: sha256 %q is not 64 lowercase hex digits", ErrInvalidFileValue, clip(v.SHA256, 80))
	}
	return nil
}

// IsSHA256Hex reports whether s is a SHA-256 written as 64 lowercase hex
// digits, the form FILE values and checkpoints use.
func IsSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// FileValues reads every row of a FILE column. A null FILE row is returned
// as ok=false in its slot; the caller decides whether nulls are allowed.
// Each non-null value is validated.
func FileValues(arr arrow.Array) (values []FileValue, valid []bool, err error) {
	st, ok := arr.(*array.Struct)
	if !ok || !arrow.TypeEqual(arr.DataType(), fileType) {
		return nil, nil, fmt.Errorf("%w: FILE column has type %s, want %s", ErrSchemaMismatch, arr.DataType(), fileType)
	}
	key := st.Field(fileKey).(*array.String)
	size := st.Field(fileSize).(*array.Int64)
	sum := st.Field(fileSHA256).(*array.String)
	ctype := st.Field(fileContentType).(*array.String)
	etag := st.Field(fileETag).(*array.String)
	at := st.Field(fileUploadedAt).(*array.Timestamp)

	values = make([]FileValue, st.Len())
	valid = make([]bool, st.Len())
	for i := range st.Len() {
		if st.IsNull(i) {
			continue
		}
		if key.IsNull(i) || size.IsNull(i) || sum.IsNull(i) {
			return nil, nil, fmt.Errorf("%w: row %d: key, size and sha256 must not be null", ErrInvalidFileValue, i)
		}
		v := FileValue{Key: key.Value(i), Size: size.Value(i), SHA256: sum.Value(i)}
		if !ctype.IsNull(i) {
			v.ContentType = ctype.Value(i)
		}
		if !etag.IsNull(i) {
			v.ETag = etag.Value(i)
		}
		if !at.IsNull(i) {
			v.UploadedAt = at.Value(i).ToTime(arrow.Microsecond)
		}
		if err := v.Validate(); err != nil {
			return nil, nil, fmt.Errorf("row %d: %w", i, err)
		}
		values[i], valid[i] = v, true
	}
	return values, valid, nil
}

// AppendFileValue appends v to a builder of the FILE struct type.
func AppendFileValue(b *array.StructBuilder, v FileValue) {
	b.Append(true)
	b.FieldBuilder(fileKey).(*array.StringBuilder).Append(v.Key)
	b.FieldBuilder(fileSize).(*array.Int64Builder).Append(v.Size)
	b.FieldBuilder(fileSHA256).(*array.StringBuilder).Append(v.SHA256)
	appendOptionalString(b.FieldBuilder(fileContentType).(*array.StringBuilder), v.ContentType)
	appendOptionalString(b.FieldBuilder(fileETag).(*array.StringBuilder), v.ETag)
	tb := b.FieldBuilder(fileUploadedAt).(*array.TimestampBuilder)
	if v.UploadedAt.IsZero() {
		tb.AppendNull()
	} else {
		tb.Append(arrow.Timestamp(v.UploadedAt.UnixMicro()))
	}
}

func appendOptionalString(b *array.StringBuilder, s string) {
	if s == "" {
		b.AppendNull()
	} else {
		b.Append(s)
	}
}
