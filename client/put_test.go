package client

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/checkpoint"
)

// hookStore runs hook inside PutPath, before the real upload, and after
// once it succeeded.
type hookStore struct {
	objects.Store
	hook  func(key string)
	after func(key string)
}

func (s *hookStore) PutPath(ctx context.Context, key, path string, o objects.PutOptions) (objects.Info, error) {
	if s.hook != nil {
		s.hook(key)
	}
	info, err := s.Store.PutPath(ctx, key, path, o)
	if err == nil && s.after != nil {
		s.after(key)
	}
	return info, err
}

func connectHooked(t *testing.T, f *fixture, hs *hookStore) *Client {
	t.Helper()
	return f.connect(withStore(func(s objects.Store) objects.Store { hs.Store = s; return hs }))
}

// While a put of a file holds its checkpoint, a second put of the same file
// into the same table fails at once with ErrInProgress; once the first
// ends, the file can be put again.
func TestPutFileInProgress(t *testing.T) {
	f := newFixture(t, nil)
	started, release := make(chan struct{}), make(chan struct{})
	first := true
	hs := &hookStore{hook: func(string) {
		if first {
			first = false
			close(started)
			<-release
		}
	}}
	c := connectHooked(t, f, hs)
	if _, err := c.CreateTable(ctx, "t", nil, false); err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, "a.bin", []byte("some bytes"))

	done := make(chan error, 1)
	go func() {
		_, err := c.PutFile(ctx, "t", path, PutOptions{})
		done <- err
	}()
	<-started
	_, err := c.PutFile(ctx, "t", path, PutOptions{})
	close(release)
	if !errors.Is(err, checkpoint.ErrInProgress) {
		t.Fatalf("second put while the first runs = %v, want checkpoint.ErrInProgress", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("first put: %v", err)
	}
	res, err := c.PutFile(ctx, "t", path, PutOptions{})
	if err != nil {
		t.Fatalf("put after the first ended: %v", err)
	}
	if res.Version != 2 {
		t.Errorf("version %d, want 2", res.Version)
	}
	// Nothing of the checkpoint is left behind (no lock, no file).
	canon, _ := filepath.EvalSymlinks(path)
	cp := c.checkpointPath(canon, "t")
	for _, p := range []string{cp, cp + ".lock"} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after the put: %v, want it gone", p, err)
		}
	}
}

// writeCheckpoint saves a completed checkpoint for the file at path, as the
// S3 backend would leave it, with key as its object key.
func writeCheckpoint(t *testing.T, cpPath, path, key, table, commitID string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := checkpoint.Open(cpPath)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	err = sess.Save(&checkpoint.Checkpoint{
		Version:     checkpoint.Version,
		Source:      checkpoint.Source{Path: path, Size: fi.Size(), ModTime: fi.ModTime()},
		Binding:     checkpoint.Binding{Bucket: "bucket", Key: key, UploadID: "upload"},
		PartSize:    checkpoint.MinPartSize,
		SHA256:      sha(data),
		ContentType: "application/x-test",
		Parts:       []checkpoint.Part{{Number: 1, Length: fi.Size(), ETag: `"p1"`, SHA256: sha(data)}},
		Completed:   true,
		ETag:        `"done"`,
		CommitID:    commitID,
		Table:       table,
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A crash after the append committed but before the checkpoint was
// removed: the next put of the file reuses the checkpoint's key and commit
// id, so the append is a duplicate and the table keeps one row.
func TestPutFileResumesCheckpointedCommit(t *testing.T) {
	f := newFixture(t, nil)
	var keys []string
	hs := &hookStore{hook: func(key string) { keys = append(keys, key) }}
	c := connectHooked(t, f, hs)
	if _, err := c.CreateTable(ctx, "t", nil, false); err != nil {
		t.Fatal(err)
	}
	content := []byte("resumed content")
	path := writeFile(t, "r.bin", content)
	canon, err := filepath.EvalSymlinks(path)
	if err != nil {
		t.Fatal(err)
	}
	const commitID = "resume-commit-1"

	// The first run: its object and its row, then the crash.
	key := objects.NewObjectKey("r.bin", time.Now())
	if _, err := hs.Store.PutPath(ctx, key, canon, objects.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	schema, err := c.schema(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := planRow(schema, "r.bin", nil)
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.commit(ctx, "t", plan, objects.Info{Key: key, Size: int64(len(content)), SHA256: sha(content)}, PutOptions{CommitID: commitID, ContentType: "application/x-test"})
	if err != nil || first.Version != 1 {
		t.Fatalf("first append: %+v, %v", first, err)
	}
	cpPath := c.checkpointPath(canon, "t")
	writeCheckpoint(t, cpPath, canon, key, "t", commitID)

	res, err := c.PutFile(ctx, "t", path, PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0] != key || res.File.Key != key {
		t.Errorf("resumed put used keys %q (row key %s), want %s", keys, res.File.Key, key)
	}
	if !res.Duplicate || res.Version != 1 {
		t.Errorf("resumed put: %+v, want the duplicate of version 1", res)
	}
	if res.File.ContentType != "application/x-test" {
		t.Errorf("content type %q, want the checkpoint's", res.File.ContentType)
	}
	if _, err := os.Stat(cpPath); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("checkpoint after the put: %v, want it removed", err)
	}

	// A checkpoint of another table, or another commit id asked for, is
	// refused before anything is uploaded.
	writeCheckpoint(t, cpPath, canon, key, "other", commitID)
	if _, err := c.PutFile(ctx, "t", path, PutOptions{}); err == nil {
		t.Error("put with a checkpoint of another table succeeded")
	}
	writeCheckpoint(t, cpPath, canon, key, "t", commitID)
	if _, err := c.PutFile(ctx, "t", path, PutOptions{CommitID: "another"}); err == nil {
		t.Error("put with another commit id than its checkpoint's succeeded")
	}
	if len(keys) != 1 {
		t.Errorf("%d uploads, want 1", len(keys))
	}
}

// singleRig is a client on the local stage, which writes no checkpoint of
// its own, counting its uploads.
type singleRig struct {
	t     *testing.T
	f     *fixture
	c     *Client
	hs    *hookStore
	keys  []string // keys PutPath was called with
	path  string   // the file
	canon string
}

func newSingleRig(t *testing.T, content []byte) *singleRig {
	t.Helper()
	r := &singleRig{t: t, f: newFixture(t, nil)}
	r.hs = &hookStore{hook: func(key string) { r.keys = append(r.keys, key) }}
	r.c = connectHooked(t, r.f, r.hs)
	if _, err := r.c.CreateTable(ctx, "t", nil, false); err != nil {
		t.Fatal(err)
	}
	r.path = writeFile(t, "small.bin", content)
	var err error
	if r.canon, err = filepath.EvalSymlinks(r.path); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *singleRig) cpPath() string { return r.c.checkpointPath(r.canon, "t") }

// interrupt runs a put that loses its append, as a process killed after
// its upload would: the context ends once the object is stored, so the
// record is saved and the append fails. It returns the record left.
func (r *singleRig) interrupt() *checkpoint.Checkpoint {
	r.t.Helper()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.hs.after = func(string) { cancel() }
	defer func() { r.hs.after = nil }()
	if res, err := r.c.PutFile(cctx, "t", r.path, PutOptions{}); err == nil {
		r.t.Fatalf("the interrupted put committed: %+v", res)
	}
	return r.record()
}

// record decodes the checkpoint of the file.
func (r *singleRig) record() *checkpoint.Checkpoint {
	r.t.Helper()
	b, err := os.ReadFile(r.cpPath())
	if err != nil {
		r.t.Fatalf("no checkpoint after the interrupted put: %v", err)
	}
	cp, err := checkpoint.Decode(b)
	if err != nil {
		r.t.Fatal(err)
	}
	return cp
}

func (r *singleRig) noCheckpoint() {
	r.t.Helper()
	for _, p := range []string{r.cpPath(), r.cpPath() + ".lock"} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			r.t.Errorf("%s after the put: %v, want it gone", p, err)
		}
	}
}

// A put on a stage that writes no checkpoint records its object and
// commit id before the append: the same put after a lost append sends no
// byte again, reuses key and commit id, and commits the row once; after
// an append that committed but whose ack was lost, it is answered
// duplicate.
func TestPutFileSingleResumesAppend(t *testing.T) {
	content := bytes.Repeat([]byte("small file "), 6000)
	for _, committed := range []bool{false, true} {
		name := "before append"
		if committed {
			name = "after append"
		}
		t.Run(name, func(t *testing.T) {
			r := newSingleRig(t, content)
			cp := r.interrupt()
			if len(r.keys) != 1 {
				t.Fatalf("%d uploads, want 1", len(r.keys))
			}
			fi, err := os.Stat(r.canon)
			if err != nil {
				t.Fatal(err)
			}
			st, err := r.hs.Store.Stat(ctx, r.keys[0])
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case cp.Kind != checkpoint.KindSingle || !cp.Completed:
				t.Errorf("record kind %q completed %v", cp.Kind, cp.Completed)
			case cp.Binding != checkpoint.Binding{Key: r.keys[0]}:
				t.Errorf("record binding %+v, want only the key %s", cp.Binding, r.keys[0])
			case cp.Table != "t" || cp.CommitID == "":
				t.Errorf("record table %q commit id %q", cp.Table, cp.CommitID)
			case cp.Source != checkpoint.Source{Path: r.canon, Size: fi.Size(), ModTime: fi.ModTime().UTC()}:
				t.Errorf("record source %+v, want the file's", cp.Source)
			case cp.SHA256 != sha(content) || cp.ETag != st.ETag || cp.ETag == "":
				t.Errorf("record sha256 %s etag %q, want %s %q", cp.SHA256, cp.ETag, sha(content), st.ETag)
			}
			if committed {
				// The lost append had in fact committed.
				schema, err := r.c.schema(ctx, "t")
				if err != nil {
					t.Fatal(err)
				}
				plan, err := planRow(schema, "small.bin", nil)
				if err != nil {
					t.Fatal(err)
				}
				info := objects.Info{Key: cp.Binding.Key, Size: cp.Source.Size, SHA256: cp.SHA256, ETag: cp.ETag}
				if res, err := r.c.commit(ctx, "t", plan, info, PutOptions{CommitID: cp.CommitID}); err != nil || res.Version != 1 {
					t.Fatalf("the lost append: %+v, %v", res, err)
				}
			}

			var progress []objects.Progress
			res, err := r.c.PutFile(ctx, "t", r.path, PutOptions{Progress: func(p objects.Progress) { progress = append(progress, p) }})
			if err != nil {
				t.Fatalf("the same put again: %v", err)
			}
			if len(r.keys) != 1 {
				t.Errorf("the rerun uploaded again (keys %q)", r.keys)
			}
			if res.File.Key != cp.Binding.Key || res.File.SHA256 != sha(content) || res.File.Size != int64(len(content)) {
				t.Errorf("the rerun committed %+v, want key %s", res.File, cp.Binding.Key)
			}
			if res.Version != 1 || res.Duplicate != committed {
				t.Errorf("the rerun: version %d duplicate %v, want 1 %v", res.Version, res.Duplicate, committed)
			}
			if n := len(progress); n == 0 || progress[n-1].Done != int64(len(content)) {
				t.Errorf("progress %+v, want it to end complete", progress)
			}
			r.noCheckpoint()
			if got := r.f.objectFiles(); len(got) != 1 {
				t.Errorf("stage objects %v, want one", got)
			}

			// Done: a new put of the file is a new row.
			again, err := r.c.PutFile(ctx, "t", r.path, PutOptions{})
			if err != nil || again.Duplicate || again.Version != 2 || again.File.Key == cp.Binding.Key {
				t.Fatalf("a new put after it: %+v, %v", again, err)
			}
			r.noCheckpoint()
		})
	}
}

// A put that completes writes one record and leaves none.
func TestPutFileSingleLeavesNoCheckpoint(t *testing.T) {
	r := newSingleRig(t, []byte("tiny"))
	r.hs.after = func(string) {
		if _, err := os.Stat(r.cpPath()); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a checkpoint before the upload returned: %v", err)
		}
	}
	res, err := r.c.PutFile(ctx, "t", r.path, PutOptions{})
	if err != nil || res.Version != 1 || res.Duplicate {
		t.Fatalf("put: %+v, %v", res, err)
	}
	r.noCheckpoint()

	// An empty file has a record too.
	empty := newSingleRig(t, nil)
	cp := empty.interrupt()
	if cp.Source.Size != 0 || cp.SHA256 != sha(nil) {
		t.Fatalf("record of an empty file: size %d sha256 %s", cp.Source.Size, cp.SHA256)
	}
	res, err = empty.c.PutFile(ctx, "t", empty.path, PutOptions{})
	if err != nil || res.Version != 1 || res.File.Key != cp.Binding.Key || len(empty.keys) != 1 {
		t.Fatalf("the rerun of an empty file: %+v, %v (keys %q)", res, err, empty.keys)
	}
	empty.noCheckpoint()
}

// A record that no longer holds is not appended: a changed file fails
// with ErrSourceChanged, a changed object with ErrObjectChanged, and
// neither uploads; ForgetPuts (lake uploads cancel) drops the record, and
// the next put starts afresh. A gone object is uploaded again under its
// key with the same commit id.
func TestPutFileSingleRecordChecks(t *testing.T) {
	content := []byte("content of a small file")
	t.Run("file changed", func(t *testing.T) {
		r := newSingleRig(t, content)
		cp := r.interrupt()
		later := cp.Source.ModTime.Add(time.Second)
		if err := os.Chtimes(r.canon, later, later); err != nil {
			t.Fatal(err)
		}
		_, err := r.c.PutFile(ctx, "t", r.path, PutOptions{})
		if !errors.Is(err, checkpoint.ErrSourceChanged) || !strings.Contains(err.Error(), "lake uploads cancel") {
			t.Fatalf("put of the changed file = %v, want ErrSourceChanged naming the way out", err)
		}
		if len(r.keys) != 1 {
			t.Errorf("the refused put uploaded (keys %q)", r.keys)
		}
		if n, err := r.c.ForgetPuts(r.path); err != nil || n != 1 {
			t.Fatalf("ForgetPuts = %d, %v; want 1", n, err)
		}
		r.noCheckpoint()
		if n, err := r.c.ForgetPuts(r.path); err != nil || n != 0 {
			t.Fatalf("second ForgetPuts = %d, %v; want 0", n, err)
		}
		res, err := r.c.PutFile(ctx, "t", r.path, PutOptions{})
		if err != nil || res.Version != 1 || res.File.Key == cp.Binding.Key || len(r.keys) != 2 {
			t.Fatalf("the put after forgetting: %+v, %v (keys %q)", res, err, r.keys)
		}
	})
	t.Run("object changed", func(t *testing.T) {
		r := newSingleRig(t, content)
		cp := r.interrupt()
		if _, err := r.hs.Store.Put(ctx, cp.Binding.Key, strings.NewReader("other"), objects.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := r.c.PutFile(ctx, "t", r.path, PutOptions{})
		if !errors.Is(err, ErrObjectChanged) {
			t.Fatalf("put over a changed object = %v, want ErrObjectChanged", err)
		}
		if len(r.keys) != 1 {
			t.Errorf("the refused put uploaded (keys %q)", r.keys)
		}
		if got := r.record(); got.CommitID != cp.CommitID {
			t.Errorf("the refused put changed the record")
		}
	})
	t.Run("object gone", func(t *testing.T) {
		r := newSingleRig(t, content)
		cp := r.interrupt()
		if err := r.hs.Store.Delete(ctx, cp.Binding.Key); err != nil {
			t.Fatal(err)
		}
		res, err := r.c.PutFile(ctx, "t", r.path, PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.keys) != 2 || r.keys[1] != cp.Binding.Key || res.File.Key != cp.Binding.Key || res.Version != 1 {
			t.Fatalf("the rerun: %+v (keys %q), want one row under %s", res, r.keys, cp.Binding.Key)
		}
		r.noCheckpoint()
	})
}

// A checkpoint in the format of the release before KindSingle (version 1,
// no kind) still resumes: the put reuses its key and commit id.
func TestPutFileResumesVersion1Checkpoint(t *testing.T) {
	r := newSingleRig(t, []byte("an old release's upload"))
	key := objects.NewObjectKey("small.bin", time.Now())
	if _, err := r.hs.Store.PutPath(ctx, key, r.canon, objects.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	const commitID = "v1-commit"
	writeCheckpoint(t, r.cpPath(), r.canon, key, "t", commitID)
	cur, err := os.ReadFile(r.cpPath())
	if err != nil {
		t.Fatal(err)
	}
	old := bytes.Replace(cur, []byte("\"version\": 2,\n  \"kind\": \"multipart\",\n"), []byte("\"version\": 1,\n"), 1)
	if bytes.Equal(old, cur) || bytes.Contains(old, []byte(`"kind"`)) {
		t.Fatalf("could not write the old format from:\n%s", cur)
	}
	if err := os.WriteFile(r.cpPath(), old, 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := r.c.PutFile(ctx, "t", r.path, PutOptions{})
	if err != nil {
		t.Fatalf("put resuming a version 1 checkpoint: %v", err)
	}
	if res.File.Key != key || res.Version != 1 {
		t.Errorf("resumed put: %+v, want key %s", res, key)
	}
	if len(r.keys) != 1 || r.keys[0] != key {
		t.Errorf("uploads %q, want one under the checkpoint's key", r.keys)
	}
	// Committed again with the checkpoint's commit id: a duplicate.
	schema, err := r.c.schema(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := planRow(schema, "small.bin", nil)
	if err != nil {
		t.Fatal(err)
	}
	dup, err := r.c.commit(ctx, "t", plan, objects.Info{Key: key, Size: res.File.Size, SHA256: res.File.SHA256}, PutOptions{CommitID: commitID})
	if err != nil || !dup.Duplicate {
		t.Errorf("the checkpoint's commit id again: %+v, %v; want a duplicate", dup, err)
	}
	r.noCheckpoint()
}
