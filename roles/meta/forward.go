package meta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/metadata"

	"github.com/lakedata/lake/internal/flightrpc"
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

// leaderClient returns a client for the current leader and a context for
// one forwarded call to it.
func (s *Service) leaderClient(ctx context.Context) (flight.Client, context.Context, context.CancelFunc, error) {
	if forwarded(ctx) {
		return nil, nil, nil, errNotLeading
	}
	leader := s.cluster.Leader()
	if leader == "" || leader == s.cluster.Self() {
		return nil, nil, nil, fmt.Errorf("%w: no metadata leader is known right now (an election may be in progress)", wire.ErrNotLeader)
	}
	fc, err := s.peers.get(leader, s.cfg.PeerDial)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: connect to the leader %s: %v", wire.ErrNotLeader, leader, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ForwardTimeout)
	ctx = metadata.AppendToOutgoingContext(ctx, forwardedKey, s.cluster.Self())
	return fc, ctx, cancel, nil
}

// forwardAppend sends an append to the leader. The commit_id travels with
// it, so the caller's retry after an ambiguous failure cannot duplicate.
func (s *Service) forwardAppend(ctx context.Context, cmd *lakepb.Append, recs []arrow.RecordBatch) (*lakepb.AppendResult, error) {
	if len(recs) == 0 {
		return nil, wire.ErrEmptyAppend
	}
	fc, fctx, cancel, err := s.leaderClient(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	res, err := flightrpc.Append(fctx, fc, cmd, recs[0].Schema(), recs)
	if err != nil {
		return nil, forwardErr(err)
	}
	return res, nil
}

// forwardFrames passes an append's frames to the leader without decoding
// its records (the leader validates them) and returns its results.
func (s *Service) forwardFrames(ctx context.Context, stream flight.DataStreamReader, first *flight.FlightData) ([]*flight.PutResult, error) {
	frames, err := flightrpc.ReadPut(stream, first, s.cfg.MaxAppendBytes)
	if err != nil {
		return nil, err
	}
	fc, fctx, cancel, err := s.leaderClient(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	results, err := flightrpc.SendPut(fctx, fc, frames)
	if err != nil {
		return nil, forwardErr(err)
	}
	return results, nil
}

// forwardCreate creates a table through the leader, then loads it here so
// the caller's next read on this node finds it.
func (s *Service) forwardCreate(ctx context.Context, name string, schema *arrow.Schema, ifNotExists bool) (*lakepb.TableInfo, error) {
	fc, fctx, cancel, err := s.leaderClient(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	req := &lakepb.CreateTableRequest{Name: name, Schema: wire.EncodeSchema(schema), IfNotExists: ifNotExists}
	var info lakepb.TableInfo
	if err := flightrpc.Action(fctx, fc, wire.ActionCreateTable, req, &info); err != nil {
		return nil, forwardErr(err)
	}
	s.loadCreated(ctx, name)
	return &info, nil
}

// loadCreated loads a table the leader created for a caller of this
// follower, so that caller's next read here finds it.
func (s *Service) loadCreated(ctx context.Context, name string) {
	if _, err := s.reg.ensure(ctx, name); err != nil {
		s.log.Warn("load a table the leader created", "table", name, "err", err)
	}
}

// forwardAction passes a mutating action to the leader unchanged (the
// table's Mutates, wire.Actions) and the leader's results to send. after
// runs once the leader has answered and before the caller hears of it, so
// a follower can first catch up with what the leader just did.
func (s *Service) forwardAction(ctx context.Context, action *flight.Action, send func(*flight.Result) error, after func()) error {
	fc, fctx, cancel, err := s.leaderClient(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	stream, err := fc.DoAction(fctx, action)
	if err != nil {
		return forwardErr(err)
	}
	var results []*flight.Result
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return forwardErr(err)
		}
		results = append(results, r)
	}
	after()
	for _, r := range results {
		if err := send(r); err != nil {
			return err
		}
	}
	return nil
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
