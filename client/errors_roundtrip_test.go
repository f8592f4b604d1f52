//go:build duckdb_arrow

package client

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/lakedata/lake/internal/auth"
	"github.com/lakedata/lake/internal/errtest"
	"github.com/lakedata/lake/internal/etcdtest"
	"github.com/lakedata/lake/internal/freeport"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/objects/local"
	"github.com/lakedata/lake/roles/meta"
	"github.com/lakedata/lake/roles/meta/cluster"
	"github.com/lakedata/lake/roles/query"
	"github.com/lakedata/lake/wire"
)

// failing makes a meta node fail the calls errtest marks.
func failing(c *meta.Config) { c.ServerOptions = append(c.ServerOptions, errtest.ServerOption()) }

// startQuery runs a query node in front of the meta node at metaAddr and
// returns its address.
func startQuery(t *testing.T, metaAddr string, edit func(*query.Config)) string {
	t.Helper()
	qcfg := query.DefaultConfig()
	qcfg.Listen, qcfg.Meta, qcfg.CacheDir = "127.0.0.1:0", metaAddr, filepath.Join(t.TempDir(), "cache")
	if edit != nil {
		edit(&qcfg)
	}
	q, err := query.Open(context.Background(), qcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close(context.Background()) })
	return q.Addr().String()
}

// startCluster runs two meta nodes on embedded etcd sharing one stage,
// the leader changed by editLeader, and returns the follower's address
// once it knows the leader.
func startCluster(t *testing.T, editLeader func(*meta.Config)) (followerAddr string) {
	t.Helper()
	etcd := etcdtest.Start(t)
	stageDir := filepath.Join(t.TempDir(), "stage")
	stage, err := local.Open(stageDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stage.Close() })
	member := func(edit func(*meta.Config)) (*meta.Service, string) {
		listen := freeport.MustAddr(t)
		cfg := meta.DefaultConfig()
		cfg.Listen, cfg.DataDir = listen, filepath.Join(t.TempDir(), "data")
		cfg.Stage, cfg.StageURI = stage, "file://"+stageDir
		ec := cluster.DefaultEtcdConfig()
		ec.Endpoints, ec.Advertise, ec.TTL = []string{etcd.Endpoint}, listen, 2*time.Second
		coord, err := cluster.NewEtcd(ec)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Cluster = coord
		if edit != nil {
			edit(&cfg)
		}
		svc, err := meta.Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { svc.Close(context.Background()) })
		return svc, listen
	}
	leader, leaderAddr := member(editLeader)
	waitUntil(t, "the first node to lead", func() bool { return leader.Status(context.Background()).GetLeader() == leaderAddr })
	follower, addr := member(nil)
	waitUntil(t, "the follower to learn the leader", func() bool { return follower.Status(context.Background()).GetLeader() == leaderAddr })
	return addr
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func connectTo(t *testing.T, addr string, opts ...Option) *Client {
	t.Helper()
	opts = append([]Option{WithCheckpointDir(filepath.Join(t.TempDir(), "checkpoints"))}, opts...)
	c, err := Connect(context.Background(), "grpc://"+addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Every sentinel of wire's table reaches a Go caller of the client as
// itself: from meta, through the query relay, from the leader through a
// follower, and through a query node in front of a follower.
func TestEverySentinelRoundTripsThroughClient(t *testing.T) {
	for _, path := range []struct {
		name     string
		endpoint func(t *testing.T) string
	}{
		{"meta", func(t *testing.T) string { return newFixture(t, failing).addr }},
		{"query relay", func(t *testing.T) string { return startQuery(t, newFixture(t, failing).addr, nil) }},
		{"follower", func(t *testing.T) string { return startCluster(t, failing) }},
		{"query relay and follower", func(t *testing.T) string { return startQuery(t, startCluster(t, failing), nil) }},
	} {
		t.Run(path.name, func(t *testing.T) {
			c := connectTo(t, path.endpoint(t))
			if _, err := c.CreateTable(ctx, "clips", nil, false); err != nil {
				t.Fatal(err)
			}
			for _, e := range wire.ErrorTable() {
				t.Run(e.Reason, func(t *testing.T) {
					_, err := c.CreateTable(ctx, errtest.TableName(e.Reason), nil, false)
					checkClientError(t, "create", err, e)
					if e.Code == codes.Unavailable || e.Code == codes.DeadlineExceeded {
						return // Append resends those for 20 s, by design
					}
					_, err = c.PutReader(ctx, "clips", "x.txt", strings.NewReader("x"), PutOptions{CommitID: errtest.CommitID(e.Reason)})
					checkClientError(t, "put", err, e)
				})
			}
		})
	}
}

// checkClientError is errtest.Check plus what the client promises about
// a *StatusError: found by errors.As, the server's message kept.
func checkClientError(t *testing.T, what string, err error, e wire.ErrorEntry) {
	t.Helper()
	errtest.Check(t, what, err, e)
	var se *StatusError
	if !errors.As(err, &se) {
		t.Fatalf("%s: %T %v holds no *StatusError", what, err, err)
	}
	if !strings.Contains(se.Error(), e.Err.Error()) || se.Code() != e.Code || errors.Unwrap(se) != e.Err {
		t.Errorf("%s: StatusError %q code %v unwraps to %v, want the server's message naming %q, code %v", what, se.Error(), se.Code(), errors.Unwrap(se), e.Err, e.Code)
	}
}

// The sentinels real calls produce reach the client through the query
// relay, the way clients are deployed.
func TestRealErrorsRoundTripThroughClient(t *testing.T) {
	f := newFixture(t, nil)
	c := connectTo(t, startQuery(t, f.addr, nil))
	if _, err := c.CreateTable(ctx, "clips", nil, false); err != nil {
		t.Fatal(err)
	}
	put := func(t *testing.T, name string) wire.FileValue {
		t.Helper()
		res, err := c.PutReader(ctx, "clips", name, strings.NewReader("content of "+name), PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return res.File
	}
	appendValue := func(v wire.FileValue, o AppendOptions) error {
		rec := wiretest.FileRow("x.txt", v)
		defer rec.Release()
		_, err := c.Append(ctx, "clips", rec, o)
		return err
	}
	for name, tc := range map[string]struct {
		want error
		call func(t *testing.T) error
	}{
		"unknown table": {wire.ErrTableNotFound, func(t *testing.T) error {
			_, err := c.Describe(ctx, "nope")
			return err
		}},
		"put to an unknown table": {wire.ErrTableNotFound, func(t *testing.T) error {
			_, err := c.PutReader(ctx, "nope", "x.txt", strings.NewReader("x"), PutOptions{})
			return err
		}},
		"create twice": {wire.ErrTableExists, func(t *testing.T) error {
			_, err := c.CreateTable(ctx, "clips", nil, false)
			return err
		}},
		"version never committed": {wire.ErrVersionNotFound, func(t *testing.T) error {
			_, err := c.Snapshot(ctx, "clips", proto.Int64(99))
			return err
		}},
		"expected version differs": {wire.ErrVersionConflict, func(t *testing.T) error {
			return appendValue(put(t, "a.txt"), AppendOptions{ExpectedVersion: proto.Int64(99)})
		}},
		"wrong schema": {wire.ErrSchemaMismatch, func(t *testing.T) error {
			b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}, nil))
			defer b.Release()
			b.Field(0).(*array.StringBuilder).Append("x.txt")
			rec := b.NewRecordBatch()
			defer rec.Release()
			_, err := c.Append(ctx, "clips", rec, AppendOptions{})
			return err
		}},
		"a link in an object's place": {wire.ErrNotRegular, func(t *testing.T) error {
			target, link := put(t, "target.txt"), put(t, "link.txt")
			p := filepath.Join(f.stageDir, filepath.FromSlash(link.Key))
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(f.stageDir, filepath.FromSlash(target.Key)), p); err != nil {
				t.Skipf("no symbolic links here: %v", err)
			}
			return appendValue(link, AppendOptions{})
		}},
		"a function lake SQL refuses": {wire.ErrSQLNotAllowed, func(t *testing.T) error {
			_, err := c.Query(ctx, "SELECT read_text('x')")
			return err
		}},
		"DROP": {wire.ErrNotReadOnly, func(t *testing.T) error {
			_, err := c.Query(ctx, "DROP VIEW clips")
			return err
		}},
	} {
		t.Run(name, func(t *testing.T) {
			checkClientError(t, name, tc.call(t), errtest.Entry(t, tc.want))
		})
	}
}

func TestRelayFullRoundTripsThroughClient(t *testing.T) {
	f := newFixture(t, nil)
	c := connectTo(t, startQuery(t, f.addr, func(q *query.Config) { q.RelayBuffer = 1 }))
	if _, err := c.CreateTable(ctx, "clips", nil, false); err != nil {
		t.Fatal(err)
	}
	_, err := c.PutReader(ctx, "clips", "x.txt", strings.NewReader("x"), PutOptions{})
	checkClientError(t, "put through a full relay", err, errtest.Entry(t, wire.ErrRelayFull))
}

// A token the endpoint does not know: UNAUTHENTICATED, from the auth
// interceptors of the query node.
func TestUnauthenticatedRoundTripsThroughClient(t *testing.T) {
	f := newFixture(t, nil)
	addr := startQuery(t, f.addr, func(q *query.Config) {
		q.ServerOptions = auth.ServerOptions([]string{"the-right-token-0123456789"})
	})
	_, err := Connect(ctx, "grpc://"+addr, WithToken("a-wrong-token-0123456789"), WithCheckpointDir(t.TempDir()))
	checkClientError(t, "connect with a wrong token", err, errtest.Entry(t, wire.ErrUnauthenticated))
}

// An endpoint nobody listens on is Unavailable, and that is not "no
// metadata leader": the status carries no lake reason.
func TestRefusedConnectionIsNotNotLeader(t *testing.T) {
	_, err := Connect(ctx, "grpc://"+freeport.MustAddr(t), WithCheckpointDir(t.TempDir()))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("connect to a closed port: %v (code %v), want Unavailable", err, status.Code(err))
	}
	for _, e := range wire.ErrorTable() {
		if errors.Is(err, e.Err) {
			t.Errorf("connect to a closed port: %v is errors.Is %s", err, e.Reason)
		}
	}
	var se *StatusError
	if !errors.As(err, &se) || se.Reason() != "" || errors.Unwrap(se) != nil {
		t.Errorf("connect to a closed port: %v, want a *StatusError without reason or sentinel", err)
	}
}
