package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/internal/etcdtest"
	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/internal/freeport"
	"github.com/lakedata/lake/internal/s3test"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// haTTL is the leadership lease of the clusters these tests run: short, so
// the tests are quick; the benchmark measures the 5 s default.
const haTTL = 2 * time.Second

// haCluster is meta nodes as lake processes on one S3 stage (versitygw),
// electing a leader through a real etcd.
type haCluster struct {
	t      testing.TB
	etcd   *etcdtest.Server
	gw     *s3test.Server
	bucket string
	dir    string
	ttl    time.Duration
	metas  []*metaNode
}

type metaNode struct {
	addr    string
	dataDir string
	env     []string
	p       *proc
}

func newHACluster(t testing.TB, nodes int, ttl time.Duration) *haCluster {
	t.Helper()
	c := &haCluster{t: t, etcd: etcdtest.Start(t), gw: s3test.Start(t), dir: t.TempDir(), ttl: ttl}
	c.gw.SetEnv(t)
	c.bucket = c.gw.NewBucket(t)
	for i := range nodes {
		c.metas = append(c.metas, &metaNode{addr: freeport.MustAddr(t), dataDir: filepath.Join(c.dir, fmt.Sprintf("meta%d", i))})
	}
	return c
}

// start runs meta node i (again, after a kill: same address and data dir).
func (c *haCluster) start(i int) {
	c.t.Helper()
	m := c.metas[i]
	m.p = startLakeEnv(c.t, m.env, "serve", "--role=meta", "--listen", m.addr, "--data-dir", m.dataDir,
		"--stage", "s3://"+c.bucket+"/lake", "--s3-endpoint", c.gw.Endpoint,
		"--etcd", c.etcd.Endpoint, "--session-ttl", c.ttl.String())
}

// startLeader starts node 0, waits until it leads, then starts the rest, so
// the tests know which node leads.
func (c *haCluster) startLeader() {
	c.t.Helper()
	c.start(0)
	c.waitLeader(c.metas[0].addr, 15*time.Second)
	for i := 1; i < len(c.metas); i++ {
		c.start(i)
	}
}

func (c *haCluster) metaList() string {
	var addrs []string
	for _, m := range c.metas {
		addrs = append(addrs, m.addr)
	}
	return strings.Join(addrs, ",")
}

func (c *haCluster) startQuery() *proc {
	c.t.Helper()
	return c.startQueryOn(c.metaList())
}

// startQueryOn starts a query node that knows only the meta nodes metas.
func (c *haCluster) startQueryOn(metas string) *proc {
	c.t.Helper()
	return startLake(c.t, "serve", "--role=query", "--listen", "127.0.0.1:0", "--meta", metas,
		"--data-dir", filepath.Join(c.dir, "query-"+uuid.NewString()[:8]))
}

// status asks one meta node for the cluster status.
func status1(ctx context.Context, addr string) (*lakepb.ClusterStatus, error) {
	fc, err := flightrpc.Dial(addr)
	if err != nil {
		return nil, err
	}
	defer fc.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var st lakepb.ClusterStatus
	err = flightrpc.Action(ctx, fc, wire.ActionStatus, &lakepb.StatusRequest{}, &st)
	return &st, err
}

// waitLeader waits until addr accepts writes as the leader ("" = any
// node) and returns the leader's address.
func (c *haCluster) waitLeader(addr string, within time.Duration) string {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, m := range c.metas {
			if m.p == nil || m.p.cmd.ProcessState != nil || (addr != "" && m.addr != addr) {
				continue
			}
			st, err := status1(context.Background(), m.addr)
			if err == nil && st.AcceptingWrites && st.AnsweredBy == m.addr {
				return m.addr
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	c.t.Fatalf("no meta node (want %q) led within %v", addr, within)
	return ""
}

// logRecords reads every log record of a table from the bucket.
func (c *haCluster) logRecords(ctx context.Context, tableID string) map[string]string {
	c.t.Helper()
	cl := c.gw.Client(c.t)
	list, err := cl.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(c.bucket), Prefix: aws.String("lake/_lake/tables/" + tableID + "/log/")})
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range list.Contents {
		obj, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(c.bucket), Key: o.Key})
		if err != nil {
			c.t.Fatal(err)
		}
		body, err := io.ReadAll(obj.Body)
		obj.Body.Close()
		if err != nil {
			c.t.Fatal(err)
		}
		out[*o.Key] = string(body)
	}
	return out
}

// processState is the state letter of /proc/PID/stat ("T" = stopped).
func processState(pid int) string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// ack is one acknowledged append.
type ack struct {
	commitID string
	name     string
	version  int64
	sent, at time.Time // when the append began, when it was acknowledged
}

// TestKillLeaderUnderLoad: 16 clients append through a query node to three
// meta nodes; the leader is killed with SIGKILL. Afterwards no acknowledged
// append is lost, none is duplicated, the versions have no gap, and writes
// were accepted again within TTL + 2 s.
func TestKillLeaderUnderLoad(t *testing.T) {
	c := newHACluster(t, 3, haTTL)
	c.startLeader()
	q := c.startQuery()
	ctx := withTimeout(t, 3*time.Minute)
	endpoint := "grpc://" + q.Addr()
	admin, err := client.Connect(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.CreateTable(ctx, "clips", nil, false); err != nil {
		t.Fatal(err)
	}

	const clients, maxPerClient = 16, 2000
	var (
		mu   sync.Mutex
		acks []ack
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range clients {
		cl, err := client.Connect(ctx, endpoint)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		put, err := cl.PutReader(ctx, "clips", fmt.Sprintf("seed-%02d", i), strings.NewReader(fmt.Sprintf("object %d", i)), client.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < maxPerClient; n++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("c%02d-%04d", i, n)
				id := uuid.NewString()
				sent := time.Now()
				rec := wiretest.FileRow(name, put.File)
				res, err := cl.Append(ctx, "clips", rec, client.AppendOptions{CommitID: id})
				rec.Release()
				if err != nil {
					t.Logf("client %d: append %s not acknowledged: %v", i, name, err)
					continue
				}
				mu.Lock()
				acks = append(acks, ack{commitID: id, name: name, version: res.GetVersion(), sent: sent, at: time.Now()})
				mu.Unlock()
			}
		}()
	}

	time.Sleep(time.Second) // load before the kill
	mu.Lock()
	before := len(acks)
	mu.Unlock()
	killedAt := time.Now()
	c.metas[0].p.kill(syscall.SIGKILL)
	newLeader := c.waitLeader("", 3*c.ttl)
	time.Sleep(1500 * time.Millisecond) // load after the failover
	close(stop)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	if before == 0 {
		t.Fatal("no append was acknowledged before the kill")
	}
	// Writes are accepted again when an append that began after the kill
	// is acknowledged (one the old leader answered just before it died
	// does not count).
	var firstAfter time.Time
	after := 0
	for _, a := range acks {
		if a.sent.After(killedAt) {
			after++
			if firstAfter.IsZero() || a.at.Before(firstAfter) {
				firstAfter = a.at
			}
		}
	}
	if after == 0 {
		t.Fatal("no append that began after the kill was acknowledged")
	}
	gap := firstAfter.Sub(killedAt)
	t.Logf("%d appends acknowledged before the kill, %d in all; %s leads; an append begun after the kill was acknowledged %v after it (TTL %v)",
		before, len(acks), newLeader, gap.Round(time.Millisecond), c.ttl)
	if gap > c.ttl+2*time.Second {
		t.Errorf("writes were accepted again %v after the kill; want within TTL + 2 s = %v", gap, c.ttl+2*time.Second)
	}

	// lake status through the query node: the new leader, and the two
	// live members (the dead one's key went with its lease).
	out := runLake(t, endpoint, "status")
	if !strings.Contains(out, "leader: "+newLeader) || strings.Contains(out, c.metas[0].addr) {
		t.Errorf("lake status after the failover:\n%s", out)
	}
	st, err := admin.Status(ctx)
	if err != nil || st.Leader != newLeader || len(st.Members) != 2 || !st.Clustered {
		t.Errorf("status after the failover: %v, %v", st, err)
	}

	// Every acknowledged append is in the log exactly once, at the version
	// it was acknowledged with; no commit id appears twice; no version is
	// missing.
	hist, err := admin.History(ctx, "clips", 0)
	if err != nil {
		t.Fatal(err)
	}
	at := map[string]int64{}
	var rows int64
	for i, v := range hist.Versions {
		if want := int64(len(hist.Versions) - 1 - i); v.Version != want {
			t.Fatalf("history position %d holds version %d, want %d: versions have a gap", i, v.Version, want)
		}
		rows += v.Rows
		for _, id := range v.CommitIds {
			if prev, dup := at[id]; dup {
				t.Errorf("commit %s is in versions %d and %d", id, prev, v.Version)
			}
			at[id] = v.Version
		}
	}
	for _, a := range acks {
		v, ok := at[a.commitID]
		if !ok {
			t.Errorf("acknowledged append %s (version %d) is lost", a.name, a.version)
		} else if v != a.version {
			t.Errorf("append %s was acknowledged as version %d but is in version %d", a.name, a.version, v)
		}
	}
	// Rows as SQL sees them: one per committed name, none twice.
	count, distinct := countRows(t, ctx, admin)
	if count != rows || distinct != count {
		t.Errorf("SQL sees %d rows (%d distinct names); the log holds %d rows", count, distinct, rows)
	}
}

// countRows returns count(*) and count(DISTINCT name) of clips.
func countRows(t testing.TB, ctx context.Context, c *client.Client) (int64, int64) {
	t.Helper()
	rdr, err := c.Query(ctx, "SELECT count(*) AS n, count(DISTINCT name) AS d FROM clips")
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	for rdr.Next() {
		rec := rdr.RecordBatch()
		if rec.NumRows() == 1 {
			return rec.Column(0).(*array.Int64).Value(0), rec.Column(1).(*array.Int64).Value(0)
		}
	}
	t.Fatalf("count query returned no row: %v", rdr.Err())
	return 0, 0
}

// TestStoppedLeaderCommitsNothing: the leader freezes (SIGSTOP, from a
// failpoint) right before it writes a log record; a follower takes over
// after the TTL and commits; the old leader, continued, loses the
// put-if-absent for that version, commits nothing and steps down.
func TestStoppedLeaderCommitsNothing(t *testing.T) {
	c := newHACluster(t, 2, haTTL)
	c.metas[0].env = []string{"LAKE_FAILPOINTS=meta-before-log-put=3:stop"}
	c.startLeader()
	a, b := c.metas[0], c.metas[1]
	ctx := withTimeout(t, 2*time.Minute)
	ca, err := client.Connect(ctx, "grpc://"+a.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	if _, err := ca.CreateTable(ctx, "clips", nil, false); err != nil {
		t.Fatal(err)
	}
	seed, err := ca.PutReader(ctx, "clips", "seed", strings.NewReader("seed object"), client.PutOptions{}) // version 1
	if err != nil {
		t.Fatal(err)
	}
	appendTo := func(addr, name, id string) (*lakepb.AppendResult, error) {
		fc, err := flightrpc.Dial(addr)
		if err != nil {
			return nil, err
		}
		defer fc.Close()
		rec := wiretest.FileRow(name, seed.File)
		defer rec.Release()
		return flightrpc.Append(ctx, fc, &lakepb.Append{Table: "clips", CommitId: id}, rec.Schema(), []arrow.RecordBatch{rec})
	}
	if res, err := appendTo(a.addr, "two", "commit-two"); err != nil || res.Version != 2 {
		t.Fatalf("second append: %+v, %v", res, err)
	}
	// The third commit freezes the leader before its log record.
	frozen := make(chan error, 1)
	go func() {
		_, err := appendTo(a.addr, "three", "commit-three")
		frozen <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for processState(a.p.cmd.Process.Pid) != "T" {
		if time.Now().After(deadline) {
			t.Fatal("the leader never stopped at its failpoint")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stoppedAt := time.Now()
	c.waitLeader(b.addr, c.ttl+5*time.Second)
	t.Logf("the follower leads %v after the leader froze (TTL %v)", time.Since(stoppedAt).Round(time.Millisecond), c.ttl)
	// The new leader commits version 3 and 4: the frozen one's version.
	for i, name := range []string{"b-three", "b-four"} {
		res, err := appendTo(b.addr, name, "commit-"+name)
		if err != nil || res.Version != int64(3+i) {
			t.Fatalf("append on the new leader: %+v, %v; want version %d", res, err, 3+i)
		}
	}

	if err := a.p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-frozen:
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("the frozen append ended with %v, want Unavailable", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the frozen append did not end after SIGCONT")
	}
	// It stepped down: b leads, a says so too.
	deadline = time.Now().Add(10 * time.Second)
	for {
		st, err := status1(ctx, a.addr)
		if err == nil && st.Leader == b.addr {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the old leader does not see the new one: %v, %v", st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(a.p.output(), "stopped leading") {
		t.Errorf("the old leader never logged that it stopped leading")
	}
	cb, err := client.Connect(ctx, "grpc://"+b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	hist, err := cb.History(ctx, "clips", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := len(hist.Versions) - 1; i >= 1; i-- {
		got = append(got, strconv.FormatInt(hist.Versions[i].Version, 10)+":"+strings.Join(hist.Versions[i].CommitIds, "+"))
	}
	if strings.Contains(strings.Join(got, " "), "commit-three") || len(hist.Versions) != 5 {
		t.Fatalf("log after the old leader woke up: %v; want versions 1..4, none from the frozen commit", got)
	}
	// The stage log is the truth (the new leader would learn of a record
	// written behind its back only at its next commit): versions 0..4, and
	// none holds the frozen commit.
	info, err := cb.Describe(ctx, "clips")
	if err != nil {
		t.Fatal(err)
	}
	records := c.logRecords(ctx, info.Id)
	if len(records) != 5 {
		t.Fatalf("the stage log holds %d records, want 5 (versions 0..4)", len(records))
	}
	for key, body := range records {
		if strings.Contains(body, "commit-three") {
			t.Fatalf("the old leader committed %s after it woke up", key)
		}
	}
	// A retry of the frozen append through the old leader (now a
	// follower) commits it once, on top.
	res, err := appendTo(a.addr, "three", "commit-three")
	if err != nil || res.Version != 5 || res.Duplicate {
		t.Fatalf("retry of the frozen append: %+v, %v; want version 5", res, err)
	}
}

// TestEtcdUnreachable: with etcd down, appends through the query node fail
// fast with Unavailable and SQL keeps working; with etcd back, appends are
// accepted again.
func TestEtcdUnreachable(t *testing.T) {
	c := newHACluster(t, 2, haTTL)
	c.startLeader()
	q := c.startQuery()
	ctx := withTimeout(t, 2*time.Minute)
	endpoint := "grpc://" + q.Addr()
	seed := seedTable(t, ctx, endpoint)
	cl, err := client.Connect(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	fc, err := flightrpc.Dial(q.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	appendOnce := func(name string) (*lakepb.AppendResult, error) {
		rec := wiretest.FileRow(name, seed)
		defer rec.Release()
		return flightrpc.Append(ctx, fc, &lakepb.Append{Table: "clips", CommitId: uuid.NewString()}, rec.Schema(), []arrow.RecordBatch{rec})
	}

	c.etcd.Stop()
	time.Sleep(c.ttl + time.Second) // the leader can no longer prove its lease
	start := time.Now()
	_, err = appendOnce("during")
	took := time.Since(start)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("append with etcd down: %v, want Unavailable", err)
	}
	if took > 2*time.Second {
		t.Errorf("the refused append took %v; want it to fail fast", took)
	}
	t.Logf("append with etcd down refused in %v: %v", took.Round(time.Millisecond), err)
	if n, _ := countRows(t, ctx, cl); n != 1 {
		t.Errorf("SQL with etcd down sees %d rows, want 1", n)
	}

	c.etcd.Restart()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := appendOnce("after")
		if err == nil {
			t.Logf("appends accepted %v after etcd came back (version %d)", time.Since(deadline.Add(-30*time.Second)).Round(time.Millisecond), res.Version)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("appends not accepted 30 s after etcd came back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n, _ := countRows(t, ctx, cl); n != 2 {
		t.Errorf("SQL sees %d rows, want 2", n)
	}
}

// TestConcurrentCreatesDuringLeaderChange: the leader freezes in the middle
// of creating a table (its creation record written, its catalog entry
// not); a follower takes over and creates the same table; the old leader,
// continued, loses: exactly one create succeeds and every node sees the
// winner's table.
func TestConcurrentCreatesDuringLeaderChange(t *testing.T) {
	c := newHACluster(t, 2, haTTL)
	c.metas[0].env = []string{"LAKE_FAILPOINTS=meta-before-catalog-put=1:stop"}
	c.startLeader()
	a, b := c.metas[0], c.metas[1]
	ctx := withTimeout(t, 2*time.Minute)
	create := func(addr string) (*lakepb.TableInfo, error) {
		fc, err := flightrpc.Dial(addr)
		if err != nil {
			return nil, err
		}
		defer fc.Close()
		var info lakepb.TableInfo
		req := &lakepb.CreateTableRequest{Name: "clips", Schema: wire.EncodeSchema(wire.DefaultSchema())}
		err = flightrpc.Action(ctx, fc, wire.ActionCreateTable, req, &info)
		return &info, err
	}
	results := make(chan error, 2)
	go func() { _, err := create(a.addr); results <- err }()
	deadline := time.Now().Add(10 * time.Second)
	for processState(a.p.cmd.Process.Pid) != "T" {
		if time.Now().After(deadline) {
			t.Fatal("the leader never stopped at its failpoint")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.waitLeader(b.addr, c.ttl+5*time.Second)
	info, errB := create(b.addr)
	results <- errB
	if err := a.p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var ok, refused int
	var seen []error
	for range 2 {
		select {
		case err := <-results:
			seen = append(seen, err)
			switch {
			case err == nil:
				ok++
			case status.Code(err) == codes.AlreadyExists || status.Code(err) == codes.Unavailable:
				refused++
			default:
				t.Errorf("create ended with %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("a create did not end")
		}
	}
	if ok != 1 || refused != 1 {
		t.Fatalf("%d creates succeeded and %d were refused (%v); want exactly one success", ok, refused, seen)
	}
	if errB != nil {
		t.Fatalf("the new leader's create failed (%v); the frozen old leader must not win", errB)
	}
	// Both nodes know one table, the winner's.
	for _, m := range c.metas {
		cl, err := client.Connect(ctx, "grpc://"+m.addr)
		if err != nil {
			t.Fatal(err)
		}
		tables, err := cl.Tables(ctx)
		cl.Close()
		if err != nil || len(tables) != 1 || tables[0].Id != info.Id {
			t.Fatalf("%s lists %v (%v); want the one table %s", m.addr, tables, err, info.Id)
		}
	}
}
