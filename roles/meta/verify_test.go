package meta

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/lakedata/lake/internal/etcdtest"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// noBackground turns the background verifier off, so a test decides what
// is read when.
func noBackground(c *Config) { c.VerifyRate = 0 }

// stagePath is where the local stage keeps key.
func (f *fixture) stagePath(key string) string {
	return filepath.Join(f.stage.Dir(), filepath.FromSlash(key))
}

func randomBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func sumHex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// appendRows appends one row per value, named names[i], as one version.
func (f *fixture) appendRows(table string, names []string, values []wire.FileValue) {
	f.t.Helper()
	rec := wiretest.FileRows(names, values)
	defer rec.Release()
	if _, err := f.append(table, "", rec); err != nil {
		f.t.Fatalf("append %v: %v", names, err)
	}
}

// verifyRun runs a whole lake.table.verify run over Flight, one call after
// another, and returns its mismatches, the last progress and the number of
// calls.
func verifyRun(t testing.TB, fc flight.Client, table string, all bool) ([]*lakepb.VerifyMismatch, *lakepb.VerifyProgress, int) {
	t.Helper()
	var (
		mismatches []*lakepb.VerifyMismatch
		cursor     []byte
		read       int64
	)
	for calls := 1; ; calls++ {
		ms, prog, err := verifyCall(context.Background(), fc, &lakepb.VerifyRequest{Table: table, AllVersions: all, Cursor: cursor})
		if err != nil {
			t.Fatalf("verify %s, call %d: %v", table, calls, err)
		}
		mismatches = append(mismatches, ms...)
		read += prog.GetBytesRead()
		if len(prog.GetNext()) == 0 {
			prog.BytesRead = read // the whole run's
			return mismatches, prog, calls
		}
		cursor = prog.GetNext()
	}
}

// verifyCall makes one call and checks its answer's shape: mismatches,
// then exactly one progress, last.
func verifyCall(ctx context.Context, fc flight.Client, req *lakepb.VerifyRequest) ([]*lakepb.VerifyMismatch, *lakepb.VerifyProgress, error) {
	body, err := proto.Marshal(req)
	if err != nil {
		return nil, nil, err
	}
	stream, err := fc.DoAction(ctx, &flight.Action{Type: wire.ActionVerify, Body: body})
	if err != nil {
		return nil, nil, err
	}
	var ms []*lakepb.VerifyMismatch
	var prog *lakepb.VerifyProgress
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		if prog != nil {
			return nil, nil, errors.New("a result after the progress")
		}
		var res lakepb.VerifyResult
		if err := proto.Unmarshal(r.GetBody(), &res); err != nil {
			return nil, nil, err
		}
		switch {
		case res.GetMismatch() != nil:
			ms = append(ms, res.GetMismatch())
		case res.GetProgress() != nil:
			prog = res.GetProgress()
		default:
			return nil, nil, errors.New("an empty result")
		}
	}
	if prog == nil {
		return nil, nil, errors.New("no progress at the end of the answer")
	}
	if int(prog.GetMismatches()) != len(ms) {
		return nil, nil, errors.New("the progress counts other mismatches than were sent")
	}
	return ms, prog, nil
}

func byKey(ms []*lakepb.VerifyMismatch) map[string][]*lakepb.VerifyMismatch {
	out := map[string][]*lakepb.VerifyMismatch{}
	for _, m := range ms {
		out[m.GetKey()] = append(out[m.GetKey()], m)
	}
	return out
}

// TestVerifyFindsEveryKindOfMismatch: a row with a wrong sha256, a
// truncated object, a deleted one, and a directory and a symbolic link in
// objects' places are
// each reported with the row's name and what is wrong; the healthy rows
// and an object shared by two rows are not, and the shared object is read
// once.
func TestVerifyFindsEveryKindOfMismatch(t *testing.T) {
	f := newFixture(t)
	f.restartWith(noBackground)
	f.createTable("clips")

	good := f.putObject("good.bin", randomBytes(t, 3000))
	shared := f.putObject("shared.bin", randomBytes(t, 5000))
	liar := f.putObject("liar.bin", randomBytes(t, 4000))
	liar.SHA256 = sumHex([]byte("other bytes")) // the client claims a sum the bytes do not have
	truncated := f.putObject("truncated.bin", randomBytes(t, 6000))
	gone := f.putObject("gone.bin", randomBytes(t, 100))
	dir := f.putObject("dir.bin", randomBytes(t, 100))
	link := f.putObject("link.bin", randomBytes(t, 100))
	f.appendRows("clips", []string{"good", "shared-1", "liar"}, []wire.FileValue{good, shared, liar})
	f.appendRows("clips", []string{"shared-2", "truncated", "gone", "dir", "link"}, []wire.FileValue{shared, truncated, gone, dir, link})

	if err := os.Truncate(f.stagePath(truncated.Key), 1000); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(f.stagePath(gone.Key)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(f.stagePath(dir.Key)); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(f.stagePath(dir.Key), 0o755); err != nil {
		t.Fatal(err)
	}
	// A link in an object's place: the stage refuses to read through it.
	if err := os.Remove(f.stagePath(link.Key)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(f.stagePath(good.Key), f.stagePath(link.Key)); err != nil {
		t.Fatal(err)
	}

	ms, prog, _ := verifyRun(t, f.fc, "clips", false)
	got := byKey(ms)
	want := map[string]struct {
		name    string
		row     int64
		version int64
		problem lakepb.VerifyProblem
	}{
		liar.Key:      {"liar", 3, 1, lakepb.VerifyProblem_VERIFY_PROBLEM_SHA256_DIFFERS},
		truncated.Key: {"truncated", 5, 2, lakepb.VerifyProblem_VERIFY_PROBLEM_SIZE_DIFFERS},
		gone.Key:      {"gone", 6, 2, lakepb.VerifyProblem_VERIFY_PROBLEM_OBJECT_MISSING},
		dir.Key:       {"dir", 7, 2, lakepb.VerifyProblem_VERIFY_PROBLEM_NOT_REGULAR_FILE},
		link.Key:      {"link", 8, 2, lakepb.VerifyProblem_VERIFY_PROBLEM_NOT_REGULAR_FILE},
	}
	if len(ms) != len(want) {
		t.Errorf("%d mismatches, want %d: %v", len(ms), len(want), ms)
	}
	for key, w := range want {
		if len(got[key]) != 1 {
			t.Errorf("%s: %d mismatches, want 1", key, len(got[key]))
			continue
		}
		m := got[key][0]
		if m.GetProblem() != w.problem || m.GetName() != w.name || m.GetRow() != w.row || m.GetAddedInVersion() != w.version || m.GetColumn() != "file" {
			t.Errorf("%s: got %v, want %+v", key, m, w)
		}
	}
	if m := got[liar.Key]; len(m) == 1 && (m[0].GetActualSha256() == liar.SHA256 || m[0].GetActualSize() != liar.Size || m[0].GetClaimedSha256() != liar.SHA256) {
		t.Errorf("the liar's mismatch does not tell both sums apart: %v", m[0])
	}
	if m := got[truncated.Key]; len(m) == 1 && (m[0].GetActualSize() != 1000 || m[0].GetClaimedSize() != 6000) {
		t.Errorf("the truncated object's sizes: %v", m[0])
	}
	if prog.GetObjects() != 7 || prog.GetObjectsDone() != 7 || prog.GetVersion() != 2 {
		t.Errorf("progress %v, want 7 objects (8 rows, one object shared) done at version 2", prog)
	}
	// Read: good, shared once, liar. Not the truncated object (no row
	// claims its size), nor the missing ones.
	if wantRead := good.Size + shared.Size + liar.Size; prog.GetBytesRead() != wantRead {
		t.Errorf("read %d bytes, want %d: the shared object once, nothing whose size no row claims", prog.GetBytesRead(), wantRead)
	}

	// A healthy table reports nothing.
	f.createTable("healthy")
	f.appendRows("healthy", []string{"a", "b"}, []wire.FileValue{f.putObject("a", randomBytes(t, 10)), f.putObject("b", randomBytes(t, 20))})
	ms, prog, _ = verifyRun(t, f.fc, "healthy", true)
	if len(ms) != 0 || prog.GetObjects() != 2 || prog.GetBytesRead() != 30 {
		t.Errorf("healthy table: mismatches %v, progress %v", ms, prog)
	}
}

// TestVerifyRowNumbersWithoutANameColumn: a table without a name column
// reports rows by number only.
func TestVerifyRowNumbersWithoutANameColumn(t *testing.T) {
	f := newFixture(t)
	f.restartWith(noBackground)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "label", Type: arrow.BinaryTypes.String, Nullable: true},
		wire.FileField("file", false),
	}, nil)
	if _, err := f.svc.CreateTable(context.Background(), "plain", schema, false); err != nil {
		t.Fatal(err)
	}
	ok := f.putObject("ok", randomBytes(t, 10))
	bad := f.putObject("bad", randomBytes(t, 10))
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i, v := range []wire.FileValue{ok, bad} {
		b.Field(0).(*array.StringBuilder).Append([]string{"x", "y"}[i])
		wire.AppendFileValue(b.Field(1).(*array.StructBuilder), v)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	if _, err := f.append("plain", "", rec); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(f.stagePath(bad.Key), 4); err != nil {
		t.Fatal(err)
	}
	ms, _, _ := verifyRun(t, f.fc, "plain", false)
	if len(ms) != 1 || ms[0].GetRow() != 2 || ms[0].Name != nil || ms[0].GetProblem() != lakepb.VerifyProblem_VERIFY_PROBLEM_SIZE_DIFFERS {
		t.Fatalf("mismatches %v, want row 2 without a name, size differs", ms)
	}
}

// TestVerifyResumesInsideAnObject: with a small byte budget per call, a
// run takes several calls, continues inside an object from the cursor's
// hash state, and still finds a flipped last byte.
func TestVerifyResumesInsideAnObject(t *testing.T) {
	f := newFixture(t)
	f.restartWith(noBackground)
	f.createTable("big")
	content := randomBytes(t, 5*verifyChunk+123)
	big := f.putObject("big.bin", content)
	flipped := f.putObject("flipped.bin", content)
	small := f.putObject("small.bin", randomBytes(t, 10))
	f.appendRows("big", []string{"big", "flipped", "small"}, []wire.FileValue{big, flipped, small})
	p := f.stagePath(flipped.Key)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xff
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}

	lim := verifyLimits{deadline: time.Now().Add(time.Hour), maxBytes: 2 * verifyChunk, maxMismatches: 1000}
	var cursor []byte
	var ms []*lakepb.VerifyMismatch
	calls, partials := 0, 0
	var read int64
	for {
		calls++
		var prog *lakepb.VerifyProgress
		err := f.svc.verify(context.Background(), &lakepb.VerifyRequest{Table: "big", Cursor: cursor}, lim, func(r *lakepb.VerifyResult) error {
			if m := r.GetMismatch(); m != nil {
				ms = append(ms, m)
			}
			if p := r.GetProgress(); p != nil {
				prog = p
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// The budget is checked after each chunk, so a call may end one
		// chunk past it, never more.
		if prog.GetBytesRead() > lim.maxBytes+verifyChunk {
			t.Errorf("call %d read %d bytes, the budget is %d", calls, prog.GetBytesRead(), lim.maxBytes)
		}
		read += prog.GetBytesRead()
		if len(prog.GetNext()) == 0 {
			break
		}
		c, err := decodeVerifyCursor(prog.GetNext())
		if err != nil {
			t.Fatalf("call %d returned a cursor that does not decode: %v", calls, err)
		}
		if c.GetPartialKey() != "" {
			partials++
		}
		cursor = prog.GetNext()
		if calls > 20 {
			t.Fatal("the run does not end")
		}
	}
	if len(ms) != 1 || ms[0].GetKey() != flipped.Key || ms[0].GetProblem() != lakepb.VerifyProblem_VERIFY_PROBLEM_SHA256_DIFFERS {
		t.Fatalf("mismatches %v, want only the flipped object's sha256", ms)
	}
	if partials < 2 || calls < 6 {
		t.Errorf("%d calls, %d of them ending inside an object: the budget did not cut the run", calls, partials)
	}
	if want := big.Size + flipped.Size + small.Size; read != want {
		t.Errorf("the run read %d bytes, want each byte once (%d)", read, want)
	}
}

// TestVerifyRefusesBadRequests: an unknown table is NotFound, a cursor that
// does not decode or belongs to another table is InvalidArgument.
func TestVerifyRefusesBadRequests(t *testing.T) {
	f := newFixture(t)
	f.createTable("a")
	f.createTable("b")
	if _, err := f.appendOne("a", "x", ""); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, _, err := verifyCall(ctx, f.fc, &lakepb.VerifyRequest{Table: "nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("unknown table: %v, want NotFound", err)
	}
	if _, _, err := verifyCall(ctx, f.fc, &lakepb.VerifyRequest{Table: "a", Cursor: []byte("\xff garbage")}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("garbage cursor: %v, want InvalidArgument", err)
	}
	// A cursor of table a, cut short of its end, used on table b.
	cur, _ := proto.Marshal(&lakepb.VerifyCursor{TableId: f.svc.reg.lookup("a").id, Version: 1})
	if _, _, err := verifyCall(ctx, f.fc, &lakepb.VerifyRequest{Table: "b", Cursor: cur}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("another table's cursor: %v, want InvalidArgument", err)
	}
	if _, _, err := verifyCall(ctx, f.fc, &lakepb.VerifyRequest{Table: "a", Cursor: cur, AllVersions: true}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a cursor of a run without all_versions: %v, want InvalidArgument", err)
	}
	if _, prog, err := verifyCall(ctx, f.fc, &lakepb.VerifyRequest{Table: "a", Cursor: cur}); err != nil || prog.GetObjects() != 1 {
		t.Errorf("a valid cursor: %v %v", prog, err)
	}
}

// TestVerifyRunMovesBetweenNodes: a follower answers verify calls from its
// own index, including a call that continues, inside an object, a run the
// leader began; only the leader verifies in the background.
func TestVerifyRunMovesBetweenNodes(t *testing.T) {
	etcd := etcdtest.Start(t)
	leader := newMember(t, etcd.Endpoint, nil)
	waitFor(t, "the first node to lead", func() bool { return leader.svc.canCommit() })
	follower := newMember(t, etcd.Endpoint, leader)
	waitFor(t, "the follower to learn the leader", func() bool { return follower.svc.cluster.Leader() == leader.listen })

	leader.createTable("clips")
	big := leader.putObject("big.bin", randomBytes(t, 3*verifyChunk))
	liar := leader.putObject("liar.bin", randomBytes(t, 10))
	liar.SHA256 = sumHex([]byte("not these"))
	leader.appendRows("clips", []string{"big", "liar"}, []wire.FileValue{big, liar})

	lim := verifyLimits{deadline: time.Now().Add(time.Hour), maxBytes: verifyChunk, maxMismatches: 1000}
	var first *lakepb.VerifyProgress
	err := leader.svc.verify(context.Background(), &lakepb.VerifyRequest{Table: "clips"}, lim, func(r *lakepb.VerifyResult) error {
		if p := r.GetProgress(); p != nil {
			first = p
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := decodeVerifyCursor(first.GetNext()); err != nil || c.GetPartialKey() != big.Key {
		t.Fatalf("the leader's first call did not stop inside the big object: %v, %v", c, err)
	}
	var ms []*lakepb.VerifyMismatch
	cursor := first.GetNext()
	for len(cursor) > 0 {
		m, prog, err := verifyCall(context.Background(), follower.fc, &lakepb.VerifyRequest{Table: "clips", Cursor: cursor})
		if err != nil {
			t.Fatalf("the follower continuing the run: %v", err)
		}
		ms, cursor = append(ms, m...), prog.GetNext()
	}
	if len(ms) != 1 || ms[0].GetKey() != liar.Key || ms[0].GetProblem() != lakepb.VerifyProblem_VERIFY_PROBLEM_SHA256_DIFFERS {
		t.Fatalf("mismatches %v, want only the liar's", ms)
	}

	waitFor(t, "the leader's background verifier", func() bool { _, ok := leader.svc.ix.Verified(big.Key); return ok })
	if err := newBackgroundVerifier(follower.svc, newTokenBucket(1<<30, verifyChunk)).pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := follower.svc.ix.Verified(liar.Key); ok {
		t.Error("a pass on a follower recorded an object")
	}
}
