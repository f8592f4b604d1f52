package query

import (
	"errors"
	"io"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/lakedata/lake/wire"
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
	wire.ActionHistory: true, wire.ActionSnapshot: true,
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
	if _, err := wire.DecodeAppendDescriptor(first.FlightDescriptor); err != nil {
		if errors.Is(err, wire.ErrUnknownCommand) {
			return status.Errorf(codes.InvalidArgument, "lake SQL is read-only: DoPut accepts only %s (FILE appends): %v", wire.AppendTypeURL, err)
		}
		return statusErr(err)
	}
	return e.svc.relayAppend(stream, first)
}

// relayAppend forwards an append to meta frame by frame, never decoding
// the record batches, and passes meta's acknowledgement (or error) back.
// File bytes are never part of it: clients upload them to the stage.
func (s *Service) relayAppend(client flight.FlightService_DoPutServer, first *flight.FlightData) error {
	ctx := client.Context()
	up, err := s.meta.DoPut(ctx)
	if err != nil {
		return statusErr(err)
	}
	msg := first
	for {
		if err := up.Send(msg); err != nil {
			// meta answered early (a bad table, schema, …): its status is
			// what the client needs, and Recv below returns it.
			break
		}
		msg, err = client.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	if err := up.CloseSend(); err != nil {
		return statusErr(err)
	}
	for {
		res, err := up.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return statusErr(err)
		}
		if err := client.Send(res); err != nil {
			return err
		}
	}
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
	results, err := s.meta.DoAction(client.Context(), action)
	if err != nil {
		return statusErr(err)
	}
	for {
		r, err := results.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return statusErr(err)
		}
		if err := client.Send(r); err != nil {
			return err
		}
	}
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
	} {
		if err := stream.Send(a); err != nil {
			return err
		}
	}
	return e.FlightServer.ListActions(in, stream)
}
