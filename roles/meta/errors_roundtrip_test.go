package meta

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/lakedata/lake/internal/auth"
	"github.com/lakedata/lake/internal/errtest"
	"github.com/lakedata/lake/internal/etcdtest"
	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/internal/freeport"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/objects/local"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// startEdited starts f's service with its config changed by edit, as
// f.start does.
func startEdited(f *fixture, edit func(*Config)) {
	f.t.Helper()
	cfg := f.config()
	edit(&cfg)
	svc, err := Open(context.Background(), cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	fc, err := flightrpc.Dial(svc.Addr().String())
	if err != nil {
		f.t.Fatal(err)
	}
	f.svc, f.fc = svc, fc
	f.t.Cleanup(f.stop)
}

// failing makes a service fail the calls errtest marks.
func failing(c *Config) { c.ServerOptions = append(c.ServerOptions, errtest.ServerOption()) }

// newFailingFixture is newFixture whose service fails the calls errtest
// marks.
func newFailingFixture(t *testing.T) *fixture {
	t.Helper()
	root := t.TempDir()
	stage, err := local.Open(filepath.Join(root, "stage"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stage.Close() })
	f := &fixture{t: t, dataDir: filepath.Join(root, "data"), stage: stage}
	startEdited(f, failing)
	return f
}

// newLeaderAndFollower starts a two-node cluster on embedded etcd whose
// leader is changed by editLeader, and returns both once the follower
// knows the leader.
func newLeaderAndFollower(t *testing.T, editLeader func(*Config)) (leader, follower *fixture) {
	t.Helper()
	etcd := etcdtest.Start(t)
	base := newFixture(t) // for its stage only
	base.stop()
	leader = &fixture{t: t, stage: base.stage, dataDir: filepath.Join(t.TempDir(), "data"), etcd: etcd.Endpoint, listen: freeport.MustAddr(t)}
	startEdited(leader, editLeader)
	waitFor(t, "the first node to lead", func() bool { return leader.svc.canCommit() })
	follower = newMember(t, etcd.Endpoint, leader)
	waitFor(t, "the follower to learn the leader", func() bool { return follower.svc.cluster.Leader() == leader.listen })
	return leader, follower
}

// createRaw sends lake.table.create with the default schema.
func createRaw(ctx context.Context, fc flight.Client, name string) error {
	req := &lakepb.CreateTableRequest{Name: name, Schema: wire.EncodeSchema(wire.DefaultSchema())}
	return flightrpc.Action(ctx, fc, wire.ActionCreateTable, req, &lakepb.TableInfo{})
}

// appendCommit appends one row naming an object of f's stage with the
// given commit id.
func appendCommit(f *fixture, table, commitID string) error {
	_, err := f.appendOne(table, "x.bin", commitID)
	return err
}

// sweepSentinels makes every sentinel of wire's table come back through
// target, whose calls reach a service that fails them (errtest), both as
// a table creation and as an append.
func sweepSentinels(t *testing.T, target *fixture) {
	t.Helper()
	target.createTable("clips")
	for _, e := range wire.ErrorTable() {
		t.Run(e.Reason, func(t *testing.T) {
			errtest.Check(t, "create", createRaw(context.Background(), target.fc, errtest.TableName(e.Reason)), e)
			errtest.Check(t, "append", appendCommit(target, "clips", errtest.CommitID(e.Reason)), e)
		})
	}
}

// (a) Every sentinel of the table, straight from meta.
func TestEverySentinelRoundTripsFromMeta(t *testing.T) {
	sweepSentinels(t, newFailingFixture(t))
}

// (c) Every sentinel of the table, from the leader through a follower that
// forwards the call.
func TestEverySentinelRoundTripsThroughFollower(t *testing.T) {
	_, follower := newLeaderAndFollower(t, failing)
	sweepSentinels(t, follower)
}

// realTrigger is a call that makes meta fail with want for real.
type realTrigger struct {
	want error
	call func(t *testing.T, f *fixture) error
}

// realTriggers make meta's own code fail: on the node called, or on the
// leader behind a follower. Each may use table "clips", which exists.
var realTriggers = map[string]realTrigger{
	"unknown table": {wire.ErrTableNotFound, func(t *testing.T, f *fixture) error {
		return appendCommit(f, "nope", "")
	}},
	"unknown table on describe": {wire.ErrTableNotFound, func(t *testing.T, f *fixture) error {
		_, err := f.describe("nope", nil)
		return err
	}},
	"wrong schema": {wire.ErrSchemaMismatch, func(t *testing.T, f *fixture) error {
		other := arrow.NewSchema([]arrow.Field{{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
		_, err := flightrpc.Append(context.Background(), f.fc, &lakepb.Append{Table: "clips"}, other, nil)
		return err
	}},
	"expected version differs": {wire.ErrVersionConflict, func(t *testing.T, f *fixture) error {
		v := f.putObject("x.bin", []byte("x"))
		rec := wiretest.FileRow("x.bin", v)
		defer rec.Release()
		_, err := flightrpc.Append(context.Background(), f.fc, &lakepb.Append{Table: "clips", ExpectedVersion: proto.Int64(7)}, rec.Schema(), []arrow.RecordBatch{rec})
		return err
	}},
	"a link in an object's place": {wire.ErrNotRegular, func(t *testing.T, f *fixture) error {
		target := f.putObject("target.bin", []byte("the catalog, say"))
		link := f.putObject("link.bin", []byte("the catalog, say"))
		p := filepath.Join(f.stage.Dir(), filepath.FromSlash(link.Key))
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(f.stage.Dir(), filepath.FromSlash(target.Key)), p); err != nil {
			t.Skipf("no symbolic links here: %v", err)
		}
		return appendValue(f, link)
	}},
	"object never uploaded": {wire.ErrObjectMissing, func(t *testing.T, f *fixture) error {
		v := f.putObject("x.bin", []byte("x"))
		v.Key += "-gone"
		return appendValue(f, v)
	}},
	"size differs": {wire.ErrSizeMismatch, func(t *testing.T, f *fixture) error {
		v := f.putObject("x.bin", []byte("x"))
		v.Size++
		return appendValue(f, v)
	}},
	"key leaves objects/": {wire.ErrInvalidKey, func(t *testing.T, f *fixture) error {
		v := f.putObject("x.bin", []byte("x"))
		v.Key = "objects/../_lake/x"
		return appendValue(f, v)
	}},
	"sha256 not hex": {wire.ErrInvalidFileValue, func(t *testing.T, f *fixture) error {
		v := f.putObject("x.bin", []byte("x"))
		v.SHA256 = "not hex"
		return appendValue(f, v)
	}},
	"no rows": {wire.ErrEmptyAppend, func(t *testing.T, f *fixture) error {
		_, err := flightrpc.Append(context.Background(), f.fc, &lakepb.Append{Table: "clips"}, wire.DefaultSchema(), nil)
		return err
	}},
	"garbage descriptor": {wire.ErrMalformedCommand, func(t *testing.T, f *fixture) error {
		return sendDescriptor(f, []byte("\xff\xfe not protobuf"))
	}},
	"another command": {wire.ErrUnknownCommand, func(t *testing.T, f *fixture) error {
		a, err := anypb.New(wrapperspb.String("x"))
		if err != nil {
			t.Fatal(err)
		}
		return sendDescriptor(f, mustMarshal(t, a))
	}},
	"bad table name in an append": {wire.ErrInvalidTable, func(t *testing.T, f *fixture) error {
		return sendDescriptor(f, appendAny(t, &lakepb.Append{Table: "Clips"}))
	}},
	"commit id too long": {wire.ErrInvalidCommitID, func(t *testing.T, f *fixture) error {
		return sendDescriptor(f, appendAny(t, &lakepb.Append{Table: "clips", CommitId: strings.Repeat("c", wire.MaxCommitIDLen+1)}))
	}},
	"create twice": {wire.ErrTableExists, func(t *testing.T, f *fixture) error {
		return createRaw(context.Background(), f.fc, "clips")
	}},
	"bad table name in a create": {wire.ErrInvalidTable, func(t *testing.T, f *fixture) error {
		return createRaw(context.Background(), f.fc, "Bad-Name")
	}},
	"column named twice": {wire.ErrInvalidSchema, func(t *testing.T, f *fixture) error {
		twice := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}, {Name: "a", Type: arrow.BinaryTypes.String}}, nil)
		req := &lakepb.CreateTableRequest{Name: "twice", Schema: wire.EncodeSchema(twice)}
		return flightrpc.Action(context.Background(), f.fc, wire.ActionCreateTable, req, &lakepb.TableInfo{})
	}},
	"version never committed": {wire.ErrVersionNotFound, func(t *testing.T, f *fixture) error {
		var snap lakepb.Snapshot
		return flightrpc.Action(context.Background(), f.fc, wire.ActionSnapshot, &lakepb.SnapshotRequest{Name: "clips", Version: proto.Int64(99)}, &snap)
	}},
	"negative history limit": {wire.ErrInvalidRequest, func(t *testing.T, f *fixture) error {
		var h lakepb.History
		return flightrpc.Action(context.Background(), f.fc, wire.ActionHistory, &lakepb.HistoryRequest{Name: "clips", Limit: -1}, &h)
	}},
}

// appendValue appends one row holding v to clips.
func appendValue(f *fixture, v wire.FileValue) error {
	rec := wiretest.FileRow("x.bin", v)
	defer rec.Release()
	_, err := flightrpc.Append(context.Background(), f.fc, &lakepb.Append{Table: "clips"}, rec.Schema(), []arrow.RecordBatch{rec})
	return err
}

// appendAny is an Append command as a descriptor's cmd, unvalidated.
func appendAny(t *testing.T, a *lakepb.Append) []byte {
	t.Helper()
	body, err := anypb.New(a)
	if err != nil {
		t.Fatal(err)
	}
	return mustMarshal(t, body)
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sendDescriptor sends a DoPut whose only message is a descriptor with cmd.
func sendDescriptor(f *fixture, cmd []byte) error {
	desc := &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmd}
	_, err := flightrpc.SendPut(context.Background(), f.fc, []*flight.FlightData{{FlightDescriptor: desc}})
	return err
}

func runRealTriggers(t *testing.T, f *fixture, only func(name string) bool) {
	t.Helper()
	f.createTable("clips")
	for name, tr := range realTriggers {
		if only != nil && !only(name) {
			continue
		}
		t.Run(name, func(t *testing.T) {
			errtest.Check(t, name, tr.call(t, f), errtest.Entry(t, tr.want))
		})
	}
}

// (a) The sentinels meta's own code returns, straight from meta.
func TestRealErrorsRoundTripFromMeta(t *testing.T) {
	runRealTriggers(t, newFixture(t), nil)
}

// (c) The same through a follower: mutations are refused by the leader
// and the follower passes its status on; reads are the follower's own.
func TestRealErrorsRoundTripThroughFollower(t *testing.T) {
	_, follower := newLeaderAndFollower(t, func(*Config) {})
	runRealTriggers(t, follower, nil)

	// A node that does not lead refuses a call another node forwarded to
	// it, rather than forwarding it again: NOT_LEADER.
	ctx := metadata.AppendToOutgoingContext(context.Background(), forwardedKey, "127.0.0.1:1")
	errtest.Check(t, "forwarded create", createRaw(ctx, follower.fc, "again"), errtest.Entry(t, wire.ErrNotLeader))
}

// A call without a token to a node that requires one: UNAUTHENTICATED,
// from the auth interceptors.
func TestUnauthenticatedRoundTrips(t *testing.T) {
	root := t.TempDir()
	stage, err := local.Open(filepath.Join(root, "stage"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stage.Close() })
	f := &fixture{t: t, dataDir: filepath.Join(root, "data"), stage: stage}
	startEdited(f, func(c *Config) {
		c.ServerOptions, c.TokensRequired = auth.ServerOptions([]string{"a-token-of-sixteen-chars"}), true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errtest.Check(t, "create without a token", createRaw(ctx, f.fc, "clips"), errtest.Entry(t, wire.ErrUnauthenticated))
}
