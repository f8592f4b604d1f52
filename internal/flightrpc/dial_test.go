package flightrpc_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	flightgen "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/lakedata/lake/internal/auth"
	"github.com/lakedata/lake/internal/auth/authtest"
	"github.com/lakedata/lake/internal/flightrpc"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// echo answers DoAction "echo" with its body, a StringValue.
type echo struct{ flight.BaseFlightServer }

func (echo) DoAction(a *flight.Action, stream flight.FlightService_DoActionServer) error {
	if a.GetType() != "echo" {
		return status.Error(codes.InvalidArgument, "unknown action")
	}
	return stream.Send(&flight.Result{Body: a.GetBody()})
}

func serve(t *testing.T, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	flightgen.RegisterFlightServiceServer(srv, &echo{})
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

// ping runs one echo action and checks the answer.
func ping(fc flight.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var got wrapperspb.StringValue
	if err := flightrpc.Action(ctx, fc, "echo", wrapperspb.String("hello"), &got); err != nil {
		return err
	}
	if !proto.Equal(&got, wrapperspb.String("hello")) {
		return errors.New("wrong echo: " + got.GetValue())
	}
	return nil
}

func dialEndpoint(t *testing.T, endpoint string, o flightrpc.DialOptions) flight.Client {
	t.Helper()
	fc, err := flightrpc.DialEndpoint(endpoint, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fc.Close() })
	return fc
}

func TestDialStillPlaintextWithoutToken(t *testing.T) {
	fc, err := flightrpc.Dial(serve(t))
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	if err := ping(fc); err != nil {
		t.Fatal(err)
	}
}

func TestDialEndpointPlaintextWithToken(t *testing.T) {
	tok := authtest.Token(t)
	addr := serve(t, auth.ServerOptions([]string{tok})...)
	for _, ep := range []string{"grpc://" + addr, "grpc+tcp://" + addr, addr} {
		if err := ping(dialEndpoint(t, ep, flightrpc.DialOptions{Token: tok})); err != nil {
			t.Errorf("%s: %v", ep, err)
		}
	}
	for name, o := range map[string]flightrpc.DialOptions{"no token": {}, "wrong token": {Token: authtest.Token(t)}} {
		if err := ping(dialEndpoint(t, "grpc://"+addr, o)); status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s: %v, want Unauthenticated", name, err)
		}
	}
	// Dial sends no token.
	fc, err := flightrpc.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	if err := ping(fc); status.Code(err) != codes.Unauthenticated {
		t.Errorf("Dial against a token server: %v, want Unauthenticated", err)
	}
}

func TestDialEndpointTLS(t *testing.T) {
	cert, key := authtest.SelfSigned(t)
	tlsOpt, err := auth.ServerTLS(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	tok := authtest.Token(t)
	addr := serve(t, append([]grpc.ServerOption{tlsOpt}, auth.ServerOptions([]string{tok})...)...)
	_, port, _ := net.SplitHostPort(addr)

	for _, ep := range []string{"grpc+tls://127.0.0.1:" + port, "grpc+tls://localhost:" + port} {
		if err := ping(dialEndpoint(t, ep, flightrpc.DialOptions{TLSCAFile: cert, Token: tok})); err != nil {
			t.Errorf("%s: %v", ep, err)
		}
	}
	if err := ping(dialEndpoint(t, "grpc+tls://127.0.0.1:"+port, flightrpc.DialOptions{TLSCAFile: cert})); status.Code(err) != codes.Unauthenticated {
		t.Errorf("TLS without token: %v, want Unauthenticated", err)
	}
	if err := ping(dialEndpoint(t, "grpc://127.0.0.1:"+port, flightrpc.DialOptions{TLSCAFile: cert, Token: tok})); err == nil {
		t.Error("a plaintext client talked to the TLS server")
	}
	otherCA, _ := authtest.SelfSigned(t)
	for name, ca := range map[string]string{"system roots": "", "another CA": otherCA} {
		err := ping(dialEndpoint(t, "grpc+tls://127.0.0.1:"+port, flightrpc.DialOptions{TLSCAFile: ca, Token: tok}))
		if status.Code(err) != codes.Unavailable {
			t.Errorf("%s: %v, want Unavailable (certificate not trusted)", name, err)
		}
		if err != nil && strings.Contains(err.Error(), tok) {
			t.Errorf("%s: error quotes the token: %v", name, err)
		}
	}
}

func TestDialEndpointErrors(t *testing.T) {
	for _, ep := range []string{"", "http://127.0.0.1:1", "grpc://127.0.0.1", "127.0.0.1"} {
		if _, err := flightrpc.DialEndpoint(ep, flightrpc.DialOptions{}); !errors.Is(err, auth.ErrBadEndpoint) {
			t.Errorf("DialEndpoint(%q): %v, want ErrBadEndpoint", ep, err)
		}
	}
	missing := filepath.Join(t.TempDir(), "ca.pem")
	if _, err := flightrpc.DialEndpoint("grpc+tls://127.0.0.1:1", flightrpc.DialOptions{TLSCAFile: missing}); err == nil {
		t.Error("DialEndpoint with a missing CA file succeeded")
	}
}
