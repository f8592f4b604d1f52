//go:build duckdb_arrow

package query_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/roles/query"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// capture keeps copies of the messages a flight.Writer sends (it reuses
// one FlightData for all of them).
type capture struct{ frames []*flight.FlightData }

func (c *capture) Send(m *flight.FlightData) error {
	c.frames = append(c.frames, proto.Clone(m).(*flight.FlightData))
	return nil
}

// appendFrames is the DoPut an append of recs to table sends: the first
// frame holds the descriptor and the schema, one frame per record follows.
func appendFrames(t *testing.T, table string, schema *arrow.Schema, recs ...arrow.RecordBatch) []*flight.FlightData {
	t.Helper()
	desc, err := wire.AppendDescriptor(&lakepb.Append{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	var c capture
	w := flight.NewRecordWriter(&c, ipc.WithSchema(schema))
	w.SetFlightDescriptor(desc)
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return c.frames
}

// stageObject puts a small object into the stage and returns its FILE value.
func stageObject(t *testing.T, l *lakeFixture) wire.FileValue {
	t.Helper()
	key := objects.NewObjectKey("x.bin", time.Now())
	info, err := l.stage.Put(context.Background(), key, bytes.NewReader([]byte("x")), objects.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return wire.FileValue{Key: key, Size: info.Size, SHA256: strings.Repeat("ab", 32)}
}

// bigRows is a record of n rows naming v, each with a name of size bytes,
// so the relay has something sizeable to hold.
func bigRows(v wire.FileValue, n, size int) arrow.RecordBatch {
	names := make([]string, n)
	values := make([]wire.FileValue, n)
	for i := range n {
		names[i] = strings.Repeat("n", size)
		values[i] = v
	}
	return wiretest.FileRows(names, values)
}

// openFirst starts a DoPut and sends only its first message, then waits
// for the answer without sending a single record batch: an answer at all
// shows the relay decided from the first message.
func openFirst(t *testing.T, l *lakeFixture, frames []*flight.FlightData) (flight.FlightService_DoPutClient, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	stream, err := l.fc.DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(frames[0]); err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	if status.Code(err) == codes.DeadlineExceeded {
		t.Fatal("no answer to the first message: the relay waited for the record batches")
	}
	return stream, err
}

// sendRest sends the remaining frames; the relay has ended the call, so a
// send must fail before all of them are through or right at the end.
func sendRest(t *testing.T, stream flight.FlightService_DoPutClient, frames []*flight.FlightData) {
	t.Helper()
	for _, f := range frames[1:] {
		if err := stream.Send(f); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("send after the refusal: %v, want io.EOF", err)
			}
			return
		}
	}
	if err := stream.CloseSend(); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err == nil {
		t.Fatal("the refused call produced a result")
	}
}

// An append to a table that does not exist is refused from its first
// message: the relay answers NotFound while the client has not sent a
// single row, so it never buffers the rows of such an append.
func TestRelayRefusesUnknownTableBeforeReadingRows(t *testing.T) {
	l := newLake(t)
	l.createTable("clips", wire.DefaultSchema())
	rec := bigRows(stageObject(t, l), 4, 64<<10)
	defer rec.Release()
	frames := appendFrames(t, "nope", rec.Schema(), rec, rec)
	stream, err := openFirst(t, l, frames)
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), wire.ErrTableNotFound.Error()) {
		t.Fatalf("append to a missing table: %v, want NotFound (%v)", err, wire.ErrTableNotFound)
	}
	sendRest(t, stream, frames)
	if held := query.RelayHeld(l.query); held != 0 {
		t.Fatalf("the relay holds %d bytes after a refused append", held)
	}
}

// An append whose schema is not the table's is refused the same way,
// with meta's schema comparison (InvalidArgument, schema mismatch).
func TestRelayRefusesWrongSchemaBeforeReadingRows(t *testing.T) {
	l := newLake(t)
	l.createTable("clips", wire.DefaultSchema())
	other := arrow.NewSchema([]arrow.Field{{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	frames := appendFrames(t, "clips", other)
	_, err := openFirst(t, l, frames)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), wire.ErrSchemaMismatch.Error()) {
		t.Fatalf("append with a wrong schema: %v, want InvalidArgument (%v)", err, wire.ErrSchemaMismatch)
	}
	// A first message without a schema is refused too.
	desc, err := wire.AppendDescriptor(&lakepb.Append{Table: "clips"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = openFirst(t, l, []*flight.FlightData{{FlightDescriptor: desc}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("first message without a schema: %v, want InvalidArgument", err)
	}
}

// Only tables that exist are remembered: a table created right after a
// refused append takes the next append at once.
func TestRelaySeesTableCreatedAfterRefusal(t *testing.T) {
	l := newLake(t)
	ctx := context.Background()
	v := stageObject(t, l)
	rec := wiretest.FileRow("a", v)
	defer rec.Release()
	if _, err := flightrpc.Append(ctx, l.fc, &lakepb.Append{Table: "later"}, rec.Schema(), []arrow.RecordBatch{rec}); status.Code(err) != codes.NotFound {
		t.Fatalf("append before create: %v, want NotFound", err)
	}
	l.createTable("later", wire.DefaultSchema())
	res, err := flightrpc.Append(ctx, l.fc, &lakepb.Append{Table: "later"}, rec.Schema(), []arrow.RecordBatch{rec})
	if err != nil || res.Version != 1 {
		t.Fatalf("append right after create: %v %v", res, err)
	}
}

// The relay's budget is shared by all appends: while one holds most of
// it, another that would go over is refused with ResourceExhausted and
// drops what it had read; small appends still pass, and once the first
// one is through the refused one succeeds.
func TestRelayBudgetIsSharedAcrossAppends(t *testing.T) {
	const budget = 1 << 20
	l := newLakeWith(t, func(c *query.Config) { c.RelayBuffer = budget })
	l.createTable("clips", wire.DefaultSchema())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	v := stageObject(t, l)
	big := bigRows(v, 2, 300<<10) // ~600 KiB in one message
	defer big.Release()

	// A holds its frames: its stream is open, so the relay keeps them.
	framesA := appendFrames(t, "clips", big.Schema(), big)
	a, err := l.fc.DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range framesA[:2] {
		if err := a.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); query.RelayHeld(l.query) < 600<<10; {
		if time.Now().After(deadline) {
			t.Fatalf("the relay holds %d bytes of A", query.RelayHeld(l.query))
		}
		time.Sleep(5 * time.Millisecond)
	}
	heldA := query.RelayHeld(l.query)

	_, err = flightrpc.Append(ctx, l.fc, &lakepb.Append{Table: "clips", CommitId: "b"}, big.Schema(), []arrow.RecordBatch{big})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("append over the budget: %v, want ResourceExhausted", err)
	}
	for deadline := time.Now().Add(10 * time.Second); query.RelayHeld(l.query) != heldA; {
		if time.Now().After(deadline) {
			t.Fatalf("after the refusal the relay holds %d bytes, A alone %d", query.RelayHeld(l.query), heldA)
		}
		time.Sleep(5 * time.Millisecond)
	}
	small := wiretest.FileRow("small", v)
	defer small.Release()
	if _, err := flightrpc.Append(ctx, l.fc, &lakepb.Append{Table: "clips"}, small.Schema(), []arrow.RecordBatch{small}); err != nil {
		t.Fatalf("small append beside A: %v", err)
	}

	for _, f := range framesA[2:] {
		if err := a.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.CloseSend(); err != nil {
		t.Fatal(err)
	}
	pr, err := a.Recv()
	if err != nil {
		t.Fatalf("A: %v", err)
	}
	if res, err := wire.DecodeAppendResult(pr.GetAppMetadata()); err != nil || res.Rows != 2 {
		t.Fatalf("A's result %v %v", res, err)
	}
	if _, err := flightrpc.Append(ctx, l.fc, &lakepb.Append{Table: "clips", CommitId: "b"}, big.Schema(), []arrow.RecordBatch{big}); err != nil {
		t.Fatalf("the refused append once A is through: %v", err)
	}
	if held := query.RelayHeld(l.query); held != 0 {
		t.Fatalf("the relay holds %d bytes with no append running", held)
	}
	_, recs, err := l.sqlQuery("SELECT count(*) FROM clips")
	if err != nil || rowCount(recs) != 1 || recs[0].Column(0).(*array.Int64).Value(0) != 5 {
		t.Fatalf("rows of A, the small append and B: %v %v, want 5", recs, err)
	}
}
