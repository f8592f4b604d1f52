package meta

import (
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// table is the in-memory state of one table. Its committer and the
// registry's catch-up change it, under writeMu; readers take mu.
type table struct {
	id        string
	name      string
	schema    *arrow.Schema
	schemaRaw []byte
	fileCols  []int // the schema's FILE columns, by position
	createdAt time.Time
	commits   *committer // takes every change to the table
	compactMu sync.Mutex // one rewrite of the table's files (compaction, delete) at a time

	// writeMu is held while the index of this table changes: by the
	// committer while it admits and commits one version, by the registry's
	// catch-up.
	writeMu sync.Mutex

	mu   sync.Mutex
	base int64 // version of the index's base checkpoint (tableRow.Base)
	// retainFrom is the oldest version that can be read (expire.go).
	retainFrom int64
	head       int64
	// headAt is when head committed (Unix µs); 0 until known (a table
	// loaded from the index learns it at its first snapshot).
	headAt int64
	files  []*lakepb.DataFile // data files of the head version, in order
	rows   int64              // rows of the head version
}

func (t *table) row() tableRow {
	t.mu.Lock()
	defer t.mu.Unlock()
	return tableRow{ID: t.id, Name: t.name, Schema: t.schemaRaw, CreatedAt: t.createdAt, Head: t.head, Base: t.base}
}

func (t *table) info() *lakepb.TableInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	return &lakepb.TableInfo{
		Name: t.name, Id: t.id, Schema: t.schemaRaw, Version: t.head,
		CreatedAtUnixMicros: t.createdAt.UnixMicro(), Rows: t.rows, DataFiles: int64(len(t.files)),
	}
}

// advance moves the in-memory head past applied log records and returns
// by how many versions it moved.
func (t *table) advance(recs []*logRecord) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	before := t.head
	for _, r := range recs {
		if r.Version <= t.head {
			continue
		}
		t.files = r.applyFiles(t.files)
		t.rows += r.Rows
		t.head, t.headAt = r.Version, r.CommittedAt.UnixMicro()
		t.retainFrom = max(t.retainFrom, r.RetainFrom)
	}
	return t.head - before
}

// jump sets the in-memory state to checkpoint c, the index's new base,
// when c is past the head, and returns by how many versions the head
// moved.
func (t *table) jump(c *checkpointRecord) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.base = max(t.base, c.Version)
	if c.Version <= t.head {
		return 0
	}
	before := t.head
	t.head, t.headAt, t.files, t.rows = c.Version, c.CommittedAt.UnixMicro(), c.protoFiles(), c.Rows
	t.retainFrom = max(t.retainFrom, c.RetainFrom)
	return t.head - before
}

// fileColumns returns the positions of schema's FILE columns.
func fileColumns(schema *arrow.Schema) []int {
	var cols []int
	for i, f := range schema.Fields() {
		if wire.IsFileField(f) {
			cols = append(cols, i)
		}
	}
	return cols
}
