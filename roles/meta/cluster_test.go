package meta

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lakedata/lake/internal/etcdtest"
	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/internal/freeport"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// newMember starts a metadata node of the cluster on etcd that shares
// other's stage (or a new stage when other is nil).
func newMember(t *testing.T, etcd string, other *fixture) *fixture {
	t.Helper()
	return newMemberWith(t, etcd, other, nil)
}

// newMemberWith is newMember with prepare, when not nil, called on the
// fixture before it starts (to tune its config or wrap its stage).
func newMemberWith(t *testing.T, etcd string, other *fixture, prepare func(*fixture)) *fixture {
	t.Helper()
	var f *fixture
	if other == nil {
		f = &fixture{t: t}
		base := newFixture(t) // for its stage only
		base.stop()
		f.stage = base.stage
	} else {
		f = &fixture{t: t, stage: other.stage}
	}
	f.dataDir = filepath.Join(t.TempDir(), "data")
	f.etcd, f.listen = etcd, freeport.MustAddr(t)
	if prepare != nil {
		prepare(f)
	}
	f.start()
	t.Cleanup(f.stop)
	return f
}

func (f *fixture) status() *lakepb.ClusterStatus {
	f.t.Helper()
	var st lakepb.ClusterStatus
	if err := flightrpc.Action(context.Background(), f.fc, wire.ActionStatus, &lakepb.StatusRequest{}, &st); err != nil {
		f.t.Fatalf("status: %v", err)
	}
	return &st
}

// waitFor polls cond for up to 15 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (f *fixture) describe(table string, minVersion *int64) (*lakepb.TableInfo, error) {
	var info lakepb.TableInfo
	err := flightrpc.Action(context.Background(), f.fc, wire.ActionDescribeTable, &lakepb.DescribeTableRequest{Name: table, MinVersion: minVersion}, &info)
	return &info, err
}

func TestFollowerForwardsMutationsToLeader(t *testing.T) {
	etcd := etcdtest.Start(t)
	leader := newMember(t, etcd.Endpoint, nil)
	waitFor(t, "the first node to lead", func() bool { return leader.svc.canCommit() })
	follower := newMember(t, etcd.Endpoint, leader)
	waitFor(t, "the follower to learn the leader", func() bool { return follower.svc.cluster.Leader() == leader.listen })
	if follower.svc.canCommit() {
		t.Fatal("both nodes lead")
	}

	// A create sent to the follower is committed by the leader, and the
	// follower knows the table as soon as the call returns.
	follower.createTable("clips")
	if _, err := leader.svc.DescribeTable(context.Background(), "clips", nil); err != nil {
		t.Fatalf("the leader does not know the table the follower created: %v", err)
	}
	if _, err := follower.describe("clips", nil); err != nil {
		t.Fatalf("the follower does not know the table it just created: %v", err)
	}

	// One RecordBatch with a DataLocation, sent to the follower: exactly one
	// new version, committed by the leader.
	v := follower.putObject("a.mp4", []byte("frames"))
	rec := wiretest.FileRows([]string{"a.mp4"}, []wire.FileValue{v})
	defer rec.Release()
	res, err := follower.append("clips", "commit-a", rec)
	if err != nil {
		t.Fatalf("append through the follower: %v", err)
	}
	if res.Version != 1 || res.Duplicate {
		t.Fatalf("append result %+v, want version 1, not a duplicate", res)
	}
	hist, err := leader.svc.History(context.Background(), "clips", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist.Versions) != 2 || hist.Versions[0].Version != 1 || len(hist.Versions[0].CommitIds) != 1 || hist.Versions[0].CommitIds[0] != "commit-a" {
		t.Fatalf("leader history %v, want versions 1 (commit-a) and 0", hist.Versions)
	}

	// Read-your-writes on the follower, then its own index catches up
	// from the leader's announcement.
	info, err := follower.describe("clips", ptr(res.Version))
	if err != nil || info.Version < 1 || info.Rows != 1 {
		t.Fatalf("follower describe with min_version 1: %+v, %v", info, err)
	}
	if _, err := follower.describe("clips", ptr(int64(9))); err == nil {
		t.Fatal("min_version 9 of a table at version 1 was answered")
	}
	if got := follower.readNames(follower.snapshot("clips", nil)); len(got) != 1 || got[0] != "a.mp4" {
		t.Fatalf("follower snapshot rows %v", got)
	}

	// A retry of the same commit through the follower is a duplicate.
	res2, err := follower.append("clips", "commit-a", rec)
	if err != nil || res2.Version != 1 || !res2.Duplicate {
		t.Fatalf("retry through the follower: %+v, %v; want version 1, duplicate", res2, err)
	}

	// The Go API forwards too.
	goRes, err := follower.svc.Append(context.Background(), &lakepb.Append{Table: "clips", CommitId: "commit-b"}, []arrow.RecordBatch{rec})
	if err != nil || goRes.Version != 2 || goRes.Duplicate {
		t.Fatalf("Go API append on the follower: %+v, %v; want version 2", goRes, err)
	}
	if head := leader.svc.reg.lookup("clips").row().Head; head != 2 {
		t.Fatalf("leader head %d after the Go API append, want 2", head)
	}

	st := follower.status()
	if st.Leader != leader.listen || st.AnsweredBy != follower.listen || !st.Clustered || len(st.Members) != 2 {
		t.Fatalf("status %v", st)
	}
	for _, m := range st.Members {
		if m.Leader != (m.Addr == leader.listen) {
			t.Errorf("member %s: leader=%v", m.Addr, m.Leader)
		}
	}
}

// Closing the leader resigns: the follower leads at once, without waiting
// for the lease TTL, and commits on top of everything acknowledged.
func TestLeaderResignsOnClose(t *testing.T) {
	etcd := etcdtest.Start(t)
	a := newMember(t, etcd.Endpoint, nil)
	waitFor(t, "a to lead", func() bool { return a.svc.canCommit() })
	b := newMember(t, etcd.Endpoint, a)
	a.createTable("t")
	for i := range 3 {
		if _, err := a.appendOne("t", nameN(i), ""); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	a.stop()
	waitFor(t, "b to lead", func() bool { return b.svc.canCommit() })
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("b took %v to lead after a resigned; the TTL is 2s", took)
	}
	res, err := b.appendOne("t", nameN(3), "")
	if err != nil || res.Version != 4 {
		t.Fatalf("append on the new leader: %+v, %v; want version 4", res, err)
	}
}

// A node of a cluster whose etcd is unreachable refuses appends at once
// with Unavailable, keeps answering reads, and writes again once etcd is
// back.
func TestAppendsFailFastWithoutEtcd(t *testing.T) {
	etcd := etcdtest.Start(t)
	a := newMember(t, etcd.Endpoint, nil)
	waitFor(t, "a to lead", func() bool { return a.svc.canCommit() })
	a.createTable("t")
	if _, err := a.appendOne("t", nameN(0), ""); err != nil {
		t.Fatal(err)
	}
	etcd.Stop()
	waitFor(t, "a to stop leading", func() bool { return !a.svc.canCommit() })
	start := time.Now()
	_, err := a.appendOne("t", nameN(1), "")
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("append without etcd: %v, want Unavailable", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the refused append took %v", took)
	}
	if info, err := a.describe("t", nil); err != nil || info.Version != 1 {
		t.Fatalf("describe without etcd: %+v, %v", info, err)
	}
	etcd.Restart()
	waitFor(t, "a to lead again", func() bool { return a.svc.canCommit() })
	if res, err := a.appendOne("t", nameN(2), ""); err != nil || res.Version != 2 {
		t.Fatalf("append after etcd came back: %+v, %v", res, err)
	}
}
