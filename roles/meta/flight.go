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

	"github.com/lakedata/lake/internal/flightrpc"
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
	flightgen.RegisterFlightServiceServer(s.grpc, &flightService{svc: s, handlers: s.handlers})
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
	svc      *Service
	handlers map[string]actionHandler
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
		// The frames go on as they came; the leader validates the rows.
		frames, err := flightrpc.ReadPut(stream, first, f.svc.cfg.MaxAppendBytes)
		if err != nil {
			return nil, nil, err
		}
		results, err := f.svc.fwd.put(ctx, frames)
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

func (f *flightService) ListActions(_ *flight.Empty, stream flight.FlightService_ListActionsServer) error {
	for _, a := range wire.Actions() {
		if err := stream.Send(&flight.ActionType{Type: a.Name, Description: a.Summary()}); err != nil {
			return err
		}
	}
	return nil
}

// DoAction answers the actions of wire.Actions with the handlers of
// actionHandlers; a follower passes a mutation to the leader instead
// (forwardAction). An action outside the table is InvalidArgument.
func (f *flightService) DoAction(action *flight.Action, stream flight.FlightService_DoActionServer) error {
	return statusErr(f.doAction(stream.Context(), action, stream))
}

func (f *flightService) doAction(ctx context.Context, action *flight.Action, stream flight.FlightService_DoActionServer) error {
	spec, ok := wire.LookupAction(action.GetType())
	h, handled := f.handlers[action.GetType()]
	if !ok || !handled {
		return fmt.Errorf("%w: action %q", wire.ErrUnknownCommand, action.GetType())
	}
	// Decoded here even when forwarded, so a malformed body costs no hop.
	req := spec.Request.New().Interface()
	if err := decodeBody(action, req); err != nil {
		return err
	}
	if h.check != nil {
		if err := h.check(req); err != nil {
			return err
		}
	}
	if spec.Mutates && !f.svc.canCommit() {
		results, err := f.svc.forwardAction(ctx, action, req)
		if err != nil {
			return err
		}
		for _, r := range results {
			if err := stream.Send(r); err != nil {
				return err
			}
		}
		return nil
	}
	return h.serve(ctx, req, func(m proto.Message) error {
		body, err := proto.Marshal(m)
		if err != nil {
			return err
		}
		return stream.Send(&flight.Result{Body: body})
	})
}

// actionHandler answers one action of wire.Actions.
type actionHandler struct {
	// serve answers a decoded request (of the table's Request type),
	// passing each result to send.
	serve func(ctx context.Context, req proto.Message, send func(proto.Message) error) error
	// check, when set, refuses a bad request on the node that got it,
	// also on a follower before forwarding, so a bad request is
	// InvalidArgument even while no leader is known.
	check func(req proto.Message) error
	// afterForward, when set, runs on a follower after the leader has
	// answered the forwarded mutation req, before the caller hears of it.
	afterForward func(ctx context.Context, req proto.Message)
}

// actionHandlers is the metadata service's half of the action table: one
// handler per entry of wire.Actions (TestActionHandlersMatchTable).
func (s *Service) actionHandlers() map[string]actionHandler {
	return map[string]actionHandler{
		wire.ActionCreateTable: {
			serve: unary(func(ctx context.Context, req *lakepb.CreateTableRequest) (*lakepb.TableInfo, error) {
				schema, err := wire.DecodeSchema(req.GetSchema())
				if err != nil {
					return nil, err
				}
				return s.CreateTable(ctx, req.GetName(), schema, req.GetIfNotExists())
			}),
			check: checked(func(req *lakepb.CreateTableRequest) error {
				if err := wire.ValidateTableName(req.GetName()); err != nil {
					return err
				}
				schema, err := wire.DecodeSchema(req.GetSchema())
				if err != nil {
					return err
				}
				return wire.ValidateSchema(schema)
			}),
			afterForward: func(ctx context.Context, req proto.Message) {
				if r, ok := req.(*lakepb.CreateTableRequest); ok {
					s.loadCreated(ctx, r.GetName())
				}
			},
		},
		wire.ActionListTables: {serve: unary(func(ctx context.Context, _ *lakepb.ListTablesRequest) (*lakepb.TableList, error) {
			return &lakepb.TableList{Tables: s.ListTables(ctx)}, nil
		})},
		wire.ActionDescribeTable: {serve: unary(func(ctx context.Context, req *lakepb.DescribeTableRequest) (*lakepb.TableInfo, error) {
			return s.DescribeTable(ctx, req.GetName(), req.MinVersion)
		})},
		wire.ActionHistory: {serve: unary(func(ctx context.Context, req *lakepb.HistoryRequest) (*lakepb.History, error) {
			return s.History(ctx, req.GetName(), req.GetLimit())
		})},
		wire.ActionSnapshot: {serve: unary(func(ctx context.Context, req *lakepb.SnapshotRequest) (*lakepb.Snapshot, error) {
			return s.Snapshot(ctx, req)
		})},
		wire.ActionDiscover: {serve: unary(func(context.Context, *lakepb.DiscoverRequest) (*lakepb.StageDescriptor, error) {
			return s.cfg.Discover, nil
		})},
		wire.ActionStatus: {serve: unary(func(ctx context.Context, _ *lakepb.StatusRequest) (*lakepb.ClusterStatus, error) {
			return s.Status(ctx), nil
		})},
		wire.ActionVerify: {serve: streamed(s.Verify)},
		wire.ActionURL: {
			serve: unary(s.URL),
			check: checked(func(req *lakepb.ObjectUrlRequest) error {
				_, err := s.urlCheck(req)
				return err
			}),
		},
		wire.ActionUploadGrant: {
			serve: unary(s.countedGrant),
			check: checked(func(req *lakepb.UploadGrantRequest) error {
				_, err := s.grantCheck(req)
				return err
			}),
		},
		wire.ActionUploadRenew: {
			serve: unary(s.UploadRenew),
			check: checked(func(req *lakepb.UploadRenewRequest) error {
				_, err := s.renewCheck(req)
				return err
			}),
		},
		wire.ActionUploadComplete: {
			serve: unary(s.UploadComplete),
			check: checked(completeCheck),
		},
		wire.ActionUploadAbort: {
			serve: unary(s.UploadAbort),
			check: checked(abortCheck),
		},
		wire.ActionCompact: {
			serve: unary(func(ctx context.Context, req *lakepb.CompactRequest) (*lakepb.CompactResult, error) {
				return s.Compact(ctx, req.GetTable())
			}),
			check: checked(compactCheck),
		},
		wire.ActionDelete: {
			serve: unary(s.Delete),
			check: checked(deleteCheck),
		},
		wire.ActionExpire: {
			serve: unary(s.Expire),
			check: checked(expireCheck),
		},
		wire.ActionGC: {
			serve: unary(s.countedGC),
			check: checked(gcCheck),
		},
	}
}

// unary adapts a handler with exactly one result.
func unary[Req, Res proto.Message](fn func(context.Context, Req) (Res, error)) func(context.Context, proto.Message, func(proto.Message) error) error {
	return func(ctx context.Context, req proto.Message, send func(proto.Message) error) error {
		r, ok := req.(Req)
		if !ok {
			return fmt.Errorf("meta: the handler takes %T, the action table gives %T", r, req)
		}
		res, err := fn(ctx, r)
		if err != nil {
			return err
		}
		return send(res)
	}
}

// streamed adapts a handler that sends its results itself.
func streamed[Req, Res proto.Message](fn func(context.Context, Req, func(Res) error) error) func(context.Context, proto.Message, func(proto.Message) error) error {
	return func(ctx context.Context, req proto.Message, send func(proto.Message) error) error {
		r, ok := req.(Req)
		if !ok {
			return fmt.Errorf("meta: the handler takes %T, the action table gives %T", r, req)
		}
		return fn(ctx, r, func(res Res) error { return send(res) })
	}
}

// checked adapts a request check.
func checked[Req proto.Message](fn func(Req) error) func(proto.Message) error {
	return func(req proto.Message) error {
		r, ok := req.(Req)
		if !ok {
			return fmt.Errorf("meta: the check takes %T, the action table gives %T", r, req)
		}
		return fn(r)
	}
}

func decodeBody(action *flight.Action, m proto.Message) error {
	if err := proto.Unmarshal(action.GetBody(), m); err != nil {
		return fmt.Errorf("%w: %s body: %v", wire.ErrMalformedCommand, action.GetType(), err)
	}
	return nil
}
