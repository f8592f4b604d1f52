//go:build duckdb_arrow

package query

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	bindings "github.com/duckdb/duckdb-go-bindings"
	"github.com/duckdb/duckdb-go/v2"
	"github.com/duckdb/duckdb-go/v2/arrowmapping"
	"github.com/duckdb/duckdb-go/v2/mapping"
)

// arrowQuery runs q and returns its result as Arrow record batches, in
// the chunks DuckDB produces them.
//
// duckdb-go's Arrow interface (Arrow.QueryContext) executes through
// duckdb_pending_prepared, a materialized result: DuckDB runs the whole
// query and holds every row before the first batch leaves, so SELECT * of
// a large table costs its full size in memory, outside DuckDB's
// memory_limit, and the client waits for the last row before it sees the
// first. duckdb-go has no streaming path, so the role runs the statement
// itself on the connection's native handle with
// duckdb_pending_prepared_streaming: DuckDB then executes only as far as
// its small result buffer (streaming_buffer_size) ahead of the reader, and
// a slow Flight client holds the query back rather than piling rows up.
//
// The statement is not interrupted here; the caller interrupts the
// connection when the statement's context ends (interruptOnDone), and a
// fetch then fails with DuckDB's interrupt error.
func arrowQuery(ctx context.Context, conn *duckdb.Conn, q string) (array.RecordReader, error) {
	h, ok := nativeConn(conn)
	if !ok {
		return materializedQuery(ctx, conn, q)
	}
	r, err := streamQuery(ctx, h, q)
	if err != nil {
		return nil, sqlError(err)
	}
	return r, nil
}

// materializedQuery is duckdb-go's own Arrow interface, used only if the
// native handle cannot be found (TestInterruptHandleFound fails then).
func materializedQuery(ctx context.Context, conn *duckdb.Conn, q string) (array.RecordReader, error) {
	ar, err := duckdb.NewArrowFromConn(conn)
	if err != nil {
		return nil, err
	}
	rdr, err := ar.QueryContext(ctx, q)
	if err != nil {
		return nil, sqlError(err)
	}
	return rdr, nil
}

func streamQuery(ctx context.Context, h mapping.Connection, q string) (*streamReader, error) {
	r := &streamReader{ctx: ctx}
	r.refs.Store(1)
	if mapping.Prepare(h, q, &r.stmt) == mapping.StateError {
		err := duckdbError(mapping.PrepareError(r.stmt))
		mapping.DestroyPrepare(&r.stmt)
		return nil, err
	}
	var pending mapping.PendingResult
	if bindings.PendingPreparedStreaming(r.stmt, &pending) == mapping.StateError {
		err := duckdbError(mapping.PendingError(pending))
		mapping.DestroyPending(&pending)
		mapping.DestroyPrepare(&r.stmt)
		return nil, err
	}
	state := mapping.ExecutePending(pending, &r.res)
	mapping.DestroyPending(&pending)
	if state == mapping.StateError {
		err := errors.Join(ctx.Err(), resultError(&r.res))
		mapping.DestroyResult(&r.res)
		mapping.DestroyPrepare(&r.stmt)
		return nil, err
	}
	r.opts = arrowmapping.ResultGetArrowOptions(&r.res)
	n := mapping.ColumnCount(&r.res)
	names := make([]string, n)
	types := make([]mapping.LogicalType, n)
	for i := range n {
		names[i] = mapping.ColumnName(&r.res, i)
		types[i] = mapping.ColumnLogicalType(&r.res, i)
	}
	schema, ed := arrowmapping.NewArrowSchema(r.opts, types, names)
	for i := range types {
		mapping.DestroyLogicalType(&types[i])
	}
	if err := errorData(ed); err != nil {
		r.free()
		return nil, fmt.Errorf("arrow schema of the result: %w", err)
	}
	r.schema = schema
	return r, nil
}

// streamReader is a RecordReader over a streaming DuckDB result. It is
// read by one goroutine (Service.run); Release may come from another
// only after reading stopped.
type streamReader struct {
	ctx    context.Context
	stmt   mapping.PreparedStatement
	res    mapping.Result
	opts   arrowmapping.ArrowOptions
	schema *arrow.Schema
	cur    arrow.RecordBatch
	err    error
	done   bool
	refs   atomic.Int64
}

func (r *streamReader) Schema() *arrow.Schema { return r.schema }

func (r *streamReader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.done || r.err != nil {
		return false
	}
	if err := r.ctx.Err(); err != nil {
		r.err = err
		return false
	}
	chunk := mapping.FetchChunk(r.res)
	if chunk.Ptr == nil {
		// The end of the result, or an error (interrupt, out of
		// memory) that DuckDB left on the result.
		r.done = true
		if msg := mapping.ResultError(&r.res); msg != "" {
			r.err = resultError(&r.res)
		}
		return false
	}
	defer mapping.DestroyDataChunk(&chunk)
	rec, ed := arrowmapping.DataChunkToArrowArray(r.opts, r.schema, chunk)
	if err := errorData(ed); err != nil {
		r.err = fmt.Errorf("arrow batch of the result: %w", err)
		return false
	}
	r.cur = rec
	return true
}

func (r *streamReader) RecordBatch() arrow.RecordBatch { return r.cur }

// Record is RecordBatch under its deprecated name.
func (r *streamReader) Record() arrow.RecordBatch { return r.cur }

func (r *streamReader) Err() error { return r.err }

func (r *streamReader) Retain() { r.refs.Add(1) }

func (r *streamReader) Release() {
	if r.refs.Add(-1) == 0 {
		if r.cur != nil {
			r.cur.Release()
			r.cur = nil
		}
		r.free()
	}
}

// free destroys the result before the statement it came from.
func (r *streamReader) free() {
	arrowmapping.DestroyArrowOptions(&r.opts)
	mapping.DestroyResult(&r.res)
	mapping.DestroyPrepare(&r.stmt)
}

// resultError is the error DuckDB left on res, typed as duckdb-go types
// its own, so sqlError recognises running out of memory.
func resultError(res *mapping.Result) error {
	return &duckdb.Error{Type: duckdb.ErrorType(mapping.ResultErrorType(res)), Msg: mapping.ResultError(res)}
}

// duckdbError is an error DuckDB reported as text; sqlError reads its
// prefix ("Out of Memory Error: …").
func duckdbError(msg string) error {
	return &duckdb.Error{Type: duckdb.ErrorTypeInvalid, Msg: msg}
}

func errorData(ed mapping.ErrorData) error {
	defer mapping.DestroyErrorData(&ed)
	if !mapping.ErrorDataHasError(ed) {
		return nil
	}
	return &duckdb.Error{Type: duckdb.ErrorType(mapping.ErrorDataErrorType(ed)), Msg: mapping.ErrorDataMessage(ed)}
}

// errNoArrow is nil: this build can answer SQL.
var errNoArrow error
