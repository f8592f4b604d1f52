package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/internal/freeport"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/local"
	"github.com/lakedata/lake/roles/meta"
	"github.com/lakedata/lake/wire"
)

// gcCount and gcResult are what `lake gc --json` prints.
type gcCount struct {
	Count int64 `json:"count"`
	Bytes int64 `json:"bytes"`
}

type gcResult struct {
	DryRun            bool    `json:"dry_run"`
	DataFiles         gcCount `json:"data_files"`
	Objects           gcCount `json:"objects"`
	Uploads           gcCount `json:"uploads"`
	TempFiles         gcCount `json:"temp_files"`
	ReferencedObjects int64   `json:"referenced_objects"`
}

// gcLake is meta and query as processes on one stage, with table clips
// created, a client of the query role and the stage opened by the test.
type gcLake struct {
	stage    compactStage
	store    objects.Store
	metaArgs []string // to start meta again on the same data directory
	meta     *proc
	endpoint string
	cl       *client.Client
}

// startGCLake starts meta (with metaEnv: failpoints) at a fixed address,
// so the query role finds it again after a restart, and a query role.
// Background compaction is off: the tests compact when they mean to.
func startGCLake(t *testing.T, stage compactStage, metaEnv []string) *gcLake {
	t.Helper()
	dir := t.TempDir()
	l := &gcLake{stage: stage, store: stage.open(t)}
	l.metaArgs = append([]string{"serve", "--role=meta", "--listen", freeport.MustAddr(t), "--data-dir", filepath.Join(dir, "meta"),
		"--compact-min-files", "0"}, stage.flags...)
	l.meta = startLakeEnv(t, metaEnv, l.metaArgs...)
	q := startLake(t, "serve", "--role=query", "--listen", "127.0.0.1:0", "--meta", l.meta.Addr(), "--data-dir", filepath.Join(dir, "query"))
	l.endpoint = "grpc://" + q.Addr()
	ctx := withTimeout(t, 3*time.Minute)
	cl, err := client.Connect(ctx, l.endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	l.cl = cl
	if _, err := cl.CreateTable(ctx, "clips", nil, false); err != nil {
		t.Fatal(err)
	}
	return l
}

// gc runs `lake gc --json` with args and returns what it printed.
func (l *gcLake) gc(t *testing.T, args ...string) gcResult {
	t.Helper()
	out := runLake(t, l.endpoint, append([]string{"gc", "--json"}, args...)...)
	var res gcResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("lake gc %q printed %q: %v", args, out, err)
	}
	return res
}

// put puts a small object with a row of its own and returns its FILE value.
func (l *gcLake) put(t *testing.T, ctx context.Context, name string) wire.FileValue {
	t.Helper()
	res, err := l.cl.PutReader(ctx, "clips", name, strings.NewReader("bytes of "+name), client.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res.File
}

// orphan uploads an object straight to the stage, as a put that died
// before its append would have, and returns its key.
func (l *gcLake) orphan(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	key := objects.NewObjectKey(name, time.Now())
	if _, err := l.store.Put(ctx, key, strings.NewReader("never committed: "+name), objects.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	return key
}

// objectKeys lists what the stage holds under objects/.
func (l *gcLake) objectKeys(t *testing.T) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	for info, err := range l.store.List(context.Background(), wire.ObjectsPrefix) {
		if err != nil {
			t.Fatal(err)
		}
		keys[info.Key] = true
	}
	return keys
}

// currentFiles are the data files of the table's current version.
func (l *gcLake) currentFiles(t *testing.T, ctx context.Context) (tableID string, files map[string]bool) {
	t.Helper()
	info, err := l.cl.Describe(ctx, "clips")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := l.cl.Snapshot(ctx, "clips", nil)
	if err != nil {
		t.Fatal(err)
	}
	files = map[string]bool{}
	for _, f := range snap.GetFiles() {
		files[f.GetKey()] = true
	}
	return info.GetId(), files
}

// checkLive fails t unless every value's object is in the stage with the
// bytes its sha256 names, and the table has exactly these rows.
func (l *gcLake) checkLive(t *testing.T, ctx context.Context, live []wire.FileValue) {
	t.Helper()
	for _, v := range live {
		b, err := objects.ReadAll(ctx, l.store, v.Key)
		if err != nil {
			t.Errorf("live object %s: %v", v.Key, err)
			continue
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != v.SHA256 {
			t.Errorf("live object %s no longer matches its sha256", v.Key)
		}
	}
	if n := countTable(t, ctx, l.cl, "clips"); n != int64(len(live)) {
		t.Errorf("SQL count(*) is %d, want %d live rows", n, len(live))
	}
}

// getMatches reads v back with `lake get` and fails t unless its bytes
// match the row's sha256.
func (l *gcLake) getMatches(t *testing.T, v wire.FileValue) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "got")
	runLake(t, l.endpoint, "get", "--table", "clips", "--key", v.Key, "-o", dst)
	b, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != v.SHA256 {
		t.Errorf("lake get %s after gc: sha256 %x, want %s", v.Key, sum, v.SHA256)
	}
}

// gcTestGrace is the grace of TestGCAfterExpiry: the old orphan is aged
// past it, the young one is uploaded right before gc. It leaves room for
// a slow machine and for a gateway that dates objects to the second.
const gcTestGrace = 3 * time.Second

// TestGCAfterExpiry: on a local stage and on versitygw, after `lake rm`,
// a compaction and `lake table expire --keep-last 1`, `lake gc --grace 3s`
// frees the orphan older than the grace, the deleted row's object and the
// data files only expired versions used, and keeps the young orphan, the
// live rows' objects (read back through `lake get`, matching their
// sha256) and the current version's data files; a dry run before it
// reports the same and frees nothing. Leftovers: an old temp file of the
// local stage goes, a young one stays; an unfinished multipart upload on
// versitygw stays, since gc never cuts off one younger than a minute
// (and the gateway dates it, so the test cannot age it). A gc with no
// grace then frees the young orphan.
func TestGCAfterExpiry(t *testing.T) {
	for _, st := range compactStages {
		t.Run(st.name, func(t *testing.T) { gcAfterExpiry(t, st.make(t)) })
	}
}

func gcAfterExpiry(t *testing.T, stage compactStage) {
	l := startGCLake(t, stage, nil)
	ctx := withTimeout(t, 2*time.Minute)
	var live []wire.FileValue
	for _, name := range []string{"a.bin", "b.bin", "c.bin", "d.bin"} {
		live = append(live, l.put(t, ctx, name))
	}
	deleted := live[1]
	live = append(live[:1], live[2:]...)
	runLake(t, l.endpoint, "rm", "--table", "clips", "--key", deleted.Key)
	runLake(t, l.endpoint, "table", "compact", "clips")
	runLake(t, l.endpoint, "table", "expire", "clips", "--keep-last", "1")
	tableID, current := l.currentFiles(t, ctx)
	before := dataFiles(t, l.store, tableID)
	if len(before) <= len(current) {
		t.Fatalf("%d data files in the stage, %d current: the compaction and expiry left no garbage", len(before), len(current))
	}
	leftovers := newLeftovers(t, ctx, stage)

	old := l.orphan(t, ctx, "old-orphan.bin")
	time.Sleep(gcTestGrace + 2*time.Second)
	young := l.orphan(t, ctx, "young-orphan.bin")
	want := gcResult{
		DataFiles:         gcCount{Count: int64(len(before) - len(current))},
		Objects:           gcCount{Count: 2}, // the old orphan, the deleted row's
		Uploads:           gcCount{Count: 0}, // the young upload stays
		TempFiles:         gcCount{Count: leftovers.oldTemps},
		ReferencedObjects: int64(len(live)),
	}
	grace := "--grace=" + gcTestGrace.String()
	dry := l.gc(t, grace, "--dry-run")
	res := l.gc(t, grace)
	for _, c := range []struct {
		what    string
		got     gcResult
		wantDry bool
	}{{"dry run", dry, true}, {"gc", res, false}} {
		got := c.got
		got.DataFiles.Bytes, got.Objects.Bytes, got.Uploads.Bytes, got.TempFiles.Bytes = 0, 0, 0, 0
		w := want
		w.DryRun = c.wantDry
		if got != w {
			t.Errorf("%s: %+v, want counts %+v", c.what, c.got, w)
		}
	}
	if res.Objects.Bytes != int64(len("never committed: old-orphan.bin"))+deleted.Size {
		t.Errorf("gc freed %d bytes of objects, want the old orphan's and the deleted row's", res.Objects.Bytes)
	}

	wantKeys := map[string]bool{young: true}
	for _, v := range live {
		wantKeys[v.Key] = true
	}
	if got := l.objectKeys(t); fmt.Sprint(got) != fmt.Sprint(wantKeys) {
		t.Errorf("objects after gc %v, want the live ones and the young orphan %v (old orphan %s, deleted %s)", got, wantKeys, old, deleted.Key)
	}
	if got := dataFiles(t, l.store, tableID); fmt.Sprint(got) != fmt.Sprint(current) {
		t.Errorf("data files after gc %v, want the current version's %v", got, current)
	}
	leftovers.check(t, ctx)
	l.checkLive(t, ctx, live)
	l.getMatches(t, live[0])

	if res := l.gc(t, "--grace=0s"); res.Objects.Count != 1 || res.DataFiles.Count != 0 {
		t.Errorf("gc with no grace: %+v, want the young orphan only", res)
	}
	if l.objectKeys(t)[young] {
		t.Error("the young orphan outlived a gc with no grace")
	}
	l.checkLive(t, ctx, live)
}

// leftovers are what failed writes left in a stage for TestGCAfterExpiry.
type leftovers struct {
	oldTemps int64
	check    func(t *testing.T, ctx context.Context) // after gc: the old ones gone, the young kept
}

func newLeftovers(t *testing.T, ctx context.Context, stage compactStage) leftovers {
	t.Helper()
	if dir, ok := strings.CutPrefix(stage.uri, "file://"); ok {
		return localLeftovers(t, dir)
	}
	return s3Leftovers(t, ctx, stage)
}

// localLeftovers writes two temp files into the local stage, as writes
// that crashed before their rename: one two hours old, one fresh.
func localLeftovers(t *testing.T, dir string) leftovers {
	tmp := filepath.Join(dir, local.TempDir)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	crashed, inFlight := filepath.Join(tmp, "put-crashed-long-ago"), filepath.Join(tmp, "put-in-flight")
	for _, p := range []string{crashed, inFlight} {
		if err := os.WriteFile(p, []byte("half a file"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(crashed, long, long); err != nil {
		t.Fatal(err)
	}
	return leftovers{oldTemps: 1, check: func(t *testing.T, _ context.Context) {
		if _, err := os.Stat(crashed); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the old temp file after gc: %v, want it gone", err)
		}
		if _, err := os.Stat(inFlight); err != nil {
			t.Errorf("the young temp file after gc: %v, want it kept", err)
		}
	}}
}

// s3Leftovers starts a multipart upload under the stage prefix with the
// AWS SDK, as a put that died after its first part.
func s3Leftovers(t *testing.T, ctx context.Context, stage compactStage) leftovers {
	bucket, prefix, _ := strings.Cut(strings.TrimPrefix(stage.uri, "s3://"), "/")
	cfg, err := config.LoadDefaultConfig(ctx) // the gateway's credentials, from SetEnv
	if err != nil {
		t.Fatal(err)
	}
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(stage.s3.Endpoint)
		o.UsePathStyle = true
	})
	key := prefix + "/" + objects.NewObjectKey("unfinished.bin", time.Now())
	up, err := s3c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s3c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: up.UploadId,
		PartNumber: aws.Int32(1), Body: bytes.NewReader([]byte("the first part"))}); err != nil {
		t.Fatal(err)
	}
	return leftovers{check: func(t *testing.T, ctx context.Context) {
		out, err := s3c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket), Prefix: aws.String(prefix + "/")})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range out.Uploads {
			if aws.ToString(u.UploadId) == aws.ToString(up.UploadId) {
				return
			}
		}
		t.Errorf("gc aborted the multipart upload of %s, younger than a minute", key)
	}}
}

// TestGCBesideWritersKeepsAcknowledgedRows: `lake gc --grace 0s` runs in
// a loop while four writers put fresh objects, each with its row, through
// the query role; every other put leaves its object unreferenced for up
// to 120 ms before the append, as a slow client does. A put may be refused with FailedPrecondition (gc was
// freeing its object, which no row referenced yet), but at the end every
// acknowledged row's object is in the stage with its bytes, and SQL
// count(*) is the number of acknowledged rows.
func TestGCBesideWritersKeepsAcknowledgedRows(t *testing.T) {
	for _, st := range compactStages {
		t.Run(st.name, func(t *testing.T) { gcBesideWriters(t, st.make(t)) })
	}
}

func gcBesideWriters(t *testing.T, stage compactStage) {
	const writers, each, maxGCs = 4, 40, 100
	l := startGCLake(t, stage, nil)
	ctx := withTimeout(t, 2*time.Minute)
	var (
		mu      sync.Mutex
		acked   []wire.FileValue
		refused int
		wg      sync.WaitGroup
	)
	done := make(chan struct{})
	for w := range writers {
		cl, err := client.Connect(ctx, l.endpoint)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				name := fmt.Sprintf("w%d-%03d.bin", w, i)
				var v wire.FileValue
				var err error
				if i%2 == 0 {
					var res *client.PutResult
					if res, err = cl.PutReader(ctx, "clips", name, strings.NewReader("bytes of "+name), client.PutOptions{}); err == nil {
						v = res.File
					}
				} else {
					v, err = l.slowPut(ctx, cl, name, time.Duration(i%7)*20*time.Millisecond)
				}
				mu.Lock()
				switch {
				case err == nil:
					acked = append(acked, v)
				case errors.Is(err, wire.ErrObjectMissing):
					refused++ // refused before it was acknowledged: allowed
				default:
					t.Errorf("writer %d put %d: %v", w, i, err)
				}
				mu.Unlock()
				if err != nil && !errors.Is(err, wire.ErrObjectMissing) {
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	gcs, during, freed := 0, 0, int64(0)
	for running := true; running && gcs < maxGCs; gcs++ {
		select {
		case <-done:
			running = false // one more after the last put
		default:
		}
		freed += l.gc(t, "--grace=0s").Objects.Count
		select {
		case <-done:
		default:
			during++ // ended while writers were still putting
		}
	}
	<-done
	if t.Failed() {
		return
	}
	if during == 0 {
		t.Fatal("no collection ran while the writers put: the race this test is about never happened")
	}
	l.checkLive(t, ctx, acked)
	t.Logf("%d puts acknowledged, %d refused, %d objects freed by %d collections (%d while the writers put)", len(acked), refused, freed, gcs, during)
}

// slowPut uploads an object straight to the stage and appends its row
// through cl only after pause, as a client on a slow link would: the
// object is an orphan meanwhile, which a gc with no grace may free.
func (l *gcLake) slowPut(ctx context.Context, cl *client.Client, name string, pause time.Duration) (wire.FileValue, error) {
	info, err := l.store.Put(ctx, objects.NewObjectKey(name, time.Now()), strings.NewReader("bytes of "+name), objects.PutOptions{})
	if err != nil {
		return wire.FileValue{}, err
	}
	time.Sleep(pause)
	v := wire.FileValue{Key: info.Key, Size: info.Size, SHA256: info.SHA256, ETag: info.ETag, UploadedAt: time.Now().UTC()}
	rec := wiretest.FileRow(name, v)
	defer rec.Release()
	_, err = cl.Append(ctx, "clips", rec, client.AppendOptions{})
	return v, err
}

// TestGCKilledMidwayLosesNothing: meta dies (SIGKILL, from a failpoint)
// in the middle of `lake gc --grace 0s` over four orphans, a deleted
// row's object and the data files of expired versions: once the doomed
// objects are published and before anything is freed (gc-before-free),
// and between frees (gc-between-frees: on the local stage after the
// second object; on versitygw, which deletes in batches, after the first
// batch, every doomed object, with the data files still to go).
// Restarted on the same data directory, the next `lake gc --grace 0s`
// frees the rest, and every live row's object is still there with its
// bytes, through SQL and `lake get`.
func TestGCKilledMidwayLosesNothing(t *testing.T) {
	for _, c := range []struct {
		stage       string
		failpoint   string
		freedBefore int // garbage objects freed before the kill
	}{
		{"local", meta.FailGCBeforeFree, 0},
		{"local", meta.FailGCBetweenFrees + "=2", 2},
		{"s3", meta.FailGCBeforeFree, 0},
		{"s3", meta.FailGCBetweenFrees + "=1", gcKillGarbage},
	} {
		for _, st := range compactStages {
			if st.name == c.stage {
				t.Run(c.stage+"/"+c.failpoint, func(t *testing.T) { gcKilledMidway(t, st.make(t), c.failpoint, c.freedBefore) })
			}
		}
	}
}

// gcKillGarbage is how many garbage objects TestGCKilledMidwayLosesNothing
// makes: four orphans and a deleted row's object.
const gcKillGarbage = 5

func gcKilledMidway(t *testing.T, stage compactStage, failpoint string, freedBefore int) {
	l := startGCLake(t, stage, []string{"LAKE_FAILPOINTS=" + failpoint})
	ctx := withTimeout(t, 2*time.Minute)
	var live []wire.FileValue
	for _, name := range []string{"a.bin", "b.bin", "c.bin", "d.bin"} {
		live = append(live, l.put(t, ctx, name))
	}
	deleted := live[3]
	live = live[:3]
	runLake(t, l.endpoint, "rm", "--table", "clips", "--key", deleted.Key)
	runLake(t, l.endpoint, "table", "expire", "clips", "--keep-last", "1")
	garbage := map[string]bool{deleted.Key: true}
	for i := range gcKillGarbage - 1 {
		garbage[l.orphan(t, ctx, fmt.Sprintf("orphan-%d.bin", i))] = true
	}
	tableID, current := l.currentFiles(t, ctx)
	before := dataFiles(t, l.store, tableID)
	if len(before) <= len(current) {
		t.Fatalf("%d data files, %d current: the expiry left none to free", len(before), len(current))
	}

	if out, stderr, code := runLakeExit(t, l.endpoint, "gc", "--grace=0s"); code == 0 {
		t.Fatalf("lake gc succeeded while meta was to die at %s: %s", failpoint, out+stderr)
	}
	select {
	case <-l.meta.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("meta did not die at %s", failpoint)
	}
	l.meta.kill(syscall.SIGKILL) // reaps it; it is dead already
	if ws, ok := l.meta.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("meta ended with %v, want SIGKILL from the failpoint", l.meta.cmd.ProcessState)
	}
	keys := l.objectKeys(t)
	left := 0
	for k := range garbage {
		if keys[k] {
			left++
		}
	}
	if left != len(garbage)-freedBefore {
		t.Errorf("%d of %d garbage objects left at the kill, want %d freed", left, len(garbage), freedBefore)
	}
	for _, v := range live {
		if !keys[v.Key] {
			t.Errorf("live object %s gone at the kill", v.Key)
		}
	}
	if n := len(dataFiles(t, l.store, tableID)); n != len(before) {
		t.Errorf("%d of %d data files left at the kill, want all: objects go first", n, len(before))
	}

	l.meta = startLake(t, l.metaArgs...) // no failpoint now
	waitForTable(t, l.cl)
	res := l.gc(t, "--grace=0s")
	if res.Objects.Count != int64(left) || res.DataFiles.Count != int64(len(before)-len(current)) {
		t.Errorf("gc after the restart: %+v, want the %d objects left and the %d expired data files", res, left, len(before)-len(current))
	}
	keys = l.objectKeys(t)
	for k := range garbage {
		if keys[k] {
			t.Errorf("garbage object %s outlived the second gc", k)
		}
	}
	if got := dataFiles(t, l.store, tableID); fmt.Sprint(got) != fmt.Sprint(current) {
		t.Errorf("data files after the second gc %v, want the current version's %v", got, current)
	}
	l.checkLive(t, ctx, live)
	l.getMatches(t, live[1])
}
