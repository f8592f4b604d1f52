//go:build duckdb_arrow

package query_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/lakedata/lake/internal/errtest"
	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/objects/local"
	"github.com/lakedata/lake/roles/meta"
	"github.com/lakedata/lake/roles/query"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// (b) Every sentinel of wire's table comes back from meta through the
// query relay with its details: as a relayed action and as a relayed
// append.
func TestEverySentinelRoundTripsThroughRelay(t *testing.T) {
	l := newLakeTuned(t, func(_ *local.Store, m *meta.Config, _ *query.Config) {
		m.ServerOptions = append(m.ServerOptions, errtest.ServerOption())
	})
	l.createTable("clips", wire.DefaultSchema())
	v := stageObject(t, l)
	rec := wiretest.FileRow("x.bin", v)
	defer rec.Release()
	ctx := context.Background()
	for _, e := range wire.ErrorTable() {
		t.Run(e.Reason, func(t *testing.T) {
			req := &lakepb.CreateTableRequest{Name: errtest.TableName(e.Reason), Schema: wire.EncodeSchema(wire.DefaultSchema())}
			errtest.Check(t, "create", flightrpc.Action(ctx, l.fc, wire.ActionCreateTable, req, &lakepb.TableInfo{}), e)
			_, err := flightrpc.Append(ctx, l.fc, &lakepb.Append{Table: "clips", CommitId: errtest.CommitID(e.Reason)}, rec.Schema(), []arrow.RecordBatch{rec})
			errtest.Check(t, "append", err, e)
		})
	}
}

// The sentinels that real calls produce, in the query role itself or in
// meta behind it.
func TestRealErrorsRoundTripThroughQuery(t *testing.T) {
	l := newLakeWith(t, func(c *query.Config) { c.StatementTimeout = 200 * time.Millisecond })
	l.createTable("clips", wire.DefaultSchema())
	ctx := context.Background()
	appendValue := func(table string, v wire.FileValue, expected *int64) error {
		rec := wiretest.FileRow("x.bin", v)
		defer rec.Release()
		_, err := flightrpc.Append(ctx, l.fc, &lakepb.Append{Table: table, ExpectedVersion: expected}, rec.Schema(), []arrow.RecordBatch{rec})
		return err
	}
	sql := func(q string) error {
		_, _, err := l.sqlQuery(q)
		return err
	}
	for name, tc := range map[string]struct {
		want error
		call func(t *testing.T) error
	}{
		// Refused by the relay from the first message, with meta's answer
		// or its own schema check.
		"unknown table": {wire.ErrTableNotFound, func(t *testing.T) error { return appendValue("nope", stageObject(t, l), nil) }},
		"wrong schema": {wire.ErrSchemaMismatch, func(t *testing.T) error {
			other := arrow.NewSchema([]arrow.Field{{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
			_, err := flightrpc.Append(ctx, l.fc, &lakepb.Append{Table: "clips"}, other, nil)
			return err
		}},
		// Refused by meta, relayed.
		"expected version differs": {wire.ErrVersionConflict, func(t *testing.T) error { return appendValue("clips", stageObject(t, l), proto.Int64(7)) }},
		"a link in an object's place": {wire.ErrNotRegular, func(t *testing.T) error {
			target, link := stageObject(t, l), stageObject(t, l)
			p := filepath.Join(l.stage.Dir(), filepath.FromSlash(link.Key))
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(l.stage.Dir(), filepath.FromSlash(target.Key)), p); err != nil {
				t.Skipf("no symbolic links here: %v", err)
			}
			return appendValue("clips", link, nil)
		}},
		"create twice": {wire.ErrTableExists, func(t *testing.T) error {
			req := &lakepb.CreateTableRequest{Name: "clips", Schema: wire.EncodeSchema(wire.DefaultSchema())}
			return flightrpc.Action(ctx, l.fc, wire.ActionCreateTable, req, &lakepb.TableInfo{})
		}},
		"version never committed": {wire.ErrVersionNotFound, func(t *testing.T) error {
			return flightrpc.Action(ctx, l.fc, wire.ActionSnapshot, &lakepb.SnapshotRequest{Name: "clips", Version: proto.Int64(99)}, &lakepb.Snapshot{})
		}},
		// The query role's own DoPut refusals.
		"stream ends before its first message": {wire.ErrEmptyAppend, func(t *testing.T) error {
			stream, err := l.fc.DoPut(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.CloseSend(); err != nil {
				t.Fatal(err)
			}
			_, err = stream.Recv()
			return err
		}},
		"garbage descriptor": {wire.ErrMalformedCommand, func(t *testing.T) error {
			return sendDescriptor(ctx, l.fc, []byte("\xff\xfe not protobuf"))
		}},
		"a DoPut that is not an append": {wire.ErrNotReadOnly, func(t *testing.T) error {
			cmd, err := anypb.New(wrapperspb.String("UPDATE clips SET name = 'x'"))
			if err != nil {
				t.Fatal(err)
			}
			b, err := proto.Marshal(cmd)
			if err != nil {
				t.Fatal(err)
			}
			return sendDescriptor(ctx, l.fc, b)
		}},
		"a Flight SQL update": {wire.ErrNotReadOnly, func(t *testing.T) error {
			_, err := l.sql.ExecuteUpdate(ctx, "DELETE FROM clips")
			return err
		}},
		// SQL.
		"a function lake SQL refuses": {wire.ErrSQLNotAllowed, func(t *testing.T) error { return sql("SELECT read_text('x')") }},
		"DROP":                        {wire.ErrNotReadOnly, func(t *testing.T) error { return sql("DROP VIEW clips") }},
		"syntax":                      {wire.ErrInvalidSQL, func(t *testing.T) error { return sql("SELEC 1") }},
		"parameters":                  {wire.ErrUnsupported, func(t *testing.T) error { return sql("SELECT ?") }},
		"statement timeout":           {context.DeadlineExceeded, func(t *testing.T) error { return sql("SELECT count(*) FROM range(10000000000)") }},
	} {
		t.Run(name, func(t *testing.T) {
			errtest.Check(t, name, tc.call(t), errtest.Entry(t, tc.want))
		})
	}
}

// A relay at its budget refuses with RELAY_FULL.
func TestRelayFullRoundTrips(t *testing.T) {
	l := newLakeWith(t, func(c *query.Config) { c.RelayBuffer = 1 })
	l.createTable("clips", wire.DefaultSchema())
	rec := wiretest.FileRow("x.bin", stageObject(t, l))
	defer rec.Release()
	_, err := flightrpc.Append(context.Background(), l.fc, &lakepb.Append{Table: "clips"}, rec.Schema(), []arrow.RecordBatch{rec})
	errtest.Check(t, "append over the budget", err, errtest.Entry(t, query.ErrRelayFull))
	if !errors.Is(wire.FromStatus(err), query.ErrRelayFull) {
		t.Errorf("%v is not query.ErrRelayFull", err)
	}
}

// sendDescriptor sends a DoPut whose only message is a descriptor with
// cmd and returns the answer's error.
func sendDescriptor(ctx context.Context, fc flight.Client, cmd []byte) error {
	desc := &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmd}
	_, err := flightrpc.SendPut(ctx, fc, []*flight.FlightData{{FlightDescriptor: desc}})
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}
