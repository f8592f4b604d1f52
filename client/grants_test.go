package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakedata/lake/internal/auth"
	"github.com/lakedata/lake/internal/s3test"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/checkpoint"
	"github.com/lakedata/lake/objects/s3"
	"github.com/lakedata/lake/roles/meta"
	"github.com/lakedata/lake/wire"
)

const grantPartSize = 5 << 20

// presignedFixture is a metadata service on an S3 stage (versitygw) in
// upload mode "presigned": it alone holds the gateway's credentials. The
// client has none, and its own stage adapter records every write it is
// asked for: there must be none.
type presignedFixture struct {
	store *s3.Store // the service's
	rec   *recordingStore
	c     *Client
	cpDir string
}

func newPresignedFixture(t *testing.T) *presignedFixture {
	t.Helper()
	gw := s3test.Start(t)
	gw.SetEnv(t)
	bucket := gw.NewBucket(t)
	sc := s3.DefaultConfig()
	sc.Bucket, sc.Prefix, sc.Endpoint, sc.PathStyle, sc.PartSize = bucket, "lake", gw.Endpoint, true, grantPartSize
	store, err := s3.Open(t.Context(), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	u, err := objects.ParseStageURI("s3://" + bucket + "/lake")
	if err != nil {
		t.Fatal(err)
	}
	desc := u.Descriptor()
	desc.Endpoint, desc.PathStyle, desc.Region = gw.Endpoint, true, gw.Region
	desc.UploadMode, desc.PartSize = meta.UploadMode(desc, store, false)
	cfg := meta.DefaultConfig()
	cfg.Listen, cfg.DataDir = "127.0.0.1:0", filepath.Join(t.TempDir(), "data")
	cfg.Stage, cfg.StageURI, cfg.Discover = store, u.String(), desc
	svc, err := meta.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := svc.Close(context.Background()); err != nil {
			t.Errorf("close meta: %v", err)
		}
	})
	// From here on this process has no AWS credentials; the service's
	// store resolved them when it opened.
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	f := &presignedFixture{store: store, rec: &recordingStore{}, cpDir: t.TempDir()}
	f.c, err = Connect(context.Background(), "grpc://"+svc.Addr().String(), WithCheckpointDir(f.cpDir),
		withStore(func(s objects.Store) objects.Store { f.rec.Store = s; return f.rec }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.c.Close() })
	if f.c.uploadMode() != modePresigned {
		t.Fatalf("upload mode %q, want presigned", f.c.uploadMode())
	}
	if _, err := f.c.CreateTable(context.Background(), "clips", wire.DefaultSchema(), false); err != nil {
		t.Fatal(err)
	}
	return f
}

// check reads the object res names with the service's credentials and
// compares it with data; the client wrote nothing with its own adapter.
func (f *presignedFixture) check(t *testing.T, v wire.FileValue, data []byte) {
	t.Helper()
	sum := sha256.Sum256(data)
	if v.Size != int64(len(data)) || v.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("FILE value %+v, want %d bytes of sha256 %x", v, len(data), sum)
	}
	got, err := objects.ReadAll(t.Context(), f.store, v.Key)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the object at %s differs from the file (%v)", v.Key, err)
	}
	if calls := f.rec.takeCalls(); len(calls) > 0 {
		t.Fatalf("the client wrote with its own stage adapter: %+v", calls)
	}
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// PutFile on a presigned stage uploads through a grant with no AWS
// credentials, appends the answered FILE value and leaves no checkpoint;
// a stream does too.
func TestPutFilePresigned(t *testing.T) {
	f := newPresignedFixture(t)
	data := randomBytes(t, 2*grantPartSize+100)
	path := writeFile(t, "big.bin", data)
	res, err := f.c.PutFile(t.Context(), "clips", path, PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.check(t, res.File, data)
	if res.Deduplicated || res.BytesSent != int64(len(data)) || res.Version != 1 {
		t.Fatalf("result %+v: want version 1, every byte sent, no dedup", res)
	}
	if !strings.HasPrefix(res.File.Key, wire.ObjectsPrefix) {
		t.Errorf("key %q is not under %s", res.File.Key, wire.ObjectsPrefix)
	}
	if entries, _ := os.ReadDir(f.cpDir); len(entries) != 0 {
		t.Errorf("checkpoints left after the put: %v", entries)
	}

	// The same content again: the stage holds it, nothing is sent, the
	// new row names the first object.
	again, err := f.c.PutFile(t.Context(), "clips", writeFile(t, "copy.bin", data), PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Deduplicated || again.BytesSent != 0 || again.File != res.File || again.Version != 2 {
		t.Fatalf("the same content again: %+v, want version 2 naming %+v, nothing sent", again, res.File)
	}

	small := []byte("a small stream")
	sres, err := f.c.PutReader(t.Context(), "clips", "s.txt", bytes.NewReader(small), PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.check(t, sres.File, small)
}

// A bulk run on a presigned stage puts small and large files through
// grants, none with the client's own adapter.
func TestPutFilesPresigned(t *testing.T) {
	f := newPresignedFixture(t)
	dir := t.TempDir()
	want := map[string][]byte{"a.txt": []byte("aaa"), "b.bin": randomBytes(t, 64<<10), "c.bin": randomBytes(t, grantPartSize+7)}
	var paths []string
	for name, b := range want {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	res, err := f.c.PutFiles(t.Context(), "clips", paths, PutFilesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Committed != len(want) {
		t.Fatalf("committed %d of %d", res.Committed, len(want))
	}
	for _, fr := range res.Files {
		f.check(t, fr.File, want[filepath.Base(fr.Path)])
		if fr.BytesSent != fr.File.Size {
			t.Errorf("%s: %d bytes sent of %d", fr.Path, fr.BytesSent, fr.File.Size)
		}
	}
	if entries, _ := os.ReadDir(f.cpDir); len(entries) != 0 {
		t.Errorf("checkpoints left after the run: %v", entries)
	}
}

// A presigned put cancelled after its first part resumes: it sends only
// the parts the stage does not hold and commits one row.
func TestPutFilePresignedResumes(t *testing.T) {
	f := newPresignedFixture(t)
	data := randomBytes(t, 3*grantPartSize+1)
	path := writeFile(t, "big.bin", data)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, err := f.c.PutFile(ctx, "clips", path, PutOptions{Progress: func(p objects.Progress) {
		if p.Done >= grantPartSize {
			cancel()
		}
	}})
	if err == nil {
		t.Fatal("the cancelled put succeeded")
	}
	res, err := f.c.PutFile(t.Context(), "clips", path, PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.check(t, res.File, data)
	if res.BytesSent > int64(len(data))-grantPartSize || res.Version != 1 {
		t.Fatalf("resumed put: %+v; want version 1 and the held parts not sent again", res)
	}
}

// On the local stage a file of at least a MiB is offered for dedup: put
// again, it names the first object and writes nothing. When the answered
// object is gone by the time of the append, the put is done once more
// without dedup.
func TestPutFileLocalDedup(t *testing.T) {
	f := newFixture(t, nil)
	c := f.connect()
	if _, err := c.CreateTable(t.Context(), "t", nil, false); err != nil {
		t.Fatal(err)
	}
	data := randomBytes(t, localProbeMin+10)
	first, err := c.PutFile(t.Context(), "t", writeFile(t, "a.bin", data), PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if first.Deduplicated || first.BytesSent != int64(len(data)) {
		t.Fatalf("first put: %+v", first)
	}
	again, err := c.PutFile(t.Context(), "t", writeFile(t, "b.bin", data), PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Deduplicated || again.BytesSent != 0 || again.File != first.File {
		t.Fatalf("the same content again: %+v, want %+v and nothing written", again, first.File)
	}
	if n := len(f.objectFiles()); n != 1 {
		t.Fatalf("%d objects in the stage, want 1", n)
	}
	own, err := c.PutFile(t.Context(), "t", writeFile(t, "d.bin", data), PutOptions{NoDedup: true})
	if err != nil {
		t.Fatal(err)
	}
	if own.Deduplicated || own.File.Key == first.File.Key || own.BytesSent != int64(len(data)) {
		t.Fatalf("NoDedup: %+v, want an object of its own", own)
	}

	// The answered object vanishes between the answer and the append.
	gone := false
	third, err := c.PutFile(t.Context(), "t", writeFile(t, "c.bin", data), PutOptions{Progress: func(p objects.Progress) {
		if !gone {
			gone = true
			if err := os.Remove(filepath.Join(f.stageDir, filepath.FromSlash(first.File.Key))); err != nil {
				t.Error(err)
			}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if third.Deduplicated || third.File.Key == first.File.Key || third.BytesSent != int64(len(data)) {
		t.Fatalf("after the object went: %+v, want a new object written", third)
	}
}

// A bulk run on the local stage with a read token is refused before it
// writes any file, small ones included (they take no grant of their own).
func TestPutFilesLocalReadTokenWritesNothing(t *testing.T) {
	const readTok, adminTok = "a-read-token-of-16+", "an-admin-token-16+"
	f := newFixture(t, func(c *meta.Config) {
		c.ServerOptions = auth.ScopedServerOptions([]auth.Token{{Value: readTok, Scope: wire.ScopeRead}, {Value: adminTok, Scope: wire.ScopeAdmin}})
		c.TokensRequired = true
	})
	if _, err := f.connect(WithToken(adminTok)).CreateTable(t.Context(), "t", nil, false); err != nil {
		t.Fatal(err)
	}
	paths := []string{writeFile(t, "a.txt", []byte("a")), writeFile(t, "b.txt", []byte("b"))}
	_, err := f.connect(WithToken(readTok)).PutFiles(t.Context(), "t", paths, PutFilesOptions{})
	if !errors.Is(err, wire.ErrPermissionDenied) {
		t.Fatalf("a read token's bulk put: %v, want ErrPermissionDenied", err)
	}
	if files := f.objectFiles(); len(files) > 0 {
		t.Fatalf("the refused run wrote %v", files)
	}
}

// A presigned put interrupted after its upload completed, before its
// append: the checkpoint holds the completed upload and the commit id,
// and the same put completes again (nothing sent) and appends one row.
func TestPutFilePresignedResumesAppend(t *testing.T) {
	f := newPresignedFixture(t)
	data := randomBytes(t, grantPartSize+10)
	path := writeFile(t, "big.bin", data)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	full := 0 // every part done, then the upload completed
	_, err := f.c.PutFile(ctx, "clips", path, PutOptions{Progress: func(p objects.Progress) {
		if p.Done == p.Total {
			if full++; full == 2 {
				cancel() // the upload is complete; the append will not go out
			}
		}
	}})
	if err == nil {
		t.Fatal("the put succeeded with its context cancelled before the append")
	}
	entries, err := ListUploads(f.cpDir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("checkpoints after the interrupted put: %v, %v", entries, err)
	}
	cp := entries[0].Checkpoint
	if cp == nil || cp.Kind != checkpoint.KindGranted || !cp.Completed || cp.CommitID == "" || cp.Table != "clips" {
		t.Fatalf("checkpoint after the interrupted put: %+v", cp)
	}
	res, err := f.c.PutFile(t.Context(), "clips", path, PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.check(t, res.File, data)
	if res.BytesSent != 0 || res.Version != 1 || res.File.Key != strings.TrimPrefix(cp.Binding.Key, "lake/") {
		t.Fatalf("resumed put: %+v, want the recorded object at version 1, nothing sent", res)
	}
	if entries, _ := ListUploads(f.cpDir); len(entries) != 0 {
		t.Errorf("checkpoints left: %v", entries)
	}
}
