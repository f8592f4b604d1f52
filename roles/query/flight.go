package query

import (
	"context"
	"errors"
	"io"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// endpoint is the query node's Flight face: Flight SQL, with DoPut and
// DoAction taken over for lake's own commands. Flight SQL's BaseServer
// would reject the lake.file.Append descriptor, so DoPut is peeked here.
type endpoint struct {
	flight.FlightServer
	svc *Service
}

// relayedActions go to the metadata service unchanged.
var relayedActions = map[string]bool{
	wire.ActionCreateTable: true, wire.ActionListTables: true, wire.ActionDescribeTable: true,
	wire.ActionHistory: true, wire.ActionSnapshot: true, wire.ActionStatus: true,
	wire.ActionVerify: true,
}

// DoPut relays FILE appends and refuses everything else: SQL is read-only.
func (e *endpoint) DoPut(stream flight.FlightService_DoPutServer) error {
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return status.Error(codes.InvalidArgument, wire.ErrEmptyAppend.Error()+": the stream ended before its first message")
	}
	if err != nil {
		return err
	}
	cmd, err := wire.DecodeAppendDescriptor(first.FlightDescriptor)
	if err != nil {
		if errors.Is(err, wire.ErrUnknownCommand) {
			return status.Errorf(codes.InvalidArgument, "lake SQL is read-only: DoPut accepts only %s (FILE appends): %v", wire.AppendTypeURL, err)
		}
		return statusErr(err)
	}
	return e.svc.relayAppend(stream, cmd, first)
}

// maxRelayBytes bounds the frames of one append the relay holds for a
// resend to another meta node; it matches meta's own bound on an append.
const maxRelayBytes = 256 << 20

// relayAppend forwards an append to meta without decoding its record
// batches and passes meta's acknowledgement (or error) back. File bytes
// are never part of it: clients upload them to the stage. The frames are
// kept until meta answers, so an append that meets an unavailable meta
// node is sent again to the next one; the commit_id (assigned here when the
// client sent none) makes that resend safe.
//
// Holding frames costs memory, so the relay first refuses what meta would
// refuse anyway (unknown table, wrong schema) from the first message
// alone, and all appends together hold at most Config.RelayBuffer bytes.
func (s *Service) relayAppend(client flight.FlightService_DoPutServer, cmd *lakepb.Append, first *flight.FlightData) error {
	ctx := client.Context()
	if err := s.admitAppend(ctx, cmd, first); err != nil {
		return statusErr(err)
	}
	if cmd.GetCommitId() == "" {
		cmd.CommitId = uuid.NewString()
		desc, err := wire.AppendDescriptor(cmd)
		if err != nil {
			return statusErr(err)
		}
		first.FlightDescriptor = desc
	}
	budget := &budgetedStream{stream: client, r: &s.relay, limit: s.cfg.RelayBuffer}
	defer budget.release()
	if err := budget.charge(first); err != nil {
		return statusErr(err)
	}
	frames, err := flightrpc.ReadPut(budget, first, maxRelayBytes)
	if err != nil {
		return statusErr(err)
	}
	var results []*flight.PutResult
	err = s.meta.Do(ctx, func(ctx context.Context, fc flight.Client) error {
		var err error
		results, err = flightrpc.SendPut(ctx, fc, frames)
		return err
	})
	if err != nil {
		if c := status.Code(err); c == codes.NotFound || c == codes.InvalidArgument {
			// The cached schema may be what let it through.
			s.relay.forget(cmd.GetTable())
		}
		return statusErr(err)
	}
	for _, res := range results {
		if r, err := wire.DecodeAppendResult(res.GetAppMetadata()); err == nil {
			s.cat.noteAck(r.GetTable(), r.GetVersion())
		}
		if err := client.Send(res); err != nil {
			return err
		}
	}
	return nil
}

// DoAction answers lake.discover, relays table actions to meta and hands
// the rest (Flight SQL's prepared statements) to the Flight SQL server.
func (e *endpoint) DoAction(action *flight.Action, stream flight.FlightService_DoActionServer) error {
	switch {
	case action.GetType() == wire.ActionDiscover:
		body, err := proto.Marshal(e.svc.stage)
		if err != nil {
			return statusErr(err)
		}
		return stream.Send(&flight.Result{Body: body})
	case relayedActions[action.GetType()]:
		return e.svc.relayAction(action, stream)
	}
	return e.FlightServer.DoAction(action, stream)
}

func (s *Service) relayAction(action *flight.Action, client flight.FlightService_DoActionServer) error {
	var results []*flight.Result
	err := s.meta.Do(client.Context(), func(ctx context.Context, fc flight.Client) error {
		stream, err := fc.DoAction(ctx, action)
		if err != nil {
			return err
		}
		results = results[:0]
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
	if err != nil {
		return statusErr(err)
	}
	for _, r := range results {
		if err := client.Send(r); err != nil {
			return err
		}
	}
	return nil
}

// ListActions lists lake's actions, then Flight SQL's.
func (e *endpoint) ListActions(in *flight.Empty, stream flight.FlightService_ListActionsServer) error {
	for _, a := range []*flight.ActionType{
		{Type: wire.ActionDiscover, Description: "Where clients upload file bytes (DiscoverRequest → StageDescriptor)."},
		{Type: wire.ActionCreateTable, Description: "Create a table (relayed to the metadata service)."},
		{Type: wire.ActionListTables, Description: "List tables (relayed)."},
		{Type: wire.ActionDescribeTable, Description: "Describe a table (relayed)."},
		{Type: wire.ActionHistory, Description: "A table's versions (relayed)."},
		{Type: wire.ActionSnapshot, Description: "The data files of a table version (relayed)."},
		{Type: wire.ActionStatus, Description: "The metadata cluster: leader, members, lag (relayed)."},
		{Type: wire.ActionVerify, Description: "Check a table's objects against their rows' size and sha256, a few seconds per call (relayed)."},
	} {
		if err := stream.Send(a); err != nil {
			return err
		}
	}
	return e.FlightServer.ListActions(in, stream)
}
