//go:build duckdb_arrow

package query_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/objects/local"
	"github.com/lakedata/lake/roles/meta"
	"github.com/lakedata/lake/roles/query"
	"github.com/lakedata/lake/wire"
)

// seenActions records the action types a server received.
type seenActions struct {
	mu    sync.Mutex
	names []string
}

func (s *seenActions) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.names
	s.names = nil
	return out
}

func (s *seenActions) option() grpc.ServerOption {
	return grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return handler(srv, &seeingStream{ServerStream: ss, s: s})
	})
}

type seeingStream struct {
	grpc.ServerStream
	s *seenActions
}

func (ss *seeingStream) RecvMsg(m any) error {
	err := ss.ServerStream.RecvMsg(m)
	if a, ok := m.(*flight.Action); ok && err == nil {
		ss.s.mu.Lock()
		ss.s.names = append(ss.s.names, a.GetType())
		ss.s.mu.Unlock()
	}
	return err
}

// TestEveryActionRelayedOrAnswered sends every action of wire.Actions to
// the query endpoint over Flight: the ones the table says the query role
// answers never reach meta, every other one reaches meta unchanged, and
// each answer has the table's shape. ListActions lists the table first.
func TestEveryActionRelayedOrAnswered(t *testing.T) {
	var atMeta seenActions
	l := newLakeTuned(t, func(_ *local.Store, m *meta.Config, _ *query.Config) {
		m.ServerOptions = append(m.ServerOptions, atMeta.option())
	})
	l.createTable("clips", wire.DefaultSchema())
	v, _ := l.putFile("clips", "a.mp4", []byte("frames"))
	ctx := context.Background()
	for _, a := range wire.Actions() {
		t.Run(a.Name, func(t *testing.T) {
			req := wiretest.ActionRequest(a.Name, "clips", "fresh", v.Key)
			if req == nil {
				t.Fatal("no request for this action in wiretest.ActionRequest")
			}
			body, err := proto.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			atMeta.take()
			stream, err := l.fc.DoAction(ctx, &flight.Action{Type: a.Name, Body: body})
			if err != nil {
				t.Fatal(err)
			}
			var n int
			for {
				r, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				n++
				if err := proto.Unmarshal(r.GetBody(), a.Response.New().Interface()); err != nil {
					t.Fatalf("result is no %s: %v", a.Response.Descriptor().Name(), err)
				}
			}
			if n == 0 || (!a.Stream && n != 1) {
				t.Fatalf("%d results (stream %t)", n, a.Stream)
			}
			got := atMeta.take()
			if relayed := slices.Equal(got, []string{a.Name}); relayed == a.AnsweredByQuery {
				t.Fatalf("answered by query %t, but meta got %v", a.AnsweredByQuery, got)
			}
		})
	}

	stream, err := l.fc.ListActions(ctx, &flight.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	var listed []*flight.ActionType
	for {
		at, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, at)
	}
	table := wire.Actions()
	if len(listed) <= len(table) {
		t.Fatalf("ListActions lists %d actions: the table's %d and Flight SQL's", len(listed), len(table))
	}
	for i, a := range table {
		at := listed[i]
		relayed := strings.Contains(at.GetDescription(), "relayed to the metadata service")
		if at.GetType() != a.Name || !strings.HasPrefix(at.GetDescription(), a.Description+" (") || relayed == a.AnsweredByQuery {
			t.Errorf("ListActions[%d] = %q %q; want %s, relayed %t", i, at.GetType(), at.GetDescription(), a.Name, !a.AnsweredByQuery)
		}
	}
	for _, at := range listed[len(table):] {
		if strings.HasPrefix(at.GetType(), "lake.") {
			t.Errorf("%s is listed after Flight SQL's actions", at.GetType())
		}
	}
}
