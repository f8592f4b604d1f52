package auth_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	flightgen "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/lakedata/lake/internal/auth"
	"github.com/lakedata/lake/internal/auth/authtest"
	"github.com/lakedata/lake/wire"
)

func TestMethodScope(t *testing.T) {
	want := map[string]wire.Scope{
		"Handshake": wire.ScopeRead, "ListFlights": wire.ScopeRead, "GetFlightInfo": wire.ScopeRead,
		"PollFlightInfo": wire.ScopeRead, "GetSchema": wire.ScopeRead, "DoGet": wire.ScopeRead,
		"DoAction": wire.ScopeRead, "ListActions": wire.ScopeRead,
		"DoPut": wire.ScopeWrite, "DoExchange": wire.ScopeAdmin,
	}
	desc := flightgen.FlightService_ServiceDesc
	var names []string
	for _, m := range desc.Methods {
		names = append(names, m.MethodName)
	}
	for _, s := range desc.Streams {
		names = append(names, s.StreamName)
	}
	if len(names) != len(want) {
		t.Errorf("the Flight service has %d methods %v, the test knows %d", len(names), names, len(want))
	}
	for _, n := range names {
		w, ok := want[n]
		if !ok {
			t.Errorf("Flight method %s has no expected scope", n)
			continue
		}
		if got := auth.MethodScope("/" + desc.ServiceName + "/" + n); got != w {
			t.Errorf("MethodScope(%s) = %v, want %v", n, got, w)
		}
	}
	for _, m := range []string{"/grpc.health.v1.Health/Check", "/arrow.flight.protocol.FlightService/DoSomethingNew", "", "DoGet"} {
		if got := auth.MethodScope(m); got != wire.ScopeAdmin {
			t.Errorf("MethodScope(%q) = %v, want admin", m, got)
		}
	}
}

func TestActionScope(t *testing.T) {
	// DESIGN §12, spelled out rather than read back from the table.
	want := map[string]wire.Scope{
		wire.ActionListTables: wire.ScopeRead, wire.ActionDescribeTable: wire.ScopeRead,
		wire.ActionHistory: wire.ScopeRead, wire.ActionSnapshot: wire.ScopeRead,
		wire.ActionDiscover: wire.ScopeRead, wire.ActionStatus: wire.ScopeRead, wire.ActionVerify: wire.ScopeRead,
		wire.ActionURL:         wire.ScopeRead,
		wire.ActionDelete:      wire.ScopeWrite,
		wire.ActionUploadGrant: wire.ScopeWrite, wire.ActionUploadRenew: wire.ScopeWrite, wire.ActionUploadComplete: wire.ScopeWrite,
		wire.ActionUploadAbort: wire.ScopeWrite,
		wire.ActionCreateTable: wire.ScopeAdmin, wire.ActionExpire: wire.ScopeAdmin,
		wire.ActionCompact: wire.ScopeAdmin, wire.ActionGC: wire.ScopeAdmin,
	}
	for _, a := range wire.Actions() {
		got, ok := auth.ActionScope(a.Name)
		w, known := want[a.Name]
		if !known {
			t.Errorf("action %s has no expected scope in this test", a.Name)
			continue
		}
		if !ok || got != w {
			t.Errorf("ActionScope(%s) = %v, %v; want %v", a.Name, got, ok, w)
		}
	}
	for _, name := range []string{"CreatePreparedStatement", "ClosePreparedStatement", "lake.table.drop", ""} {
		if s, ok := auth.ActionScope(name); ok {
			t.Errorf("ActionScope(%q) = %v, true; want unknown", name, s)
		}
	}
}

// countingServer is everyMethod that counts the DoAction calls that reach
// it, so a test can tell a refused action never ran.
type countingServer struct {
	everyMethod
	actions atomic.Int64
}

func (s *countingServer) DoAction(a *flight.Action, stream flight.FlightService_DoActionServer) error {
	s.actions.Add(1)
	return s.everyMethod.DoAction(a, stream)
}

// TestScopesDecideEveryMethodAndAction: a read, a write and an admin token
// against every Flight method and every lake action. A call the scope
// allows reaches the handler (OK, or the handler's own NotFound); one it
// does not allow is PermissionDenied and the handler never runs; an
// action lake does not know passes to the handler for every scope.
func TestScopesDecideEveryMethodAndAction(t *testing.T) {
	tokens := map[wire.Scope]string{wire.ScopeRead: authtest.Token(t), wire.ScopeWrite: authtest.Token(t), wire.ScopeAdmin: authtest.Token(t)}
	var list []auth.Token
	for s, v := range tokens {
		list = append(list, auth.Token{Value: v, Scope: s})
	}
	srv := &countingServer{}
	addr := serveImpl(t, srv, auth.ScopedServerOptions(list)...)
	need := map[string]wire.Scope{
		"Handshake": wire.ScopeRead, "ListFlights": wire.ScopeRead, "GetFlightInfo": wire.ScopeRead,
		"PollFlightInfo": wire.ScopeRead, "GetSchema": wire.ScopeRead, "DoGet": wire.ScopeRead,
		"DoAction": wire.ScopeRead, "ListActions": wire.ScopeRead,
		"DoPut": wire.ScopeWrite, "DoExchange": wire.ScopeAdmin,
	}
	for scope, tok := range tokens {
		fc := client(t, addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(auth.TokenCredentials(tok, false)))
		for method, c := range calls {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := c.do(ctx, fc)
			cancel()
			want := c.wantOK
			if !scope.Allows(need[method]) {
				want = codes.PermissionDenied
			}
			if code := status.Code(err); code != want {
				t.Errorf("%s token, %s: code %v (%v), want %v", scope, method, code, err, want)
			}
			if want == codes.PermissionDenied {
				checkDenied(t, err, tok)
			}
		}
		for _, a := range wire.Actions() {
			before := srv.actions.Load()
			err := doAction(fc, a.Name)
			ran := srv.actions.Load() - before
			if scope.Allows(a.Scope) {
				// everyMethod answers every type but "ping" with NotFound.
				if status.Code(err) != codes.NotFound || ran != 1 {
					t.Errorf("%s token, %s: %v (handler ran %d times), want the handler's NotFound", scope, a.Name, err, ran)
				}
				continue
			}
			if status.Code(err) != codes.PermissionDenied || ran != 0 {
				t.Errorf("%s token, %s: %v (handler ran %d times), want PermissionDenied before the handler", scope, a.Name, err, ran)
			}
			checkDenied(t, err, tok)
			if !strings.Contains(err.Error(), a.Name) || !strings.Contains(err.Error(), "a "+scope.String()+" token") {
				t.Errorf("%s token, %s: the message %q names neither the action nor the scope", scope, a.Name, err)
			}
		}
		// Not lake's: the handler decides (everyMethod's "ping" succeeds).
		if err := doAction(fc, "ping"); err != nil {
			t.Errorf("%s token, an action lake does not know: %v", scope, err)
		}
	}
}

func doAction(fc flight.Client, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := fc.DoAction(ctx, &flight.Action{Type: name})
	if err != nil {
		return err
	}
	return drain(s.Recv)
}

// checkDenied checks a refusal: the wire reason maps back to
// wire.ErrPermissionDenied, and nothing of the token is in it.
func checkDenied(t *testing.T, err error, tok string) {
	t.Helper()
	if !errors.Is(wire.FromStatus(err), wire.ErrPermissionDenied) {
		t.Errorf("%v does not map back to wire.ErrPermissionDenied", err)
	}
	if strings.Contains(err.Error(), tok[:8]) {
		t.Errorf("the refusal quotes the token: %v", err)
	}
	if !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("the refusal does not say permission denied: %v", err)
	}
}

func TestPermissionDeniedWrapsOnServer(t *testing.T) {
	tok := authtest.Token(t)
	got := make(chan error, 1)
	outer := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		err := h(srv, ss)
		got <- err
		return err
	}
	opts := append([]grpc.ServerOption{grpc.ChainStreamInterceptor(outer)}, auth.ScopedServerOptions([]auth.Token{{Value: tok, Scope: wire.ScopeRead}})...)
	fc := client(t, serve(t, opts...), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(auth.TokenCredentials(tok, false)))
	_ = doAction(fc, wire.ActionGC)
	if err := <-got; !errors.Is(err, auth.ErrPermissionDenied) || errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("server-side error %v does not wrap ErrPermissionDenied alone", err)
	}
}

func TestAdminTokens(t *testing.T) {
	got := auth.AdminTokens([]string{"x", "y"})
	if len(got) != 2 || got[0].Value != "x" || got[1].Value != "y" || got[0].Scope != wire.ScopeAdmin || got[1].Scope != wire.ScopeAdmin {
		t.Fatalf("AdminTokens = %#v", got)
	}
}
