// Package errtest makes a lake service fail chosen calls with a chosen
// sentinel of wire's error table, over real gRPC, for the tests of the
// error contract: every sentinel must come back to the caller under
// errors.Is, straight from meta, through the query relay and through a
// follower that forwards to the leader, including those that no real
// call can produce yet (PermissionDenied, VersionExpired, …).
//
// ServerOption goes into the ServerOptions of the node that should fail
// (meta behind a query node, the leader behind a follower). That node then
// fails a lake.table.create of TableName(reason) and a FILE append whose
// commit id is CommitID(reason) with the sentinel of reason, returned
// where the service's own code gets its request, so the service maps it
// with wire.ToStatus as it maps its own errors. Every other call is
// untouched.
package errtest

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

const (
	tablePrefix  = "errtest_"
	commitPrefix = "errtest:"
)

// TableName is a valid table name whose creation fails with the sentinel
// of reason.
func TableName(reason string) string { return tablePrefix + strings.ToLower(reason) }

// CommitID is a valid commit id whose append fails with the sentinel of
// reason.
func CommitID(reason string) string { return commitPrefix + reason }

// ServerOption installs the failing interceptor on a gRPC server.
func ServerOption() grpc.ServerOption { return grpc.ChainStreamInterceptor(intercept) }

func intercept(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	s := &stream{ServerStream: ss}
	err := handler(srv, s)
	if s.failed {
		// A DoPut handler has mapped the error itself (ToStatus keeps
		// that status); a DoAction handler returns what its first
		// RecvMsg said before the service sees the call, so the mapping
		// every role applies is applied here.
		return wire.ToStatus(err)
	}
	return err
}

// stream fails the first message of a call that asks for it.
type stream struct {
	grpc.ServerStream
	seen, failed bool
}

func (s *stream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if s.seen {
		return nil
	}
	s.seen = true
	if err := failure(m); err != nil {
		s.failed = true
		return err
	}
	return nil
}

// failure is the error that message m asks for, or nil.
func failure(m any) error {
	switch m := m.(type) {
	case *flight.FlightData:
		cmd, err := wire.DecodeAppendDescriptor(m.GetFlightDescriptor())
		if err != nil {
			return nil
		}
		if reason, ok := strings.CutPrefix(cmd.GetCommitId(), commitPrefix); ok {
			return sentinel(reason)
		}
	case *flight.Action:
		if m.GetType() != wire.ActionCreateTable {
			return nil
		}
		var req lakepb.CreateTableRequest
		if proto.Unmarshal(m.GetBody(), &req) != nil {
			return nil
		}
		if reason, ok := strings.CutPrefix(req.GetName(), tablePrefix); ok {
			return sentinel(strings.ToUpper(reason))
		}
	}
	return nil
}

func sentinel(reason string) error {
	for _, e := range wire.ErrorTable() {
		if e.Reason == reason {
			return fmt.Errorf("errtest: %w", e.Err)
		}
	}
	return nil
}
