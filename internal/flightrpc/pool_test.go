package flightrpc_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	flightgen "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/lakedata/lake/internal/flightrpc"
)

// node answers every action with its name, or with err when set, and
// counts the calls it got.
type node struct {
	flight.BaseFlightServer
	name  string
	err   atomic.Pointer[error]
	calls atomic.Int64
}

func (n *node) DoAction(_ *flight.Action, stream flight.FlightService_DoActionServer) error {
	n.calls.Add(1)
	if e := n.err.Load(); e != nil {
		return *e
	}
	raw, err := proto.Marshal(&wrapperspb.StringValue{Value: n.name})
	if err != nil {
		return err
	}
	return stream.Send(&flight.Result{Body: raw})
}

func serveNode(t *testing.T, n *node) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	flightgen.RegisterFlightServiceServer(srv, n)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return lis.Addr().String()
}

func (n *node) fail(code codes.Code) {
	err := status.Error(code, n.name+" refuses")
	n.err.Store(&err)
}

func TestPoolFailsOverOnUnavailableOnly(t *testing.T) {
	a, b := &node{name: "a"}, &node{name: "b"}
	pool, err := flightrpc.DialPool(serveNode(t, a)+", "+serveNode(t, b), flightrpc.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx := context.Background()
	who := func() (string, error) {
		var v wrapperspb.StringValue
		err := pool.Action(ctx, "who", &wrapperspb.StringValue{}, &v)
		return v.GetValue(), err
	}
	if got, err := who(); err != nil || got != "a" {
		t.Fatalf("first call answered by %q (%v), want a", got, err)
	}
	// a is unavailable: the call goes on to b, and b stays current.
	a.fail(codes.Unavailable)
	if got, err := who(); err != nil || got != "b" {
		t.Fatalf("with a unavailable: %q, %v; want b", got, err)
	}
	aCalls := a.calls.Load()
	if got, err := who(); err != nil || got != "b" || a.calls.Load() != aCalls {
		t.Fatalf("after failing over: %q, %v, a called again: %v", got, err, a.calls.Load() != aCalls)
	}
	// An answer that is not about availability is final: no failover.
	b.fail(codes.NotFound)
	if _, err := who(); status.Code(err) != codes.NotFound || a.calls.Load() != aCalls {
		t.Fatalf("NotFound from b: %v (a called: %v); want NotFound without trying a", err, a.calls.Load() != aCalls)
	}
	// Every node unavailable: the last error comes back.
	b.fail(codes.Unavailable)
	if _, err := who(); status.Code(err) != codes.Unavailable {
		t.Fatalf("all unavailable: %v", err)
	}
}

// A node that accepts connections but never answers costs one
// AttemptTimeout, then the next node answers.
func TestPoolSkipsAFrozenNode(t *testing.T) {
	frozen, err := net.Listen("tcp", "127.0.0.1:0") // accepts (backlog), never speaks
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Close()
	b := &node{name: "b"}
	pool, err := flightrpc.DialPool(frozen.Addr().String()+","+serveNode(t, b), flightrpc.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	pool.AttemptTimeout = 200 * time.Millisecond
	var v wrapperspb.StringValue
	start := time.Now()
	if err := pool.Action(context.Background(), "who", &wrapperspb.StringValue{}, &v); err != nil || v.GetValue() != "b" {
		t.Fatalf("answer %q, %v; want b", v.GetValue(), err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("failing over from the frozen node took %v", took)
	}
}

func TestDialPoolRejectsAnEmptyList(t *testing.T) {
	if _, err := flightrpc.DialPool(" , ", flightrpc.DialOptions{}); err == nil {
		t.Fatal("an empty endpoint list was accepted")
	}
}

// DoLong bounds a call by its context only: a call that outlasts
// AttemptTimeout fails under Do and succeeds under DoLong.
func TestDoLongOutlastsTheAttemptTimeout(t *testing.T) {
	p, err := flightrpc.DialPool("127.0.0.1:1", flightrpc.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.AttemptTimeout = 20 * time.Millisecond
	slow := func(ctx context.Context, _ flight.Client) error {
		select {
		case <-time.After(200 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := p.Do(context.Background(), slow); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Do: %v, want the attempt's deadline", err)
	}
	if err := p.DoLong(context.Background(), slow); err != nil {
		t.Errorf("DoLong: %v", err)
	}
}
