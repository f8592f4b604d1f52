// Package wiretest builds wire values for tests: records of the default
// table schema (name, file, created_at) whose rows name stage objects.
package wiretest

import (
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lakedata/lake/wire"
)

// FileRows returns one record of wire.DefaultSchema with a row per value:
// names[i], values[i] and the current time. The caller releases it.
func FileRows(names []string, values []wire.FileValue) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, wire.DefaultSchema())
	defer b.Release()
	now := arrow.Timestamp(time.Now().UnixMicro())
	for i, v := range values {
		b.Field(0).(*array.StringBuilder).Append(names[i])
		wire.AppendFileValue(b.Field(1).(*array.StructBuilder), v)
		b.Field(2).(*array.TimestampBuilder).Append(now)
	}
	return b.NewRecordBatch()
}

// FileRow is FileRows with one row.
func FileRow(name string, v wire.FileValue) arrow.RecordBatch {
	return FileRows([]string{name}, []wire.FileValue{v})
}
