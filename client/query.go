package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Query runs a read-only SQL statement through Flight SQL and streams its
// result. The endpoints of the result are read one after another over the
// same connection (the query role serves its own tickets). Release the
// reader when done; cancelling ctx aborts the stream.
func (c *Client) Query(ctx context.Context, sql string) (array.RecordReader, error) {
	ctx, cancel := context.WithCancel(ctx)
	info, err := c.sql.Execute(ctx, sql)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("client: query: %w", remoteError(err))
	}
	r := &queryReader{refs: 1, ctx: ctx, cancel: cancel, c: c, endpoints: info.GetEndpoint()}
	if len(info.GetSchema()) > 0 {
		if r.schema, err = flight.DeserializeSchema(info.GetSchema(), memory.DefaultAllocator); err != nil {
			cancel()
			return nil, fmt.Errorf("client: query: result schema: %w", err)
		}
	}
	// Open the first stream now: errors surface here, and a result without
	// a schema in its FlightInfo takes the stream's.
	if len(r.endpoints) > 0 {
		if err := r.open(); err != nil {
			cancel()
			return nil, fmt.Errorf("client: query: %w", err)
		}
	}
	if r.schema == nil {
		r.schema = arrow.NewSchema(nil, nil)
	}
	return r, nil
}

// queryReader concatenates the streams of a result's endpoints.
type queryReader struct {
	refs      int64
	ctx       context.Context
	cancel    context.CancelFunc
	c         *Client
	endpoints []*flight.FlightEndpoint
	next      int // index of the next endpoint to open
	schema    *arrow.Schema
	cur       *flight.Reader
	err       error
}

var _ array.RecordReader = (*queryReader)(nil)

// open starts the stream of the next endpoint.
func (r *queryReader) open() error {
	ep := r.endpoints[r.next]
	r.next++
	rdr, err := r.c.sql.DoGet(r.ctx, ep.GetTicket())
	if err != nil {
		return remoteError(err)
	}
	if r.schema == nil {
		r.schema = rdr.Schema()
	} else if !r.schema.Equal(rdr.Schema()) {
		rdr.Release()
		return fmt.Errorf("endpoint %d streams schema %s, the result has %s", r.next-1, rdr.Schema(), r.schema)
	}
	r.cur = rdr
	return nil
}

func (r *queryReader) Schema() *arrow.Schema { return r.schema }

// Next advances to the next batch, moving on to the next endpoint when
// one stream ends.
func (r *queryReader) Next() bool {
	for r.err == nil {
		if r.cur != nil {
			if r.cur.Next() {
				return true
			}
			err := r.cur.Err()
			r.cur.Release()
			r.cur = nil
			if err != nil && !errors.Is(err, io.EOF) {
				r.err = remoteError(err)
				return false
			}
		}
		if r.next >= len(r.endpoints) {
			return false
		}
		if err := r.open(); err != nil {
			r.err = err
		}
	}
	return false
}

// RecordBatch is valid until the next call to Next.
func (r *queryReader) RecordBatch() arrow.RecordBatch {
	if r.cur == nil {
		return nil
	}
	return r.cur.RecordBatch()
}

// Record is RecordBatch (array.RecordReader still requires it).
func (r *queryReader) Record() arrow.RecordBatch { return r.RecordBatch() }

func (r *queryReader) Err() error { return r.err }

func (r *queryReader) Retain() { atomic.AddInt64(&r.refs, 1) }

func (r *queryReader) Release() {
	if atomic.AddInt64(&r.refs, -1) != 0 {
		return
	}
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	r.cancel()
}
