package query

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lakedata/lake/wire"
)

// DuckDB drops two things a FILE column carries: the lake.type=file field
// metadata and the non-null flags of key, size and sha256 inside the
// struct. A result column whose type is the FILE struct in all but those
// flags is given both back, so every Flight SQL client receives FILE values
// exactly as DESIGN §4 defines them.

// fileShaped reports whether t is the FILE struct up to nullability.
func fileShaped(t arrow.DataType) bool {
	st, ok := t.(*arrow.StructType)
	want := wire.FileType()
	if !ok || st.NumFields() != want.NumFields() {
		return false
	}
	for i, f := range want.Fields() {
		g := st.Field(i)
		if g.Name != f.Name || !arrow.TypeEqual(g.Type, f.Type) {
			return false
		}
	}
	return true
}

// fileSchema returns the result schema with FILE columns restored, and
// which columns changed (nil when none did).
func fileSchema(s *arrow.Schema) (*arrow.Schema, []bool) {
	var changed []bool
	fields := s.Fields()
	for i, f := range fields {
		if !fileShaped(f.Type) || (wire.IsFileField(f) && arrow.TypeEqual(f.Type, wire.FileType())) {
			continue
		}
		if changed == nil {
			changed = make([]bool, len(fields))
		}
		changed[i] = true
		fields[i] = wire.FileField(f.Name, f.Nullable)
	}
	if changed == nil {
		return s, nil
	}
	md := s.Metadata()
	return arrow.NewSchema(fields, &md), changed
}

// fileRecord relabels the changed columns of rec with the FILE type. The
// buffers are shared; only the type changes. A row whose key, size or
// sha256 is null cannot come from lake data; if a query builds one anyway
// the relabelled array still reads it as null.
func fileRecord(schema *arrow.Schema, changed []bool, rec arrow.RecordBatch) arrow.RecordBatch {
	cols := make([]arrow.Array, rec.NumCols())
	for i, c := range rec.Columns() {
		if changed[i] {
			d := c.Data()
			nd := array.NewData(wire.FileType(), d.Len(), d.Buffers(), d.Children(), d.NullN(), d.Offset())
			cols[i] = array.MakeFromData(nd)
			nd.Release()
			defer cols[i].Release()
		} else {
			cols[i] = c
		}
	}
	return array.NewRecordBatch(schema, cols, rec.NumRows())
}
