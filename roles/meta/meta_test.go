package meta

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestOneFileRowCommitsOneVersion(t *testing.T) {
	f := newFixture(t)
	created := f.createTable("clips")
	if created.Version != 0 || !created.Created {
		t.Fatalf("create: got version %d created=%v, want 0 true", created.Version, created.Created)
	}
	res, err := f.appendOne("clips", "video.mp4", "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != 1 || res.Rows != 1 || res.Duplicate || res.Table != "clips" {
		t.Fatalf("append result %v, want clips v1 1 row", res)
	}
	snap := f.snapshot("clips", nil)
	if snap.Version != 1 || len(snap.Files) != 1 {
		t.Fatalf("snapshot: version %d with %d files, want 1 with 1", snap.Version, len(snap.Files))
	}
	if got := f.readNames(snap); len(got) != 1 || got[0] != "video.mp4" {
		t.Fatalf("snapshot rows %v, want [video.mp4]", got)
	}
	if snap0 := f.snapshot("clips", ptr[int64](0)); len(snap0.Files) != 0 {
		t.Fatalf("version 0 has %d files, want none", len(snap0.Files))
	}
	var hist lakepb.History
	if err := flightrpc.Action(context.Background(), f.fc, wire.ActionHistory, &lakepb.HistoryRequest{Name: "clips"}, &hist); err != nil {
		t.Fatal(err)
	}
	if len(hist.Versions) != 2 || hist.Versions[0].Version != 1 || hist.Versions[1].Version != 0 {
		t.Fatalf("history %v, want versions 1, 0", hist.Versions)
	}
}

func TestConcurrentAppendsAreGaplessAndExactlyOnce(t *testing.T) {
	f := newFixture(t)
	f.createTable("clips")
	const clients, perClient = 16, 8
	var mu sync.Mutex
	versions := map[int64]int{} // version → acknowledged appends in it
	want := map[string]bool{}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perClient {
				name := nameN(c*perClient + i)
				res, err := f.appendOne("clips", name, "")
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				versions[res.Version]++
				want[name] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	snap := f.snapshot("clips", nil)
	// Group commit may put several appends in one version; versions are
	// still numbered 1..head without gaps, and every one was acknowledged.
	for v := int64(1); v <= snap.Version; v++ {
		if versions[v] == 0 {
			t.Errorf("version %d was never acknowledged (gap or phantom)", v)
		}
	}
	if int64(len(versions)) != snap.Version {
		t.Errorf("%d distinct acknowledged versions, head is %d", len(versions), snap.Version)
	}
	got := f.readNames(snap)
	seen := map[string]int{}
	for _, n := range got {
		seen[n]++
	}
	for n := range want {
		if seen[n] != 1 {
			t.Errorf("row %s present %d times, want once", n, seen[n])
		}
	}
	if len(got) != clients*perClient {
		t.Errorf("%d rows, want %d", len(got), clients*perClient)
	}
	t.Logf("%d appends in %d versions", clients*perClient, snap.Version)
}

func TestCommitIDIsIdempotentAcrossRestarts(t *testing.T) {
	f := newFixture(t)
	f.createTable("clips")
	first, err := f.appendOne("clips", "a.mp4", "commit-a")
	if err != nil {
		t.Fatal(err)
	}
	if first.Duplicate {
		t.Fatal("first append reported duplicate")
	}
	check := func(when string) {
		t.Helper()
		again, err := f.appendOne("clips", "a-again.mp4", "commit-a")
		if err != nil {
			t.Fatal(err)
		}
		if again.Version != first.Version || !again.Duplicate || again.Rows != first.Rows {
			t.Fatalf("%s: got %v, want version %d duplicate with %d rows", when, again, first.Version, first.Rows)
		}
		snap := f.snapshot("clips", nil)
		if snap.Version != first.Version {
			t.Fatalf("%s: head moved to %d", when, snap.Version)
		}
		if names := f.readNames(snap); len(names) != 1 {
			t.Fatalf("%s: rows %v, want one", when, names)
		}
	}
	check("same process")
	f.restart()
	check("after restart")
	// And after the index is rebuilt from the stage alone.
	f.stop()
	if err := os.Remove(filepath.Join(f.dataDir, "meta.db")); err != nil {
		t.Fatal(err)
	}
	f.start()
	check("after rebuild")
}

func TestConcurrentSameCommitIDCommitsOnce(t *testing.T) {
	f := newFixture(t)
	f.createTable("clips")
	v := f.putObject("same.mp4", []byte("same"))
	const n = 8
	results := make([]*lakepb.AppendResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := wiretest.FileRows([]string{"same.mp4"}, []wire.FileValue{v})
			defer rec.Release()
			res, err := f.append("clips", "same-id", rec)
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = res
		}()
	}
	wg.Wait()
	fresh := 0
	for _, r := range results {
		if r == nil {
			t.FailNow()
		}
		if r.Version != results[0].Version {
			t.Fatalf("versions differ: %v", results)
		}
		if !r.Duplicate {
			fresh++
		}
	}
	if fresh != 1 {
		t.Fatalf("%d appends were not duplicates, want exactly 1", fresh)
	}
	if names := f.readNames(f.snapshot("clips", nil)); len(names) != 1 {
		t.Fatalf("rows %v, want one", names)
	}
}

func TestRebuildFromStageAfterIndexLoss(t *testing.T) {
	f := newFixture(t)
	f.createTable("clips")
	f.createTable("weights")
	for i := range 5 {
		if _, err := f.appendOne("clips", nameN(i), ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.appendOne("weights", "model.safetensors", "w1"); err != nil {
		t.Fatal(err)
	}
	before := map[string]*lakepb.Snapshot{}
	beforeV3 := f.snapshot("clips", ptr[int64](3))
	var list lakepb.TableList
	for _, name := range []string{"clips", "weights"} {
		before[name] = f.snapshot(name, nil)
	}
	f.stop()
	if err := os.Remove(filepath.Join(f.dataDir, "meta.db")); err != nil {
		t.Fatal(err)
	}
	f.start()
	if err := flightrpc.Action(context.Background(), f.fc, wire.ActionListTables, &lakepb.ListTablesRequest{}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Tables) != 2 || list.Tables[0].Name != "clips" || list.Tables[1].Name != "weights" {
		t.Fatalf("tables after rebuild: %v", list.Tables)
	}
	for name, want := range before {
		if got := f.snapshot(name, nil); !proto.Equal(got, want) {
			t.Errorf("%s: snapshot after rebuild %v, want %v", name, got, want)
		}
	}
	if got := f.snapshot("clips", ptr[int64](3)); !proto.Equal(got, beforeV3) {
		t.Errorf("clips@3 after rebuild %v, want %v", got, beforeV3)
	}
	// And it keeps committing on top.
	res, err := f.appendOne("clips", "after.mp4", "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != before["clips"].Version+1 {
		t.Fatalf("next version %d, want %d", res.Version, before["clips"].Version+1)
	}
}

func TestCreateTwiceIsAlreadyExists(t *testing.T) {
	f := newFixture(t)
	f.createTable("clips")
	req := &lakepb.CreateTableRequest{Name: "clips", Schema: wire.EncodeSchema(wire.DefaultSchema())}
	err := flightrpc.Action(context.Background(), f.fc, wire.ActionCreateTable, req, &lakepb.TableInfo{})
	if status.Code(err) != codes.AlreadyExists {
		t.Fatalf("second create: %v, want AlreadyExists", err)
	}
	req.IfNotExists = true
	var info lakepb.TableInfo
	if err := flightrpc.Action(context.Background(), f.fc, wire.ActionCreateTable, req, &info); err != nil {
		t.Fatalf("create if not exists: %v", err)
	}
	if info.Created || info.Name != "clips" {
		t.Fatalf("create if not exists: %v", &info)
	}
	for _, bad := range []*lakepb.CreateTableRequest{
		{Name: "Bad-Name", Schema: wire.EncodeSchema(wire.DefaultSchema())},
		{Name: "noschema"},
		{Name: "garbage", Schema: []byte("not a schema")},
	} {
		err := flightrpc.Action(context.Background(), f.fc, wire.ActionCreateTable, bad, &lakepb.TableInfo{})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("create %q: %v, want InvalidArgument", bad.Name, err)
		}
	}
}

func TestSecondMetaOnSameDataDirFails(t *testing.T) {
	f := newFixture(t)
	_, err := Open(context.Background(), f.config())
	if !errors.Is(err, ErrDataDirLocked) {
		t.Fatalf("second open: %v, want ErrDataDirLocked", err)
	}
}

func TestExpectedVersion(t *testing.T) {
	f := newFixture(t)
	f.createTable("clips")
	v := f.putObject("a.mp4", []byte("a"))
	rec := wiretest.FileRows([]string{"a.mp4"}, []wire.FileValue{v})
	defer rec.Release()
	send := func(expected int64) (*lakepb.AppendResult, error) {
		cmd := &lakepb.Append{Table: "clips", ExpectedVersion: &expected}
		return flightrpc.Append(context.Background(), f.fc, cmd, rec.Schema(), []arrow.RecordBatch{rec})
	}
	if res, err := send(0); err != nil || res.Version != 1 {
		t.Fatalf("expected 0: %v %v", res, err)
	}
	if _, err := send(0); status.Code(err) != codes.Aborted {
		t.Fatalf("stale expected_version: %v, want Aborted", err)
	}
	if f.snapshot("clips", nil).Version != 1 {
		t.Fatal("an aborted append changed the table")
	}
}

// rawDoPut sends hand-made FlightData messages, as a broken or hostile
// client would.
func rawDoPut(t *testing.T, fc flight.Client, msgs []*flight.FlightData) error {
	t.Helper()
	stream, err := fc.DoPut(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if err := stream.Send(m); err != nil {
			break // the server already answered; Recv below gets it
		}
	}
	_ = stream.CloseSend()
	for {
		if _, err := stream.Recv(); err != nil {
			return err
		}
	}
}

// schemaMessages encodes a record as FlightData with the given descriptor.
func schemaMessages(t *testing.T, desc *flight.FlightDescriptor, rec arrow.RecordBatch, schema *arrow.Schema) []*flight.FlightData {
	t.Helper()
	var msgs []*flight.FlightData
	w := flight.NewRecordWriter(&collect{out: &msgs}, ipc.WithSchema(schema))
	w.SetFlightDescriptor(desc)
	if rec != nil {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return msgs
}

type collect struct{ out *[]*flight.FlightData }

func (c *collect) Send(d *flight.FlightData) error {
	*c.out = append(*c.out, proto.Clone(d).(*flight.FlightData))
	return nil
}

func TestBadAppendsChangeNothing(t *testing.T) {
	f := newFixture(t)
	f.createTable("clips")
	if _, err := f.appendOne("clips", "ok.mp4", ""); err != nil {
		t.Fatal(err)
	}
	good := f.putObject("good.mp4", []byte("good bytes"))
	goodDesc, _ := wire.AppendDescriptor(&lakepb.Append{Table: "clips"})
	withValue := func(mutate func(*wire.FileValue)) []*flight.FlightData {
		v := good
		mutate(&v)
		rec := wiretest.FileRows([]string{"x"}, []wire.FileValue{v})
		defer rec.Release()
		return schemaMessages(t, goodDesc, rec, rec.Schema())
	}
	sqlCmd, _ := anypb.New(wrapperspb.String("SELECT 1"))
	sqlCmd.TypeUrl = "type.googleapis.com/arrow.flight.protocol.sql.CommandStatementQuery"
	sqlBytes, _ := proto.Marshal(sqlCmd)
	unknownTable, _ := wire.AppendDescriptor(&lakepb.Append{Table: "nope"})
	wrongSchema := arrow.NewSchema([]arrow.Field{{Name: "name", Type: arrow.BinaryTypes.String}}, nil)
	wrongRec := func() arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, wrongSchema)
		defer b.Release()
		b.Field(0).(*array.StringBuilder).Append("x")
		return b.NewRecordBatch()
	}()
	defer wrongRec.Release()
	emptyRec := wiretest.FileRows(nil, nil)
	defer emptyRec.Release()

	cases := []struct {
		name string
		msgs []*flight.FlightData
		code codes.Code
	}{
		{"garbage descriptor", []*flight.FlightData{{FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte{0xff, 0x01, 0x02}}}}, codes.InvalidArgument},
		{"no descriptor", []*flight.FlightData{{DataHeader: []byte{1}}}, codes.InvalidArgument},
		{"unknown type url", []*flight.FlightData{{FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: sqlBytes}}}, codes.InvalidArgument},
		{"unknown table", schemaMessages(t, unknownTable, emptyRec, wire.DefaultSchema()), codes.NotFound},
		{"wrong schema", schemaMessages(t, goodDesc, wrongRec, wrongSchema), codes.InvalidArgument},
		{"key with ..", withValue(func(v *wire.FileValue) { v.Key = "objects/../_lake/catalog/clips.json" }), codes.InvalidArgument},
		{"key outside objects/", withValue(func(v *wire.FileValue) { v.Key = "_lake/catalog/clips.json" }), codes.InvalidArgument},
		{"absolute key", withValue(func(v *wire.FileValue) { v.Key = "/etc/passwd" }), codes.InvalidArgument},
		{"bad sha256", withValue(func(v *wire.FileValue) { v.SHA256 = "ABC" }), codes.InvalidArgument},
		{"missing object", withValue(func(v *wire.FileValue) { v.Key = "objects/2026/01/none/missing.mp4" }), codes.FailedPrecondition},
		{"wrong size", withValue(func(v *wire.FileValue) { v.Size++ }), codes.FailedPrecondition},
		{"empty stream", nil, codes.InvalidArgument},
		{"descriptor only", []*flight.FlightData{{FlightDescriptor: goodDesc}}, codes.InvalidArgument},
		{"schema without rows", schemaMessages(t, goodDesc, nil, wire.DefaultSchema()), codes.InvalidArgument},
		{"zero-row batch", schemaMessages(t, goodDesc, emptyRec, wire.DefaultSchema()), codes.InvalidArgument},
	}
	before := f.snapshot("clips", nil)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := rawDoPut(t, f.fc, c.msgs)
			if status.Code(err) != c.code {
				t.Fatalf("got %v, want %s", err, c.code)
			}
			if after := f.snapshot("clips", nil); !proto.Equal(after, before) {
				t.Fatalf("table changed: %v → %v", before, after)
			}
		})
	}
	// Nothing was left behind in the stage for the rejected appends.
	var dataFiles int
	root := filepath.Join(f.stage.Dir(), "_lake", "tables", before.Id, "data")
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	dataFiles = len(entries)
	if dataFiles != len(before.Files) {
		t.Fatalf("%d data files in the stage, the snapshot has %d", dataFiles, len(before.Files))
	}
}

func TestUnknownActionAndTable(t *testing.T) {
	f := newFixture(t)
	err := flightrpc.Action(context.Background(), f.fc, "lake.nope", &lakepb.ListTablesRequest{}, nil)
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("unknown action: %v", err)
	}
	err = flightrpc.Action(context.Background(), f.fc, wire.ActionDescribeTable, &lakepb.DescribeTableRequest{Name: "nope"}, &lakepb.TableInfo{})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("describe unknown: %v", err)
	}
	err = flightrpc.Action(context.Background(), f.fc, wire.ActionSnapshot, &lakepb.SnapshotRequest{Name: "nope"}, &lakepb.Snapshot{})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("snapshot unknown: %v", err)
	}
	f.createTable("clips")
	err = flightrpc.Action(context.Background(), f.fc, wire.ActionSnapshot, &lakepb.SnapshotRequest{Name: "clips", Version: ptr[int64](7)}, &lakepb.Snapshot{})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("snapshot of a future version: %v", err)
	}
}

func TestDiscoverDescribesTheStageWithoutSecrets(t *testing.T) {
	f := newFixture(t)
	var d lakepb.StageDescriptor
	if err := flightrpc.Action(context.Background(), f.fc, wire.ActionDiscover, &lakepb.DiscoverRequest{}, &d); err != nil {
		t.Fatal(err)
	}
	if d.Kind != "file" || d.LocalPath != f.stage.Dir() || d.RootUri != "file://"+f.stage.Dir() {
		t.Fatalf("discover: %v", &d)
	}
}
