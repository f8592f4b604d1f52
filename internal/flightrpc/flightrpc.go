package flightrpc

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/lakedata/lake/internal/auth"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// MaxMessageBytes bounds one gRPC message in either direction.
const MaxMessageBytes = 64 << 20

// Dial connects to a Flight service at addr (host:port) without TLS and
// without a token.
func Dial(addr string, opts ...grpc.DialOption) (flight.Client, error) {
	return dial(addr, insecure.NewCredentials(), opts)
}

// DialOptions are the client credentials for DialEndpoint.
type DialOptions struct {
	// Token, when set, is sent as "authorization: Bearer <token>" on every
	// call, over TLS or plaintext alike (plaintext is how a service on
	// loopback is reached).
	Token string
	// TLSCAFile is the PEM file of the CAs trusted for a grpc+tls endpoint;
	// "" trusts the system roots. It is not used for plaintext endpoints.
	TLSCAFile string
}

// DialEndpoint connects to a Flight service at endpoint (grpc://host:port,
// grpc+tcp://host:port, grpc+tls://host:port or host:port; see
// auth.ParseEndpoint), with TLS for grpc+tls and the token of o if any.
// extra options come last, so they may override the defaults.
func DialEndpoint(endpoint string, o DialOptions, extra ...grpc.DialOption) (flight.Client, error) {
	ep, err := auth.ParseEndpoint(endpoint)
	if err != nil {
		return nil, err
	}
	creds := insecure.NewCredentials()
	if ep.TLS {
		if creds, err = auth.ClientTLS(o.TLSCAFile); err != nil {
			return nil, err
		}
	}
	var opts []grpc.DialOption
	if o.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(auth.TokenCredentials(o.Token, false)))
	}
	return dial(ep.Addr, creds, append(opts, extra...))
}

func dial(addr string, creds credentials.TransportCredentials, opts []grpc.DialOption) (flight.Client, error) {
	opts = append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
	}, opts...)
	return flight.NewClientWithMiddleware(addr, nil, nil, opts...)
}

// Append sends records as one FILE append and returns the service's
// acknowledgement. All records must have schema.
func Append(ctx context.Context, fc flight.Client, cmd *lakepb.Append, schema *arrow.Schema, recs []arrow.RecordBatch) (*lakepb.AppendResult, error) {
	desc, err := wire.AppendDescriptor(cmd)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := fc.DoPut(ctx)
	if err != nil {
		return nil, err
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(schema))
	w.SetFlightDescriptor(desc)
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			return nil, finish(stream, err)
		}
	}
	// Close sends the schema even when there were no records, so the
	// service can answer an empty append with a proper error.
	if err := w.Close(); err != nil {
		return nil, finish(stream, err)
	}
	if err := stream.CloseSend(); err != nil {
		return nil, finish(stream, err)
	}
	var res *lakepb.AppendResult
	for {
		pr, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if res == nil {
			if res, err = wire.DecodeAppendResult(pr.GetAppMetadata()); err != nil {
				return nil, err
			}
		}
	}
	if res == nil {
		return nil, fmt.Errorf("flight: the service closed the append without a result")
	}
	return res, nil
}

// SendPut sends the frames of one DoPut as they are (never decoding the
// record batches) and returns the service's results. A relay uses it to
// pass an append on.
func SendPut(ctx context.Context, fc flight.Client, frames []*flight.FlightData) ([]*flight.PutResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	up, err := fc.DoPut(ctx)
	if err != nil {
		return nil, err
	}
	for _, msg := range frames {
		if err := up.Send(msg); err != nil {
			// The service answered early (a bad table, schema, …): its
			// status is what the caller needs, and Recv below returns it.
			break
		}
	}
	if err := up.CloseSend(); err != nil {
		return nil, err
	}
	var results []*flight.PutResult
	for {
		res, err := up.Recv()
		if errors.Is(err, io.EOF) {
			return results, nil
		}
		if err != nil {
			return nil, err
		}
		results = append(results, res)
	}
}

// ReadPut reads the rest of a DoPut stream whose first message was
// already received, keeping every frame as it is, so a relay can send them
// on (and again, to another node). More than limit bytes of payload is
// wire.ErrInvalidRequest.
func ReadPut(stream flight.DataStreamReader, first *flight.FlightData, limit int64) ([]*flight.FlightData, error) {
	frames := []*flight.FlightData{first}
	size := frameSize(first)
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return frames, nil
		}
		if err != nil {
			return nil, err
		}
		if size += frameSize(msg); size > limit {
			return nil, fmt.Errorf("%w: the append exceeds %d bytes; split it", wire.ErrInvalidRequest, limit)
		}
		frames = append(frames, msg)
	}
}

// frameSize is the payload size of one Flight message.
func frameSize(m *flight.FlightData) int64 {
	return int64(len(m.GetDataHeader()) + len(m.GetDataBody()) + len(m.GetAppMetadata()))
}

// finish returns the service's own status when a send failed because the
// service already answered (io.EOF on Send hides the real error).
func finish(stream flight.FlightService_DoPutClient, sendErr error) error {
	if !errors.Is(sendErr, io.EOF) {
		return sendErr
	}
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return sendErr
			}
			return err
		}
	}
}

// Action runs a DoAction whose request and single result are protobuf
// messages.
func Action(ctx context.Context, fc flight.Client, actionType string, req, resp proto.Message) error {
	body, err := proto.Marshal(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := fc.DoAction(ctx, &flight.Action{Type: actionType, Body: body})
	if err != nil {
		return err
	}
	r, err := stream.Recv()
	if err != nil {
		return err
	}
	if resp == nil {
		return nil
	}
	if err := proto.Unmarshal(r.GetBody(), resp); err != nil {
		return fmt.Errorf("flight: %s result: %w", actionType, err)
	}
	return nil
}

// StopServer stops s gracefully, letting running calls finish, and cuts
// them off when ctx ends first.
func StopServer(ctx context.Context, s *grpc.Server) {
	stopped := make(chan struct{})
	go func() { s.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-ctx.Done():
		s.Stop()
		<-stopped
	}
}
