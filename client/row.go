package client

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lakedata/lake/wire"
)

// cell appends one parsed value to its column's builder.
type cell func(array.Builder)

func appendCell[T any](v T) cell {
	return func(b array.Builder) { b.(interface{ Append(T) }).Append(v) }
}

// rowPlan is the one row a put appends, fully checked before any upload:
// everything but the FILE value and the time, which come after it.
type rowPlan struct {
	schema     *arrow.Schema
	fileCol    int
	createdCol int // -1: none, or set explicitly
	nameCol    int // -1: none, or set explicitly
	name       string
	cells      map[int]cell
}

// fileRow is what differs between the rows of one plan: the name, the
// uploaded file's value and the row's created_at.
type fileRow struct {
	name string
	file wire.FileValue
	at   time.Time
}

// planRow fills the row for the table's schema: the first FILE column
// gets the upload, a utf8 "name" column the name, a timestamp
// "created_at" column the time, set the columns it names; the rest stay
// null, which a non-nullable column refuses.
func planRow(schema *arrow.Schema, name string, set map[string]string) (*rowPlan, error) {
	p := &rowPlan{schema: schema, fileCol: -1, createdCol: -1, nameCol: -1, name: name, cells: make(map[int]cell)}
	for i, f := range schema.Fields() {
		if wire.IsFileField(f) {
			p.fileCol = i
			break
		}
	}
	if p.fileCol < 0 {
		return nil, ErrNoFileColumn
	}
	// Sorted, so the same bad input always reports the same column.
	for _, col := range slices.Sorted(maps.Keys(set)) {
		idx := schema.FieldIndices(col)
		if len(idx) == 0 {
			return nil, &ValueError{Column: col, Err: fmt.Errorf("%w: the table has no column %q", ErrUnknownColumn, col)}
		}
		f := schema.Field(idx[0])
		c, err := parseCell(f, set[col])
		if err != nil {
			return nil, &ValueError{Column: col, Err: err}
		}
		p.cells[idx[0]] = c
	}
	if idx := schema.FieldIndices("name"); len(idx) == 1 && p.cells[idx[0]] == nil && idx[0] != p.fileCol {
		if _, ok := schema.Field(idx[0]).Type.(*arrow.StringType); ok {
			p.nameCol = idx[0]
		}
	}
	if idx := schema.FieldIndices("created_at"); len(idx) == 1 && p.cells[idx[0]] == nil {
		if _, ok := schema.Field(idx[0]).Type.(*arrow.TimestampType); ok {
			p.createdCol = idx[0]
		}
	}
	for i, f := range schema.Fields() {
		if !f.Nullable && i != p.fileCol && i != p.createdCol && i != p.nameCol && p.cells[i] == nil {
			return nil, &ValueError{Column: f.Name, Err: fmt.Errorf("%w: set it", ErrMissingValue)}
		}
	}
	return p, nil
}

// record builds the row around the uploaded file's value, named as
// planned.
func (p *rowPlan) record(v wire.FileValue, now time.Time) (arrow.RecordBatch, error) {
	return p.records([]fileRow{{name: p.name, file: v, at: now}})
}

// records builds one row per file, in order, as one record batch: the
// rows of one batched append.
func (p *rowPlan) records(rows []fileRow) (arrow.RecordBatch, error) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, p.schema)
	defer b.Release()
	for _, r := range rows {
		for i := range p.schema.Fields() {
			fb := b.Field(i)
			switch {
			case i == p.fileCol:
				wire.AppendFileValue(fb.(*array.StructBuilder), r.file)
			case i == p.createdCol:
				ts, err := arrow.TimestampFromTime(r.at, p.schema.Field(i).Type.(*arrow.TimestampType).Unit)
				if err != nil {
					return nil, err
				}
				fb.(*array.TimestampBuilder).Append(ts)
			case i == p.nameCol:
				fb.(*array.StringBuilder).Append(r.name)
			case p.cells[i] != nil:
				p.cells[i](fb)
			default:
				fb.AppendNull()
			}
		}
	}
	return b.NewRecordBatch(), nil
}

// parseCell parses s as a value of f's type.
func parseCell(f arrow.Field, s string) (cell, error) {
	bad := func(err error) (cell, error) {
		return nil, fmt.Errorf("%w: %q is not a valid %s: %v", ErrInvalidValue, clip(s), f.Type, unwrapNum(err))
	}
	switch t := f.Type.(type) {
	case *arrow.StringType:
		return appendCell(s), nil
	case *arrow.LargeStringType:
		return appendCell(s), nil
	case *arrow.BooleanType:
		v, err := strconv.ParseBool(s)
		if err != nil {
			return bad(err)
		}
		return appendCell(v), nil
	case *arrow.Int8Type:
		return intCell[int8](s, 8, bad)
	case *arrow.Int16Type:
		return intCell[int16](s, 16, bad)
	case *arrow.Int32Type:
		return intCell[int32](s, 32, bad)
	case *arrow.Int64Type:
		return intCell[int64](s, 64, bad)
	case *arrow.Uint8Type:
		return uintCell[uint8](s, 8, bad)
	case *arrow.Uint16Type:
		return uintCell[uint16](s, 16, bad)
	case *arrow.Uint32Type:
		return uintCell[uint32](s, 32, bad)
	case *arrow.Uint64Type:
		return uintCell[uint64](s, 64, bad)
	case *arrow.Float32Type:
		v, err := strconv.ParseFloat(s, 32)
		if err != nil {
			return bad(err)
		}
		return appendCell(float32(v)), nil
	case *arrow.Float64Type:
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return bad(err)
		}
		return appendCell(v), nil
	case *arrow.TimestampType:
		tm, err := parseTime(s)
		if err != nil {
			return bad(err)
		}
		ts, err := arrow.TimestampFromTime(tm, t.Unit)
		if err != nil {
			return bad(err)
		}
		return appendCell(ts), nil
	case *arrow.Date32Type:
		tm, err := time.Parse(time.DateOnly, s)
		if err != nil {
			return bad(fmt.Errorf("want YYYY-MM-DD"))
		}
		return appendCell(arrow.Date32FromTime(tm)), nil
	}
	return nil, fmt.Errorf("%w: a column of type %s cannot be set from text", ErrInvalidValue, f.Type)
}

// parseTime accepts RFC 3339 or an integer count of microseconds since the
// Unix epoch.
func parseTime(s string) (time.Time, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMicro(n).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("want RFC 3339 (2006-01-02T15:04:05Z) or unix microseconds")
	}
	return t, nil
}

func intCell[T int8 | int16 | int32 | int64](s string, bits int, bad func(error) (cell, error)) (cell, error) {
	v, err := strconv.ParseInt(s, 10, bits)
	if err != nil {
		return bad(err)
	}
	return appendCell(T(v)), nil
}

func uintCell[T uint8 | uint16 | uint32 | uint64](s string, bits int, bad func(error) (cell, error)) (cell, error) {
	v, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		return bad(err)
	}
	return appendCell(T(v)), nil
}

// unwrapNum drops strconv's repetition of the input ("strconv.ParseInt:
// parsing "x": invalid syntax" → "invalid syntax").
func unwrapNum(err error) error {
	if ne, ok := err.(*strconv.NumError); ok {
		return ne.Err
	}
	return err
}

// clip keeps user values in error messages short.
func clip(s string) string {
	const n = 80
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
