package meta

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/lakedata/lake/internal/etcdtest"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// The Go API of a follower forwards the way its Flight face does: a
// CreateTable reaches the leader as the lake.table.create action, marked
// forwarded, and the follower knows the table when it returns. A call
// that was itself forwarded is refused on every path, and nothing of it
// reaches the leader.
func TestFollowerGoAPIForwardsOnTheActionPath(t *testing.T) {
	etcd := etcdtest.Start(t)
	var onLeader forwardedActions
	leader := newMemberWith(t, etcd.Endpoint, nil, func(f *fixture) { f.opts = []grpc.ServerOption{onLeader.option()} })
	waitFor(t, "the first node to lead", func() bool { return leader.svc.canCommit() })
	follower := newMember(t, etcd.Endpoint, leader)
	waitFor(t, "the follower to learn the leader", func() bool { return follower.svc.cluster.Leader() == leader.listen })

	ctx := context.Background()
	schema := wiretest.FileRows([]string{"x"}, []wire.FileValue{follower.putObject("x", []byte("x"))})
	defer schema.Release()
	info, err := follower.svc.CreateTable(ctx, "clips", schema.Schema(), false)
	if err != nil || !info.GetCreated() {
		t.Fatalf("create on the follower: %v %v", info, err)
	}
	if got := onLeader.list(); !slices.Equal(got, []string{wire.ActionCreateTable}) {
		t.Fatalf("the leader got %v from the follower, want one %s", got, wire.ActionCreateTable)
	}
	if follower.svc.reg.lookup("clips") == nil {
		t.Fatal("the follower does not know the table it just created")
	}
	res, err := follower.svc.Append(ctx, &lakepb.Append{Table: "clips", CommitId: "c1"}, []arrow.RecordBatch{schema})
	if err != nil || res.GetVersion() != 1 {
		t.Fatalf("append on the follower: %v %v", res, err)
	}

	// A forwarded call to a node that does not lead stops there.
	in := metadata.NewIncomingContext(ctx, metadata.Pairs(forwardedKey, "127.0.0.1:1"))
	if _, err := follower.svc.CreateTable(in, "other", schema.Schema(), false); !errors.Is(err, wire.ErrNotLeader) {
		t.Errorf("forwarded create: %v, want ErrNotLeader", err)
	}
	if _, err := follower.svc.Append(in, &lakepb.Append{Table: "clips", CommitId: "c2"}, []arrow.RecordBatch{schema}); !errors.Is(err, wire.ErrNotLeader) {
		t.Errorf("forwarded append: %v, want ErrNotLeader", err)
	}
	out := metadata.AppendToOutgoingContext(ctx, forwardedKey, "127.0.0.1:1")
	if err := createRaw(out, follower.fc, "other"); err == nil {
		t.Error("forwarded create action: nil error, want NotLeader")
	}
	if got := onLeader.list(); len(got) != 1 {
		t.Errorf("the leader got %v, want only the first create", got)
	}
	if _, err := leader.svc.DescribeTable(ctx, "other", nil); !errors.Is(err, wire.ErrTableNotFound) {
		t.Errorf("a refused forwarded create reached the leader: %v", err)
	}
	if snap := leader.snapshot("clips", nil); snap.GetVersion() != 1 {
		t.Errorf("leader at version %d, want 1: a refused forwarded append committed", snap.GetVersion())
	}
}
