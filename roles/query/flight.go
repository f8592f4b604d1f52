package query

import (
	"context"
	"errors"
	"fmt"
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

// answeredActions are the query role's own answers to the actions that
// wire.Actions marks AnsweredByQuery; every other action of the table is
// relayed to the metadata service unchanged.
var answeredActions = map[string]func(s *Service) (proto.Message, error){
	wire.ActionDiscover: func(s *Service) (proto.Message, error) { return s.stage, nil },
}

// DoPut relays FILE appends and refuses everything else: SQL is read-only.
func (e *endpoint) DoPut(stream flight.FlightService_DoPutServer) error {
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return statusErr(fmt.Errorf("%w: the stream ended before its first message", wire.ErrEmptyAppend))
	}
	if err != nil {
		return err
	}
	cmd, err := wire.DecodeAppendDescriptor(first.FlightDescriptor)
	if err != nil {
		if errors.Is(err, wire.ErrUnknownCommand) {
			return statusErr(readOnly(fmt.Errorf("lake SQL is read-only: DoPut accepts only %s (FILE appends): %w", wire.AppendTypeURL, err)))
		}
		return statusErr(err)
	}
	return e.svc.relayAppend(stream, cmd, first)
}

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
	// The frames of one append are bounded by meta's own bound on an
	// append, so the relay holds nothing meta would refuse anyway.
	frames, err := flightrpc.ReadPut(budget, first, wire.MaxAppendBytes)
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
	s.metrics.relayedAppend(budget.held)
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

// DoAction answers what wire.Actions says the query role answers
// (lake.discover), relays the table's other actions to meta and hands the
// rest (Flight SQL's prepared statements) to the Flight SQL server.
func (e *endpoint) DoAction(action *flight.Action, stream flight.FlightService_DoActionServer) error {
	a, ok := wire.LookupAction(action.GetType())
	switch {
	case !ok:
		return e.FlightServer.DoAction(action, stream)
	case !a.AnsweredByQuery:
		return e.svc.relayAction(a, action, stream)
	}
	answer, ok := answeredActions[a.Name]
	if !ok {
		return statusErr(fmt.Errorf("%w: action %q", wire.ErrUnknownCommand, a.Name))
	}
	res, err := answer(e.svc)
	if err != nil {
		return statusErr(err)
	}
	body, err := proto.Marshal(res)
	if err != nil {
		return statusErr(err)
	}
	return stream.Send(&flight.Result{Body: body})
}

func (s *Service) relayAction(spec wire.ActionSpec, action *flight.Action, client flight.FlightService_DoActionServer) error {
	var results []*flight.Result
	do := s.meta.Do
	if spec.Long {
		do = s.meta.DoLong
	}
	err := do(client.Context(), func(ctx context.Context, fc flight.Client) error {
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

// ListActions lists lake's actions (wire.Actions), then Flight SQL's.
func (e *endpoint) ListActions(in *flight.Empty, stream flight.FlightService_ListActionsServer) error {
	for _, a := range wire.Actions() {
		desc := a.Summary()
		if !a.AnsweredByQuery {
			desc = fmt.Sprintf("%s (%s; relayed to the metadata service).", a.Description, a.Signature())
		}
		if err := stream.Send(&flight.ActionType{Type: a.Name, Description: desc}); err != nil {
			return err
		}
	}
	return e.FlightServer.ListActions(in, stream)
}
