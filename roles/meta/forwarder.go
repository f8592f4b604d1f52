package meta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/roles/meta/cluster"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// forwardedKey marks a call that a follower forwarded. A node that gets a
// forwarded mutation and does not lead answers Unavailable instead of
// forwarding it again, so two nodes with stale views of the leader never
// bounce a call between them.
const forwardedKey = "lake-forwarded"

func forwarded(ctx context.Context) bool {
	md, ok := metadata.FromIncomingContext(ctx)
	return ok && len(md.Get(forwardedKey)) > 0
}

// forwarder passes a follower's mutations to the leader. Every mutation
// that a node which cannot commit receives goes through do: DoPut appends
// as their frames (put), actions the wire table marks as mutations as
// they came (action), and the Go API's Append and CreateTable (append,
// and CreateTable through action). do alone finds the leader, refuses to
// forward a forwarded call again, marks the call, bounds it by the
// forward timeout and maps the leader's silence to Unavailable.
type forwarder struct {
	coord   cluster.Coordinator
	dial    flightrpc.DialOptions
	timeout time.Duration
	peers   peerClients
}

// do runs call against the current leader with a context marked as
// forwarded and bounded by the forward timeout. The leader's status comes
// back as it is.
func (f *forwarder) do(ctx context.Context, call func(ctx context.Context, leader flight.Client) error) error {
	return f.doFor(ctx, f.timeout, call)
}

// doFor is do bounded by timeout instead (0: by ctx alone, for the
// actions wire.Actions marks Long).
func (f *forwarder) doFor(ctx context.Context, timeout time.Duration, call func(ctx context.Context, leader flight.Client) error) error {
	if forwarded(ctx) {
		return errNotLeading
	}
	leader := f.coord.Leader()
	if leader == "" || leader == f.coord.Self() {
		return fmt.Errorf("%w: no metadata leader is known right now (an election may be in progress)", wire.ErrNotLeader)
	}
	fc, err := f.peers.get(leader, f.dial)
	if err != nil {
		return fmt.Errorf("%w: connect to the leader %s: %v", wire.ErrNotLeader, leader, err)
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	ctx = metadata.AppendToOutgoingContext(ctx, forwardedKey, f.coord.Self())
	return forwardErr(call(ctx, fc))
}

// put passes an append's frames to the leader as they are (never decoding
// its records; the leader validates them) and returns its results.
func (f *forwarder) put(ctx context.Context, frames []*flight.FlightData) ([]*flight.PutResult, error) {
	var results []*flight.PutResult
	err := f.do(ctx, func(ctx context.Context, fc flight.Client) (err error) {
		results, err = flightrpc.SendPut(ctx, fc, frames)
		return err
	})
	return results, err
}

// append sends a Go caller's append to the leader. The commit_id travels
// with it, so the caller's retry after an ambiguous failure cannot
// duplicate.
func (f *forwarder) append(ctx context.Context, cmd *lakepb.Append, recs []arrow.RecordBatch) (*lakepb.AppendResult, error) {
	if len(recs) == 0 {
		return nil, wire.ErrEmptyAppend
	}
	var res *lakepb.AppendResult
	err := f.do(ctx, func(ctx context.Context, fc flight.Client) (err error) {
		res, err = flightrpc.Append(ctx, fc, cmd, recs[0].Schema(), recs)
		return err
	})
	return res, err
}

// action passes an action to the leader unchanged and returns all of its
// results.
func (f *forwarder) action(ctx context.Context, action *flight.Action) ([]*flight.Result, error) {
	var results []*flight.Result
	timeout := f.timeout
	if spec, ok := wire.LookupAction(action.GetType()); ok && spec.Long {
		timeout = 0
	}
	err := f.doFor(ctx, timeout, func(ctx context.Context, fc flight.Client) error {
		stream, err := fc.DoAction(ctx, action)
		if err != nil {
			return err
		}
		for {
			r, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			results = append(results, r)
		}
	})
	return results, err
}

func (f *forwarder) close() { f.peers.close() }

// forwardAction passes a mutating action (the table's Mutates,
// wire.Actions) to the leader and returns the leader's results. Its
// handler's afterForward runs once the leader has answered and before the
// caller hears of it, so this node can first catch up with what the
// leader just did.
func (s *Service) forwardAction(ctx context.Context, action *flight.Action, req proto.Message) ([]*flight.Result, error) {
	results, err := s.fwd.action(ctx, action)
	if err != nil {
		return nil, err
	}
	if h := s.handlers[action.GetType()]; h.afterForward != nil {
		h.afterForward(ctx, req)
	}
	return results, nil
}

// forwardCreate is CreateTable on a follower: the same forwarded action a
// Flight caller's lake.table.create becomes.
func (s *Service) forwardCreate(ctx context.Context, name string, schema *arrow.Schema, ifNotExists bool) (*lakepb.TableInfo, error) {
	req := &lakepb.CreateTableRequest{Name: name, Schema: wire.EncodeSchema(schema), IfNotExists: ifNotExists}
	body, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	results, err := s.forwardAction(ctx, &flight.Action{Type: wire.ActionCreateTable, Body: body}, req)
	if err != nil {
		return nil, err
	}
	if len(results) == 0 {
		return nil, fmt.Errorf("meta: the leader answered %s without a result", wire.ActionCreateTable)
	}
	var info lakepb.TableInfo
	if err := proto.Unmarshal(results[0].GetBody(), &info); err != nil {
		return nil, fmt.Errorf("meta: %s result from the leader: %w", wire.ActionCreateTable, err)
	}
	return &info, nil
}

// loadCreated loads a table the leader created for a caller of this
// follower, so that caller's next read here finds it.
func (s *Service) loadCreated(ctx context.Context, name string) {
	if _, err := s.reg.ensure(ctx, name); err != nil {
		s.log.Warn("load a table the leader created", "table", name, "err", err)
	}
}

// forwardErr keeps the leader's status; a leader that cannot be reached
// is Unavailable like any other missing leader.
func forwardErr(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: the leader did not answer in time: %v", wire.ErrNotLeader, err)
	}
	return err
}

// peerClients keeps one Flight client per peer address.
type peerClients struct {
	mu      sync.Mutex
	clients map[string]flight.Client
}

func (p *peerClients) get(addr string, o flightrpc.DialOptions) (flight.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if fc, ok := p.clients[addr]; ok {
		return fc, nil
	}
	fc, err := flightrpc.DialEndpoint(addr, o, flightrpc.FastReconnect())
	if err != nil {
		return nil, err
	}
	if p.clients == nil {
		p.clients = map[string]flight.Client{}
	}
	p.clients[addr] = fc
	return fc, nil
}

func (p *peerClients) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, fc := range p.clients {
		fc.Close()
		delete(p.clients, addr)
	}
}
