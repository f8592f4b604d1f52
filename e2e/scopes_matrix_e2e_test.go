package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/wire"
)

// actionScopes is DESIGN §12's scope table for the actions, written out
// here rather than read from the code under test.
var actionScopes = map[string]wire.Scope{
	wire.ActionListTables: wire.ScopeRead, wire.ActionDescribeTable: wire.ScopeRead, wire.ActionHistory: wire.ScopeRead,
	wire.ActionSnapshot: wire.ScopeRead, wire.ActionDiscover: wire.ScopeRead, wire.ActionStatus: wire.ScopeRead,
	wire.ActionVerify: wire.ScopeRead, wire.ActionURL: wire.ScopeRead,
	wire.ActionUploadGrant: wire.ScopeWrite, wire.ActionUploadRenew: wire.ScopeWrite, wire.ActionUploadComplete: wire.ScopeWrite, wire.ActionUploadAbort: wire.ScopeWrite,
	wire.ActionDelete:      wire.ScopeWrite,
	wire.ActionCreateTable: wire.ScopeAdmin, wire.ActionCompact: wire.ScopeAdmin, wire.ActionExpire: wire.ScopeAdmin, wire.ActionGC: wire.ScopeAdmin,
}

// flightMethods calls each Flight method once with an empty request and
// returns its error; each entry names the scope DESIGN §12 gives it.
var flightMethods = []struct {
	name  string
	scope wire.Scope
	call  func(context.Context, flight.Client) error
}{
	{"Handshake", wire.ScopeRead, func(ctx context.Context, fc flight.Client) error {
		s, err := fc.Handshake(ctx)
		if err != nil {
			return err
		}
		if err := s.Send(&flight.HandshakeRequest{}); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		s.CloseSend()
		_, err = s.Recv()
		return err
	}},
	{"ListFlights", wire.ScopeRead, func(ctx context.Context, fc flight.Client) error {
		s, err := fc.ListFlights(ctx, &flight.Criteria{})
		if err != nil {
			return err
		}
		_, err = s.Recv()
		return err
	}},
	{"GetFlightInfo", wire.ScopeRead, func(ctx context.Context, fc flight.Client) error {
		_, err := fc.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD})
		return err
	}},
	{"PollFlightInfo", wire.ScopeRead, func(ctx context.Context, fc flight.Client) error {
		_, err := fc.PollFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD})
		return err
	}},
	{"GetSchema", wire.ScopeRead, func(ctx context.Context, fc flight.Client) error {
		_, err := fc.GetSchema(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD})
		return err
	}},
	{"DoGet", wire.ScopeRead, func(ctx context.Context, fc flight.Client) error {
		s, err := fc.DoGet(ctx, &flight.Ticket{})
		if err != nil {
			return err
		}
		_, err = s.Recv()
		return err
	}},
	{"DoPut", wire.ScopeWrite, func(ctx context.Context, fc flight.Client) error {
		s, err := fc.DoPut(ctx)
		if err != nil {
			return err
		}
		if err := s.Send(&flight.FlightData{}); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		s.CloseSend()
		_, err = s.Recv()
		return err
	}},
	{"DoExchange", wire.ScopeAdmin, func(ctx context.Context, fc flight.Client) error {
		s, err := fc.DoExchange(ctx)
		if err != nil {
			return err
		}
		if err := s.Send(&flight.FlightData{}); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		s.CloseSend()
		_, err = s.Recv()
		return err
	}},
	{"ListActions", wire.ScopeRead, func(ctx context.Context, fc flight.Client) error {
		s, err := fc.ListActions(ctx, &flight.Empty{})
		if err != nil {
			return err
		}
		_, err = s.Recv()
		return err
	}},
}

// TestScopeMatrixOverFlight: a read, a write and an admin token, and no
// token, against every Flight method and every action of a real lake
// serve, each with an empty request. A call outside the token's scope is
// PermissionDenied; one inside it gets past the scope check (whatever the
// empty request then earns, never PermissionDenied); no token is
// Unauthenticated. Nothing of the catalog changes.
func TestScopeMatrixOverFlight(t *testing.T) {
	dir := t.TempDir()
	tk := newScopeTokens()
	tokens := writeTokenFile(t, dir, "tokens", tk.read+" read", tk.write+" write", tk.admin+" admin")
	p := startLakeEnv(t, []string{"AWS_EC2_METADATA_DISABLED=true"}, "serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0",
		"--data-dir", filepath.Join(dir, "data"), "--token-file", tokens)
	endpoint := "grpc://" + p.Addr()
	if _, errOut, code := runAs(t, endpoint, tk.admin, "table", "create", "clips"); code != 0 {
		t.Fatalf("table create: exit %d: %s", code, errOut)
	}
	if _, errOut, code := runAs(t, endpoint, tk.admin, "put", "--table", "clips", "--no-progress", "--checkpoint-dir", filepath.Join(dir, "cp"), writeFile(t, dir, "a.bin")); code != 0 {
		t.Fatalf("put: exit %d: %s", code, errOut)
	}
	for _, a := range wire.Actions() {
		if _, ok := actionScopes[a.Name]; !ok {
			t.Fatalf("action %s is not in this test's scope table: add the scope DESIGN §12 gives it", a.Name)
		}
	}
	catalog := func() string {
		out, errOut, code := runAs(t, endpoint, tk.admin, "table", "ls")
		if code != 0 {
			t.Fatalf("table ls: %s", errOut)
		}
		var versions []string
		for _, name := range strings.Fields(out) {
			if d, _, code := runAs(t, endpoint, tk.admin, "table", "describe", name); code == 0 {
				versions = append(versions, d)
			}
		}
		return out + strings.Join(versions, "\n")
	}
	before := catalog()

	callers := []struct {
		name, token string
		scope       wire.Scope // 0: no token
	}{{"read", tk.read, wire.ScopeRead}, {"write", tk.write, wire.ScopeWrite}, {"admin", tk.admin, wire.ScopeAdmin}, {"none", "", 0}}
	for _, c := range callers {
		fc, err := flightrpc.DialEndpoint(endpoint, flightrpc.DialOptions{Token: c.token})
		if err != nil {
			t.Fatal(err)
		}
		expect := func(what string, need wire.Scope, err error) {
			t.Helper()
			got := status.Code(err)
			switch {
			case c.scope == 0 && got != codes.Unauthenticated:
				t.Errorf("%s without a token: %v, want Unauthenticated", what, err)
			case c.scope != 0 && !c.scope.Allows(need) && got != codes.PermissionDenied:
				t.Errorf("%s with a %s token (needs %s): %v, want PermissionDenied", what, c.name, need, err)
			case c.scope.Allows(need) && (got == codes.PermissionDenied || got == codes.Unauthenticated):
				t.Errorf("%s with a %s token (needs %s): refused: %v", what, c.name, need, err)
			}
			if err != nil && strings.Contains(err.Error(), c.token) && c.token != "" {
				t.Errorf("%s: the error quotes the token", what)
			}
		}
		for _, m := range flightMethods {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			expect(m.name, m.scope, m.call(ctx, fc))
			cancel()
		}
		for _, name := range slices.Sorted(maps.Keys(actionScopes)) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			s, err := fc.DoAction(ctx, &flight.Action{Type: name})
			if err == nil {
				_, err = s.Recv()
			}
			expect(fmt.Sprintf("DoAction %s", name), actionScopes[name], err)
			cancel()
		}
		fc.Close()
	}
	if after := catalog(); after != before {
		t.Fatalf("the calls changed the catalog:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
