//go:build duckdb_arrow

package query_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/lakedata/lake/internal/auth"
	"github.com/lakedata/lake/internal/auth/authtest"
	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/objects/local"
	"github.com/lakedata/lake/roles/meta"
	"github.com/lakedata/lake/roles/query"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// With tokens, every Flight method of the query endpoint needs one; the
// query role reaches meta with its own token, never the client's.
func TestQueryEndpointRequiresTokens(t *testing.T) {
	clientTok, metaTok := authtest.Token(t), authtest.Token(t)
	root := t.TempDir()
	stage, err := local.Open(filepath.Join(root, "stage"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stage.Close()
	mcfg := meta.DefaultConfig()
	mcfg.Listen, mcfg.DataDir = "127.0.0.1:0", filepath.Join(root, "meta")
	mcfg.Stage, mcfg.StageURI = stage, "file://"+stage.Dir()
	mcfg.ServerOptions = auth.ServerOptions([]string{metaTok})
	m, err := meta.Open(context.Background(), mcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	qcfg := query.DefaultConfig()
	qcfg.Listen, qcfg.Meta, qcfg.CacheDir = "127.0.0.1:0", m.Addr().String(), filepath.Join(root, "cache")
	qcfg.MetaDial.Token = metaTok
	qcfg.ServerOptions = auth.ServerOptions([]string{clientTok})
	q, err := query.Open(context.Background(), qcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close(context.Background())
	addr := q.Addr().String()

	dial := func(tok string) flight.Client {
		fc, err := flightrpc.DialEndpoint(addr, flightrpc.DialOptions{Token: tok})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fc.Close() })
		return fc
	}
	ticket, _ := flightsql.CreateStatementQueryTicket([]byte("lake.sql.v1:SELECT 1"))
	cmdDesc := &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte("forged")}
	calls := map[string]func(ctx context.Context, fc flight.Client) error{
		"Handshake": func(ctx context.Context, fc flight.Client) error {
			s, err := fc.Handshake(ctx)
			if err != nil {
				return err
			}
			_ = s.Send(&flight.HandshakeRequest{})
			_, err = s.Recv()
			return err
		},
		"ListFlights": func(ctx context.Context, fc flight.Client) error {
			s, err := fc.ListFlights(ctx, &flight.Criteria{})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		},
		"GetFlightInfo": func(ctx context.Context, fc flight.Client) error {
			_, err := fc.GetFlightInfo(ctx, cmdDesc)
			return err
		},
		"PollFlightInfo": func(ctx context.Context, fc flight.Client) error {
			_, err := fc.PollFlightInfo(ctx, cmdDesc)
			return err
		},
		"GetSchema": func(ctx context.Context, fc flight.Client) error {
			_, err := fc.GetSchema(ctx, cmdDesc)
			return err
		},
		"DoGet (forged ticket)": func(ctx context.Context, fc flight.Client) error {
			s, err := fc.DoGet(ctx, &flight.Ticket{Ticket: ticket})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		},
		"DoPut": func(ctx context.Context, fc flight.Client) error {
			s, err := fc.DoPut(ctx)
			if err != nil {
				return err
			}
			_ = s.Send(&flight.FlightData{FlightDescriptor: cmdDesc})
			_ = s.CloseSend()
			_, err = s.Recv()
			return err
		},
		"DoExchange": func(ctx context.Context, fc flight.Client) error {
			s, err := fc.DoExchange(ctx)
			if err != nil {
				return err
			}
			_ = s.CloseSend()
			_, err = s.Recv()
			return err
		},
		"DoAction": func(ctx context.Context, fc flight.Client) error {
			return flightrpc.Action(ctx, fc, wire.ActionListTables, &lakepb.ListTablesRequest{}, &lakepb.TableList{})
		},
		"ListActions": func(ctx context.Context, fc flight.Client) error {
			s, err := fc.ListActions(ctx, &flight.Empty{})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		},
	}
	ctx := context.Background()
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			for _, tok := range []string{"", "wrong-token-wrong-token", metaTok} {
				if err := call(ctx, dial(tok)); status.Code(err) != codes.Unauthenticated {
					t.Errorf("token %q: %v, want Unauthenticated", tok, err)
				}
			}
			if err := call(ctx, dial(clientTok)); status.Code(err) == codes.Unauthenticated {
				t.Errorf("right token: %v", err)
			}
		})
	}
	// With the right token, a relayed action and a query both work: the
	// query role authenticated to meta with its own token.
	fc := dial(clientTok)
	req := &lakepb.CreateTableRequest{Name: "clips", Schema: wire.EncodeSchema(wire.DefaultSchema())}
	if err := flightrpc.Action(ctx, fc, wire.ActionCreateTable, req, &lakepb.TableInfo{}); err != nil {
		t.Fatalf("create through query: %v", err)
	}
	sc, err := flightsql.NewClient(addr, nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(auth.TokenCredentials(clientTok, false)))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	info, err := sc.Execute(ctx, "SELECT count(*) FROM clips")
	if err != nil {
		t.Fatalf("query with the right token: %v", err)
	}
	rdr, err := sc.DoGet(ctx, info.Endpoint[0].Ticket)
	if err != nil {
		t.Fatal(err)
	}
	for rdr.Next() {
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	rdr.Release()
	// The client's token is not good at meta: the roles' tokens differ.
	mfc, err := flightrpc.DialEndpoint(m.Addr().String(), flightrpc.DialOptions{Token: clientTok})
	if err != nil {
		t.Fatal(err)
	}
	defer mfc.Close()
	if err := flightrpc.Action(ctx, mfc, wire.ActionListTables, &lakepb.ListTablesRequest{}, &lakepb.TableList{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("client token at meta: %v, want Unauthenticated", err)
	}
}
