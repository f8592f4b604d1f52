package query

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// relay is what the append relay shares across calls: the bytes of frames
// that running appends hold (bounded by Config.RelayBuffer) and the
// schemas of tables appended to lately. Its zero value is ready.
type relay struct {
	held atomic.Int64

	mu      sync.Mutex
	schemas map[string]cachedSchema // table name → schema; only tables meta knows
}

type cachedSchema struct {
	schema  *arrow.Schema
	expires time.Time
}

const (
	// schemaTTL is how long a table's schema is trusted without asking
	// meta. Schemas never change and tables are never dropped, so this
	// only bounds how long a future drop could go unseen here; meta checks
	// every append again in any case.
	schemaTTL = 30 * time.Second
	// maxCachedSchemas bounds the cache; when full it starts over.
	maxCachedSchemas = 1024
)

// admitAppend refuses an append from its first message alone, before any
// record batch is read: a malformed command, an unknown table (NotFound)
// or a schema that is not the table's (InvalidArgument). Only tables that
// exist are cached, so a table created right after a refused append is
// seen by the next one.
func (s *Service) admitAppend(ctx context.Context, cmd *lakepb.Append, first *flight.FlightData) error {
	if err := wire.ValidateAppend(cmd); err != nil {
		return err
	}
	incoming, err := firstSchema(first)
	if err != nil {
		return err
	}
	table, err := s.tableSchema(ctx, cmd.GetTable())
	if err != nil {
		return err
	}
	return wire.CheckAppendSchema(table, incoming)
}

// firstSchema decodes the IPC schema message that Flight sends in the
// data_header of a DoPut's first message, next to the descriptor. The
// bytes come from the caller, so they go through wire's hardened decoder,
// which wants them framed as an IPC stream.
func firstSchema(first *flight.FlightData) (*arrow.Schema, error) {
	h := first.GetDataHeader()
	if len(h) == 0 {
		return nil, fmt.Errorf("%w: the first message carries no schema", wire.ErrMalformedCommand)
	}
	framed := make([]byte, 8+len(h))
	binary.LittleEndian.PutUint32(framed, 0xFFFFFFFF)
	binary.LittleEndian.PutUint32(framed[4:], uint32(len(h)))
	copy(framed[8:], h)
	return wire.DecodeSchema(framed)
}

// tableSchema is the schema of table name, from the cache or from meta.
func (s *Service) tableSchema(ctx context.Context, name string) (*arrow.Schema, error) {
	if sc := s.relay.cached(name, time.Now()); sc != nil {
		return sc, nil
	}
	var info lakepb.TableInfo
	if err := s.meta.Action(ctx, wire.ActionDescribeTable, &lakepb.DescribeTableRequest{Name: name}, &info); err != nil {
		return nil, err // meta's status (NotFound, Unavailable, …) as it is
	}
	sc, err := wire.DecodeSchema(info.GetSchema())
	if err != nil {
		// Meta's own answer is broken: not the caller's fault (Internal).
		return nil, fmt.Errorf("query: the schema meta sent for %q: %v", name, err)
	}
	s.relay.remember(name, sc, time.Now())
	return sc, nil
}

func (r *relay) cached(name string, now time.Time) *arrow.Schema {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.schemas[name]
	if !ok || now.After(c.expires) {
		return nil
	}
	return c.schema
}

func (r *relay) remember(name string, sc *arrow.Schema, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.schemas == nil || len(r.schemas) >= maxCachedSchemas {
		r.schemas = make(map[string]cachedSchema)
	}
	r.schemas[name] = cachedSchema{schema: sc, expires: now.Add(schemaTTL)}
}

// forget drops name from the cache, after meta refused an append to it.
func (r *relay) forget(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.schemas, name)
}

// take reserves n bytes of the budget limit, or reports that they do not
// fit beside what the other appends hold.
func (r *relay) take(n, limit int64) bool {
	for {
		held := r.held.Load()
		if held+n > limit {
			return false
		}
		if r.held.CompareAndSwap(held, held+n) {
			return true
		}
	}
}

func (r *relay) give(n int64) { r.held.Add(-n) }

// budgetedStream charges every frame it receives to the relay's budget
// and fails the read when the frame does not fit, so an append that would
// push the relay over its budget stops there and drops what it read. The
// frame that did not fit has already been received: the budget can be
// passed by at most one message per running append.
type budgetedStream struct {
	stream flight.DataStreamReader
	r      *relay
	limit  int64
	held   int64 // bytes this append holds; given back by release
}

func (b *budgetedStream) charge(m *flight.FlightData) error {
	n := int64(len(m.GetDataHeader()) + len(m.GetDataBody()) + len(m.GetAppMetadata()))
	if !b.r.take(n, b.limit) {
		return fmt.Errorf("%w: the appends in flight hold %d of %d bytes; retry later, or send smaller appends",
			ErrRelayFull, b.r.held.Load(), b.limit)
	}
	b.held += n
	return nil
}

func (b *budgetedStream) Recv() (*flight.FlightData, error) {
	m, err := b.stream.Recv()
	if err != nil {
		return nil, err
	}
	if err := b.charge(m); err != nil {
		return nil, err
	}
	return m, nil
}

func (b *budgetedStream) release() {
	b.r.give(b.held)
	b.held = 0
}
