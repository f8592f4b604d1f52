package client

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/local"
	"github.com/lakedata/lake/roles/meta"
)

// fixture is a metadata service on a local stage, served over loopback.
// Tests may import roles; the client package itself must not.
type fixture struct {
	t        *testing.T
	stageDir string
	addr     string
}

func newFixture(t *testing.T, edit func(*meta.Config)) *fixture {
	t.Helper()
	root := t.TempDir()
	stageDir := filepath.Join(root, "stage")
	stage, err := local.Open(stageDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stage.Close() })
	cfg := meta.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = filepath.Join(root, "data")
	cfg.Stage, cfg.StageURI = stage, "file://"+stageDir
	if edit != nil {
		edit(&cfg)
	}
	svc, err := meta.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := svc.Close(context.Background()); err != nil {
			t.Errorf("close meta: %v", err)
		}
	})
	return &fixture{t: t, stageDir: stageDir, addr: svc.Addr().String()}
}

func (f *fixture) connect(opts ...Option) *Client {
	f.t.Helper()
	opts = append([]Option{WithCheckpointDir(filepath.Join(f.t.TempDir(), "checkpoints"))}, opts...)
	c, err := Connect(context.Background(), "grpc://"+f.addr, opts...)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { c.Close() })
	return c
}

// objectFiles lists the files under the stage's objects/ directory.
func (f *fixture) objectFiles() []string {
	f.t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(f.stageDir, "objects"), func(p string, d os.DirEntry, err error) error {
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

func writeFile(t *testing.T, name string, content []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, content, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// countDoPut is a server interceptor counting DoPut streams.
type countDoPut struct {
	mu sync.Mutex
	n  int
}

func (c *countDoPut) intercept(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if filepath.Base(info.FullMethod) == "DoPut" {
		c.mu.Lock()
		c.n++
		c.mu.Unlock()
	}
	return handler(srv, ss)
}

func (c *countDoPut) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// recordingStore records the uploads the client makes.
type recordingStore struct {
	objects.Store
	mu    sync.Mutex
	calls []storeCall
}

type storeCall struct {
	method, key, path string
}

func (s *recordingStore) record(c storeCall) {
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()
}

func (s *recordingStore) Put(ctx context.Context, key string, r io.Reader, o objects.PutOptions) (objects.Info, error) {
	s.record(storeCall{method: "Put", key: key})
	return s.Store.Put(ctx, key, r, o)
}

func (s *recordingStore) PutPath(ctx context.Context, key, path string, o objects.PutOptions) (objects.Info, error) {
	s.record(storeCall{method: "PutPath", key: key, path: path})
	return s.Store.PutPath(ctx, key, path, o)
}

func (s *recordingStore) takeCalls() []storeCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.calls
	s.calls = nil
	return out
}

// withStore substitutes the stage adapter; only tests use it.
func withStore(wrap func(objects.Store) objects.Store) Option {
	return func(c *config) { c.wrapStore = wrap }
}
