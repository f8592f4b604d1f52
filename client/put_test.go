package client

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/checkpoint"
)

// hookStore runs a hook inside PutPath, before the real upload.
type hookStore struct {
	objects.Store
	hook func(key string)
}

func (s *hookStore) PutPath(ctx context.Context, key, path string, o objects.PutOptions) (objects.Info, error) {
	if s.hook != nil {
		s.hook(key)
	}
	return s.Store.PutPath(ctx, key, path, o)
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
