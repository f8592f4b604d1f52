package meta

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/lakedata/lake/internal/etcdtest"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// callAction runs one DoAction and returns every result it sent.
func callAction(fc flight.Client, name string, req proto.Message) ([]*flight.Result, error) {
	body, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	return callRaw(fc, name, body)
}

func callRaw(fc flight.Client, name string, body []byte) ([]*flight.Result, error) {
	stream, err := fc.DoAction(context.Background(), &flight.Action{Type: name, Body: body})
	if err != nil {
		return nil, err
	}
	var out []*flight.Result
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
}

// checkAnswer asserts that results are what the table promises for a: one
// result (or at least one for a stream), each a body of its Response type.
func checkAnswer(t *testing.T, a wire.ActionSpec, results []*flight.Result) {
	t.Helper()
	if len(results) == 0 || (!a.Stream && len(results) != 1) {
		t.Fatalf("%d results (stream %t)", len(results), a.Stream)
	}
	for _, r := range results {
		m := a.Response.New().Interface()
		if err := (proto.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(r.GetBody(), m); err != nil {
			t.Fatalf("result is no %s: %v", a.Response.Descriptor().Name(), err)
		}
		if len(m.ProtoReflect().GetUnknown()) != 0 {
			t.Fatalf("result carries fields %s does not have", a.Response.Descriptor().Name())
		}
	}
}

// TestActionHandlersMatchTable: the metadata service has one handler per
// entry of wire.Actions and none besides.
func TestActionHandlersMatchTable(t *testing.T) {
	h := (&Service{}).actionHandlers()
	for _, a := range wire.Actions() {
		if _, ok := h[a.Name]; !ok {
			t.Errorf("no handler for %s", a.Name)
		}
		delete(h, a.Name)
	}
	for name := range h {
		t.Errorf("a handler for %s, which the action table does not have", name)
	}
}

// TestEveryActionAnswered sends every action of the table to a real
// metadata service over Flight and checks its answer, ListActions, and
// that anything else is refused as before.
func TestEveryActionAnswered(t *testing.T) {
	f := newFixture(t)
	f.createTable("clips")
	if _, err := f.appendOne("clips", "a.mp4", "c1"); err != nil {
		t.Fatal(err)
	}
	key := f.snapshotKey("clips")
	for _, a := range wire.Actions() {
		t.Run(a.Name, func(t *testing.T) {
			req := wiretest.ActionRequest(a.Name, "clips", "fresh", key)
			if req == nil {
				t.Fatal("no request for this action in wiretest.ActionRequest")
			}
			results, err := callAction(f.fc, a.Name, req)
			if err != nil {
				t.Fatal(err)
			}
			checkAnswer(t, a, results)
			// A body that does not decode (field 1 cut short) is refused
			// before any work.
			if _, err := callRaw(f.fc, a.Name, []byte{0x0a, 0x05, 'x'}); status.Code(err) != codes.InvalidArgument {
				t.Errorf("a malformed body: %v, want InvalidArgument", err)
			}
		})
	}
	if _, err := f.describe("fresh", nil); err != nil {
		t.Errorf("the create of the walk did not create: %v", err)
	}

	stream, err := f.fc.ListActions(context.Background(), &flight.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for {
		at, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		a, ok := wire.LookupAction(at.GetType())
		if !ok || at.GetDescription() != a.Summary() {
			t.Errorf("ListActions: %q %q, not the table's", at.GetType(), at.GetDescription())
		}
		listed = append(listed, at.GetType())
	}
	var want []string
	for _, a := range wire.Actions() {
		want = append(want, a.Name)
	}
	if !slices.Equal(listed, want) {
		t.Errorf("ListActions lists %v, want %v", listed, want)
	}

	for _, name := range []string{"lake.table.drop", "", "DoGet"} {
		if _, err := callAction(f.fc, name, &lakepb.ListTablesRequest{}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("action %q: %v, want InvalidArgument", name, err)
		}
	}
}

// forwardedActions records the actions a node received from a follower.
type forwardedActions struct {
	mu    sync.Mutex
	names []string
}

func (r *forwardedActions) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.names)
}

func (r *forwardedActions) option() grpc.ServerOption {
	return grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return handler(srv, &recordingStream{ServerStream: ss, r: r})
	})
}

type recordingStream struct {
	grpc.ServerStream
	r *forwardedActions
}

func (s *recordingStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if a, ok := m.(*flight.Action); ok && err == nil && forwarded(s.Context()) {
		s.r.mu.Lock()
		s.r.names = append(s.r.names, a.GetType())
		s.r.mu.Unlock()
	}
	return err
}

// TestFollowerForwardsMutatingActions: every action the table marks as a
// mutation, sent to a follower, is answered by the leader; every other
// one the follower answers itself.
func TestFollowerForwardsMutatingActions(t *testing.T) {
	etcd := etcdtest.Start(t)
	var onLeader forwardedActions
	leader := newMemberWith(t, etcd.Endpoint, nil, func(f *fixture) { f.opts = []grpc.ServerOption{onLeader.option()} })
	waitFor(t, "the first node to lead", func() bool { return leader.svc.canCommit() })
	follower := newMember(t, etcd.Endpoint, leader)
	waitFor(t, "the follower to learn the leader", func() bool { return follower.svc.cluster.Leader() == leader.listen })

	follower.createTable("clips")
	if _, err := follower.appendOne("clips", "a.mp4", "c1"); err != nil {
		t.Fatal(err)
	}
	// The follower learns of version 1 from the leader's announcement.
	waitFor(t, "the follower to reach version 1", func() bool {
		info, err := follower.describe("clips", nil)
		return err == nil && info.GetVersion() == 1
	})
	before := len(onLeader.list())
	key := leader.snapshotKey("clips")

	for i, a := range wire.Actions() {
		t.Run(a.Name, func(t *testing.T) {
			fresh := "made_" + string(rune('a'+i))
			results, err := callAction(follower.fc, a.Name, wiretest.ActionRequest(a.Name, "clips", fresh, key))
			if err != nil {
				t.Fatal(err)
			}
			checkAnswer(t, a, results)
			got := onLeader.list()[before:]
			before += len(got)
			if a.Mutates != slices.Contains(got, a.Name) {
				t.Fatalf("mutates %t, but the leader got %v from the follower", a.Mutates, got)
			}
			if a.Name == wire.ActionCreateTable {
				if _, err := leader.svc.DescribeTable(context.Background(), fresh, nil); err != nil {
					t.Errorf("the leader does not know the table the follower created: %v", err)
				}
				if _, err := follower.describe(fresh, nil); err != nil {
					t.Errorf("the follower does not know the table it just created: %v", err)
				}
			}
		})
	}
}
