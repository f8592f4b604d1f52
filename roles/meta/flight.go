package meta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	flightgen "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// maxMessageBytes bounds one gRPC message; record batches above it must be
// split by the client.
const maxMessageBytes = 64 << 20

// listen opens the Flight listener; serve starts answering on it, once
// the service is complete.
func (s *Service) listen(addr string) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("meta: listen on %s: %w", addr, err)
	}
	s.lis = lis
	return nil
}

func (s *Service) serve() {
	opts := append([]grpc.ServerOption{grpc.MaxRecvMsgSize(maxMessageBytes), grpc.MaxSendMsgSize(maxMessageBytes)}, s.cfg.ServerOptions...)
	s.grpc = grpc.NewServer(opts...)
	flightgen.RegisterFlightServiceServer(s.grpc, &flightService{svc: s})
	go func() {
		if err := s.grpc.Serve(s.lis); err != nil {
			s.log.Error("flight server stopped", "err", err)
		}
	}()
	s.log.Info("metadata service listening", "addr", s.lis.Addr().String(), "stage", s.cfg.StageURI)
	if !s.cfg.TokensRequired {
		s.log.Warn("no bearer tokens: anyone who can reach this address can create tables and append to them", "addr", s.lis.Addr().String())
	}
}

// flightService is the metadata service's Flight face: DoPut for FILE
// appends, DoAction for table operations. Everything else is Unimplemented.
type flightService struct {
	flight.BaseFlightServer
	svc *Service
}

// firstMessage replays the already-received first message of a stream to
// the record reader, so the descriptor is decoded before any data is read.
type firstMessage struct {
	first  *flight.FlightData
	stream flight.DataStreamReader
}

func (m *firstMessage) Recv() (*flight.FlightData, error) {
	if f := m.first; f != nil {
		m.first = nil
		return f, nil
	}
	return m.stream.Recv()
}

func (f *flightService) DoPut(stream flight.FlightService_DoPutServer) error {
	res, forwarded, err := f.doPut(stream)
	if err != nil {
		return statusErr(err)
	}
	if forwarded != nil {
		for _, r := range forwarded {
			if err := stream.Send(r); err != nil {
				return err
			}
		}
		return nil
	}
	meta, err := wire.EncodeAppendResult(res)
	if err != nil {
		return statusErr(err)
	}
	return stream.Send(&flight.PutResult{AppMetadata: meta})
}

// doPut commits an append, or on a follower passes its frames to the
// leader as they are and returns the leader's results.
func (f *flightService) doPut(stream flight.FlightService_DoPutServer) (*lakepb.AppendResult, []*flight.PutResult, error) {
	ctx := stream.Context()
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("%w: the stream ended before its first message", wire.ErrEmptyAppend)
	}
	if err != nil {
		return nil, nil, err
	}
	cmd, err := wire.DecodeAppendDescriptor(first.FlightDescriptor)
	if err != nil {
		return nil, nil, err
	}
	if err := wire.ValidateAppend(cmd); err != nil {
		return nil, nil, err
	}
	if !f.svc.canCommit() {
		results, err := f.svc.forwardFrames(ctx, stream, first)
		return nil, results, err
	}
	res, err := f.readAppend(ctx, stream, cmd, first)
	return res, nil, err
}

// readAppend reads an append's records and commits them.
func (f *flightService) readAppend(ctx context.Context, stream flight.FlightService_DoPutServer, cmd *lakepb.Append, first *flight.FlightData) (*lakepb.AppendResult, error) {
	t, err := f.svc.table(ctx, cmd.GetTable())
	if err != nil {
		return nil, err
	}
	rdr, err := flight.NewRecordReader(&firstMessage{first: first, stream: stream})
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: the stream carries no schema", wire.ErrEmptyAppend)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", wire.ErrMalformedCommand, err)
	}
	defer rdr.Release()
	// Reject a wrong schema before reading any rows.
	if err := wire.CheckAppendSchema(t.schema, rdr.Schema()); err != nil {
		return nil, err
	}
	var recs []arrow.RecordBatch
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	var size int64
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for _, col := range rec.Columns() {
			size += arraySize(col.Data())
		}
		if size > f.svc.cfg.MaxAppendBytes {
			return nil, fmt.Errorf("%w: the append exceeds %d bytes of Arrow data; split it", wire.ErrInvalidRequest, f.svc.cfg.MaxAppendBytes)
		}
		rec.Retain()
		recs = append(recs, rec)
	}
	if err := rdr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: reading the stream: %v", wire.ErrMalformedCommand, err)
	}
	return f.svc.Append(ctx, cmd, recs)
}

var actionTypes = []*flight.ActionType{
	{Type: wire.ActionCreateTable, Description: "Create a table (CreateTableRequest → TableInfo)."},
	{Type: wire.ActionListTables, Description: "List tables (ListTablesRequest → TableList)."},
	{Type: wire.ActionDescribeTable, Description: "Describe a table (DescribeTableRequest → TableInfo)."},
	{Type: wire.ActionHistory, Description: "A table's versions, newest first (HistoryRequest → History)."},
	{Type: wire.ActionSnapshot, Description: "The data files of a table version (SnapshotRequest → Snapshot)."},
	{Type: wire.ActionDiscover, Description: "Where clients upload file bytes (DiscoverRequest → StageDescriptor)."},
	{Type: wire.ActionStatus, Description: "The metadata cluster: leader, members, lag (StatusRequest → ClusterStatus)."},
	{Type: wire.ActionVerify, Description: "Check a table's objects against their rows' size and sha256, a few seconds per call (VerifyRequest → VerifyResult stream)."},
}

func (f *flightService) ListActions(_ *flight.Empty, stream flight.FlightService_ListActionsServer) error {
	for _, a := range actionTypes {
		if err := stream.Send(a); err != nil {
			return err
		}
	}
	return nil
}

func (f *flightService) DoAction(action *flight.Action, stream flight.FlightService_DoActionServer) error {
	if action.GetType() == wire.ActionVerify {
		return statusErr(f.doVerify(action, stream)) // a stream of results, not one
	}
	res, err := f.doAction(stream.Context(), action)
	if err != nil {
		return statusErr(err)
	}
	body, err := proto.Marshal(res)
	if err != nil {
		return statusErr(err)
	}
	return stream.Send(&flight.Result{Body: body})
}

func (f *flightService) doAction(ctx context.Context, action *flight.Action) (proto.Message, error) {
	svc := f.svc
	switch action.GetType() {
	case wire.ActionCreateTable:
		var req lakepb.CreateTableRequest
		if err := decodeBody(action, &req); err != nil {
			return nil, err
		}
		schema, err := wire.DecodeSchema(req.GetSchema())
		if err != nil {
			return nil, err
		}
		return svc.CreateTable(ctx, req.GetName(), schema, req.GetIfNotExists())
	case wire.ActionListTables:
		var req lakepb.ListTablesRequest
		if err := decodeBody(action, &req); err != nil {
			return nil, err
		}
		return &lakepb.TableList{Tables: svc.ListTables(ctx)}, nil
	case wire.ActionDescribeTable:
		var req lakepb.DescribeTableRequest
		if err := decodeBody(action, &req); err != nil {
			return nil, err
		}
		return svc.DescribeTable(ctx, req.GetName(), req.MinVersion)
	case wire.ActionHistory:
		var req lakepb.HistoryRequest
		if err := decodeBody(action, &req); err != nil {
			return nil, err
		}
		return svc.History(ctx, req.GetName(), req.GetLimit())
	case wire.ActionDiscover:
		var req lakepb.DiscoverRequest
		if err := decodeBody(action, &req); err != nil {
			return nil, err
		}
		return svc.cfg.Discover, nil
	case wire.ActionStatus:
		var req lakepb.StatusRequest
		if err := decodeBody(action, &req); err != nil {
			return nil, err
		}
		return svc.Status(ctx), nil
	case wire.ActionSnapshot:
		var req lakepb.SnapshotRequest
		if err := decodeBody(action, &req); err != nil {
			return nil, err
		}
		return svc.Snapshot(ctx, req.GetName(), req.Version, req.MinVersion)
	}
	return nil, fmt.Errorf("%w: action %q", wire.ErrUnknownCommand, action.GetType())
}

func decodeBody(action *flight.Action, m proto.Message) error {
	if err := proto.Unmarshal(action.GetBody(), m); err != nil {
		return fmt.Errorf("%w: %s body: %v", wire.ErrMalformedCommand, action.GetType(), err)
	}
	return nil
}
