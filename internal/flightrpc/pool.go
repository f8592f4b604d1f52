package flightrpc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Pool is a set of equivalent Flight services, such as the metadata nodes
// of one cluster (a follower forwards mutations to its leader, so any node
// will do). A call goes to the node that answered last and fails over to
// the next when that one is unavailable.
type Pool struct {
	endpoints []string
	clients   []flight.Client
	current   atomic.Int32
	// AttemptTimeout bounds one attempt on one node, so a frozen node
	// (accepting connections, answering nothing) costs one timeout, not
	// a hang. Set it before the first call.
	AttemptTimeout time.Duration
}

// DialPool connects to every endpoint (lazily, as DialEndpoint does).
// endpoints is a comma-separated list or one endpoint.
func DialPool(endpoints string, o DialOptions) (*Pool, error) {
	p := &Pool{AttemptTimeout: 10 * time.Second}
	for _, ep := range strings.Split(endpoints, ",") {
		ep = strings.TrimSpace(ep)
		if ep == "" {
			continue
		}
		fc, err := DialEndpoint(ep, o, FastReconnect())
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("%s: %w", ep, err)
		}
		p.endpoints = append(p.endpoints, ep)
		p.clients = append(p.clients, fc)
	}
	if len(p.clients) == 0 {
		return nil, fmt.Errorf("flight: no endpoint in %q", endpoints)
	}
	return p, nil
}

// FastReconnect caps gRPC's reconnect backoff at one second (its default
// grows to two minutes). Between lake's own services a peer that restarts
// (a meta node after a failover) must be usable again at once: while a
// channel waits out its backoff, every call on it fails.
func FastReconnect() grpc.DialOption {
	return grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
		MinConnectTimeout: 5 * time.Second,
	})
}

// Endpoints lists the pool's endpoints in order.
func (p *Pool) Endpoints() []string { return append([]string(nil), p.endpoints...) }

// Do runs call against the current node and, while the error says the
// node is unavailable (or it did not answer within AttemptTimeout), against
// each other node once. It returns the last error. call must be safe to
// repeat: appends carry their commit_id for exactly that.
func (p *Pool) Do(ctx context.Context, call func(ctx context.Context, fc flight.Client) error) error {
	return p.do(ctx, p.AttemptTimeout, call)
}

// DoLong is Do for a call that may take as long as its work (a garbage
// collection): an attempt is bounded by ctx only, and fails over only
// when a node is unavailable.
func (p *Pool) DoLong(ctx context.Context, call func(ctx context.Context, fc flight.Client) error) error {
	return p.do(ctx, 0, call)
}

func (p *Pool) do(ctx context.Context, attempt time.Duration, call func(ctx context.Context, fc flight.Client) error) error {
	n := len(p.clients)
	start := int(p.current.Load())
	var err error
	for i := range n {
		idx := (start + i) % n
		actx, cancel := ctx, context.CancelFunc(func() {})
		if attempt > 0 {
			actx, cancel = context.WithTimeout(ctx, attempt)
		}
		err = call(actx, p.clients[idx])
		cancel()
		if err == nil {
			p.current.Store(int32(idx))
			return nil
		}
		if ctx.Err() != nil || !failover(err) {
			return err
		}
	}
	return err
}

// failover reports whether another node may succeed where this one failed.
func failover(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// Action runs an Action (see the function Action) with failover.
func (p *Pool) Action(ctx context.Context, actionType string, req, resp proto.Message) error {
	return p.Do(ctx, func(ctx context.Context, fc flight.Client) error {
		return Action(ctx, fc, actionType, req, resp)
	})
}

// Close closes every connection.
func (p *Pool) Close() error {
	var errs []error
	for _, fc := range p.clients {
		errs = append(errs, fc.Close())
	}
	return errors.Join(errs...)
}
