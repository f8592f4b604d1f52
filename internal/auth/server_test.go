package auth_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	flightgen "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/lakedata/lake/internal/auth"
	"github.com/lakedata/lake/internal/auth/authtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// everyMethod implements each Flight method trivially: a call that gets past
// the interceptors succeeds, except DoGet with an unknown ticket and DoAction
// with an unknown type, which fail with NotFound — a known non-auth error.
type everyMethod struct {
	flight.BaseFlightServer
}

const goodTicket = "good-ticket"

func (everyMethod) Handshake(stream flight.FlightService_HandshakeServer) error {
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return stream.Send(&flight.HandshakeResponse{Payload: []byte("hello")})
			}
			return err
		}
	}
}

func (everyMethod) ListFlights(_ *flight.Criteria, stream flight.FlightService_ListFlightsServer) error {
	return stream.Send(&flight.FlightInfo{})
}

func (everyMethod) GetFlightInfo(context.Context, *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return &flight.FlightInfo{}, nil
}

func (everyMethod) PollFlightInfo(context.Context, *flight.FlightDescriptor) (*flight.PollInfo, error) {
	return &flight.PollInfo{}, nil
}

func (everyMethod) GetSchema(context.Context, *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	return &flight.SchemaResult{}, nil
}

func (everyMethod) DoGet(t *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	if string(t.GetTicket()) != goodTicket {
		return status.Error(codes.NotFound, "no such ticket")
	}
	return stream.Send(&flight.FlightData{DataBody: []byte("data")})
}

func (everyMethod) DoPut(stream flight.FlightService_DoPutServer) error {
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return stream.Send(&flight.PutResult{})
			}
			return err
		}
	}
}

func (everyMethod) DoExchange(stream flight.FlightService_DoExchangeServer) error {
	for {
		d, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(d); err != nil {
			return err
		}
	}
}

func (everyMethod) DoAction(a *flight.Action, stream flight.FlightService_DoActionServer) error {
	if a.GetType() != "ping" {
		return status.Errorf(codes.NotFound, "unknown action")
	}
	return stream.Send(&flight.Result{Body: []byte("pong")})
}

func (everyMethod) ListActions(_ *flight.Empty, stream flight.FlightService_ListActionsServer) error {
	return stream.Send(&flight.ActionType{Type: "ping"})
}

// serve runs everyMethod on 127.0.0.1 with opts and returns its address.
func serve(t *testing.T, opts ...grpc.ServerOption) string {
	t.Helper()
	return serveImpl(t, everyMethod{}, opts...)
}

// serveImpl runs impl on 127.0.0.1 with opts and returns its address.
func serveImpl(t *testing.T, impl flightgen.FlightServiceServer, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	flightgen.RegisterFlightServiceServer(srv, impl)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return lis.Addr().String()
}

func client(t *testing.T, addr string, opts ...grpc.DialOption) flight.Client {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	fc, err := flight.NewClientWithMiddleware(addr, nil, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fc.Close() })
	return fc
}

// drain reads a server stream to its end; a clean end is nil.
func drain[T any](recv func() (T, error)) error {
	for {
		if _, err := recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// call is one complete Flight call; it returns the call's final error.
type call func(ctx context.Context, fc flight.Client) error

// calls covers every method of the Flight service, keyed by method name.
// wantOK is the status code of a call with a valid token.
var calls = map[string]struct {
	do     call
	wantOK codes.Code
}{
	"Handshake": {do: func(ctx context.Context, fc flight.Client) error {
		s, err := fc.Handshake(ctx)
		if err != nil {
			return err
		}
		// Send may see io.EOF when the server already refused; the status
		// comes from Recv.
		_ = s.Send(&flight.HandshakeRequest{Payload: []byte("hi")})
		_ = s.CloseSend()
		return drain(s.Recv)
	}},
	"ListFlights": {do: func(ctx context.Context, fc flight.Client) error {
		s, err := fc.ListFlights(ctx, &flight.Criteria{})
		if err != nil {
			return err
		}
		return drain(s.Recv)
	}},
	"GetFlightInfo": {do: func(ctx context.Context, fc flight.Client) error {
		_, err := fc.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte("x")})
		return err
	}},
	"PollFlightInfo": {do: func(ctx context.Context, fc flight.Client) error {
		_, err := fc.PollFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte("x")})
		return err
	}},
	"GetSchema": {do: func(ctx context.Context, fc flight.Client) error {
		_, err := fc.GetSchema(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte("x")})
		return err
	}},
	// A forged ticket: without a token the caller must not even learn
	// that the ticket is unknown.
	"DoGet": {wantOK: codes.NotFound, do: func(ctx context.Context, fc flight.Client) error {
		s, err := fc.DoGet(ctx, &flight.Ticket{Ticket: []byte("forged")})
		if err != nil {
			return err
		}
		return drain(s.Recv)
	}},
	"DoPut": {do: func(ctx context.Context, fc flight.Client) error {
		s, err := fc.DoPut(ctx)
		if err != nil {
			return err
		}
		_ = s.Send(&flight.FlightData{FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte("x")}})
		_ = s.CloseSend()
		return drain(s.Recv)
	}},
	"DoExchange": {do: func(ctx context.Context, fc flight.Client) error {
		s, err := fc.DoExchange(ctx)
		if err != nil {
			return err
		}
		_ = s.Send(&flight.FlightData{DataBody: []byte("x")})
		_ = s.CloseSend()
		return drain(s.Recv)
	}},
	"DoAction": {do: func(ctx context.Context, fc flight.Client) error {
		s, err := fc.DoAction(ctx, &flight.Action{Type: "ping"})
		if err != nil {
			return err
		}
		return drain(s.Recv)
	}},
	"ListActions": {do: func(ctx context.Context, fc flight.Client) error {
		s, err := fc.ListActions(ctx, &flight.Empty{})
		if err != nil {
			return err
		}
		return drain(s.Recv)
	}},
}

// TestCallsCoverTheFlightService fails when arrow-go's Flight service gains
// a method this package's tests do not call.
func TestCallsCoverTheFlightService(t *testing.T) {
	desc := flightgen.FlightService_ServiceDesc
	var names []string
	for _, m := range desc.Methods {
		names = append(names, m.MethodName)
	}
	for _, s := range desc.Streams {
		names = append(names, s.StreamName)
	}
	if len(names) != len(calls) {
		t.Errorf("the Flight service has %d methods %v, the test calls %d", len(names), names, len(calls))
	}
	for _, n := range names {
		if _, ok := calls[n]; !ok {
			t.Errorf("Flight method %s has no test call", n)
		}
	}
}

func withHeader(ctx context.Context, v ...string) context.Context {
	for _, s := range v {
		ctx = metadata.AppendToOutgoingContext(ctx, auth.Header, s)
	}
	return ctx
}

func TestEveryFlightMethodRequiresToken(t *testing.T) {
	good, wrong := authtest.Token(t), authtest.Token(t)
	addr := serve(t, auth.ServerOptions([]string{good})...)
	fc := client(t, addr)

	cases := []struct {
		name   string
		header []string
	}{
		{"no token", nil},
		{"wrong token", []string{"Bearer " + wrong}},
		{"token prefix", []string{"Bearer " + good[:len(good)-1]}},
		{"token with suffix", []string{"Bearer " + good + "x"}},
		{"wrong scheme", []string{"Basic " + good}},
		{"no scheme", []string{good}},
		{"empty bearer", []string{"Bearer "}},
		{"two values", []string{"Bearer " + good, "Bearer " + good}},
	}
	for method, c := range calls {
		t.Run(method, func(t *testing.T) {
			for _, tc := range cases {
				ctx, cancel := context.WithTimeout(withHeader(context.Background(), tc.header...), 10*time.Second)
				err := c.do(ctx, fc)
				cancel()
				if code := status.Code(err); code != codes.Unauthenticated {
					t.Errorf("%s: code %v (%v), want Unauthenticated", tc.name, code, err)
				}
				if err != nil && (strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), good[:8])) {
					t.Errorf("%s: the status message quotes the presented token: %v", tc.name, err)
				}
			}
			for _, h := range []string{"Bearer " + good, "bearer " + good, "Bearer  " + good + " "} {
				ctx, cancel := context.WithTimeout(withHeader(context.Background(), h), 10*time.Second)
				err := c.do(ctx, fc)
				cancel()
				if code := status.Code(err); code != c.wantOK {
					t.Errorf("valid token (%q form): code %v (%v), want %v", strings.Replace(h, good, "<token>", 1), code, err, c.wantOK)
				}
			}
		})
	}
}

func TestDoGetWithValidTokenAndTicket(t *testing.T) {
	tok := authtest.Token(t)
	addr := serve(t, auth.ServerOptions([]string{tok})...)
	fc := client(t, addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(auth.TokenCredentials(tok, false)))
	s, err := fc.DoGet(context.Background(), &flight.Ticket{Ticket: []byte(goodTicket)})
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if string(d.GetDataBody()) != "data" {
		t.Fatalf("DoGet body %q", d.GetDataBody())
	}
}

func TestEveryConfiguredTokenWorks(t *testing.T) {
	tokens := []string{authtest.Token(t), authtest.Token(t), authtest.Token(t)}
	addr := serve(t, auth.ServerOptions(tokens)...)
	for i, tok := range tokens {
		fc := client(t, addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(auth.TokenCredentials(tok, false)))
		for _, m := range []string{"DoAction", "GetFlightInfo"} {
			if err := calls[m].do(context.Background(), fc); err != nil {
				t.Errorf("token %d, %s: %v", i, m, err)
			}
		}
	}
}

func TestWrongTokenMessageDoesNotQuoteIt(t *testing.T) {
	wrong := "wrong-token-" + authtest.Token(t)
	addr := serve(t, auth.ServerOptions([]string{authtest.Token(t)})...)
	fc := client(t, addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(auth.TokenCredentials(wrong, false)))
	err := calls["DoAction"].do(context.Background(), fc)
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unauthenticated {
		t.Fatalf("got %v, want Unauthenticated", err)
	}
	if st.Message() == "" || strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), wrong[12:20]) {
		t.Fatalf("message %q quotes the token or says nothing", st.Message())
	}
	t.Logf("message: %s", st.Message())
}

func TestNoTokensMeansOpen(t *testing.T) {
	if opts := auth.ServerOptions(nil); opts != nil {
		t.Fatalf("ServerOptions(nil) = %v, want nil", opts)
	}
	fc := client(t, serve(t, auth.ServerOptions(nil)...))
	for m, c := range calls {
		if err := c.do(context.Background(), fc); status.Code(err) != c.wantOK {
			t.Errorf("%s without auth: %v", m, err)
		}
	}
}

func TestServerOptionsComposeWithOtherInterceptors(t *testing.T) {
	tok := authtest.Token(t)
	seen := make(chan codes.Code, 10)
	logUnary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		seen <- status.Code(err)
		return resp, err
	}
	opts := append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(logUnary)}, auth.ServerOptions([]string{tok})...)
	fc := client(t, serve(t, opts...))
	err := calls["GetFlightInfo"].do(context.Background(), fc)
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("got %v, want Unauthenticated", err)
	}
	if got := <-seen; got != codes.Unauthenticated || len(seen) != 0 {
		t.Fatalf("the outer interceptor saw %v (and %d more)", got, len(seen))
	}
}

func TestErrUnauthenticatedWrapsOnServer(t *testing.T) {
	tok := authtest.Token(t)
	got := make(chan error, 1)
	outer := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		got <- err
		return resp, err
	}
	opts := append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(outer)}, auth.ServerOptions([]string{tok})...)
	fc := client(t, serve(t, opts...))
	_ = calls["GetSchema"].do(context.Background(), fc)
	if err := <-got; !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("server-side error %v does not wrap ErrUnauthenticated", err)
	}
}

func TestTokenCredentialsRequireTLS(t *testing.T) {
	tok := authtest.Token(t)
	addr := serve(t, auth.ServerOptions([]string{tok})...)
	fc, err := flight.NewClientWithMiddleware(addr, nil, nil,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(auth.TokenCredentials(tok, true)))
	if err == nil {
		// Some gRPC versions refuse at dial time, others on the call.
		defer fc.Close()
		err = calls["DoAction"].do(context.Background(), fc)
	}
	if err == nil {
		t.Fatal("a TLS-only token was sent over plaintext")
	}
	if strings.Contains(err.Error(), tok) {
		t.Fatalf("error quotes the token: %v", err)
	}
}

func TestTokenCredentialsRejectsUnsendableToken(t *testing.T) {
	for _, tok := range []string{"", "has space inside it!", "newline\ninside-the-token"} {
		_, err := auth.TokenCredentials(tok, false).GetRequestMetadata(context.Background())
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("token %q: %v, want Unauthenticated", tok, err)
		}
	}
	md, err := auth.TokenCredentials("abc", false).GetRequestMetadata(context.Background())
	if err != nil || md["authorization"] != "Bearer abc" {
		t.Fatalf("metadata %v, %v", md, err)
	}
}

var _ credentials.PerRPCCredentials = auth.TokenCredentials("x", false)
