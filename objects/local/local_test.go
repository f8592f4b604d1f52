package local_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/local"
	"github.com/lakedata/lake/objects/objectstest"
	"github.com/lakedata/lake/wire"
)

func open(t testing.TB, dir string) *local.Store {
	t.Helper()
	s, err := local.Open(dir, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	for _, m := range resolveModes(t) {
		t.Run(m.name, func(t *testing.T) {
			objectstest.RunWith(t, func(t *testing.T) objects.Store {
				// A directory that does not exist yet: Open creates it.
				s := open(t, filepath.Join(t.TempDir(), "stage"))
				m.set(s)
				return s
			}, objectstest.Options{PlantNonRegular: plantNonRegular})
		})
	}
}

// plantNonRegular makes the entries of objectstest.NonRegular in the stage
// directory, as anyone who can write to it could.
func plantNonRegular(t *testing.T, st objects.Store, kind objectstest.NonRegular, key, target string) {
	t.Helper()
	dir := st.(*local.Store).Dir()
	p := filepath.Join(dir, filepath.FromSlash(key))
	at := p // where the planted entry goes
	var link string
	switch kind {
	case objectstest.LinkToKey:
		link = relLink(t, filepath.Dir(p), filepath.Join(dir, filepath.FromSlash(target)))
	case objectstest.LinkOutside:
		link = target
	case objectstest.LinkedDir:
		at = filepath.Dir(p)
		link = relLink(t, filepath.Dir(at), filepath.Join(dir, filepath.FromSlash(path.Dir(target))))
	}
	if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
		t.Fatal(err)
	}
	if kind == objectstest.NamedPipe {
		mkfifo(t, at)
		return
	}
	if err := os.Symlink(link, at); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
}

// relLink is the relative link text from a link in dir to target, the form
// a link inside a stage directory that moves keeps working in.
func relLink(t *testing.T, dir, target string) string {
	t.Helper()
	rel, err := filepath.Rel(dir, target)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

// tree lists every path below dir, relative and slash-separated.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestKeysStayInRoot(t *testing.T) {
	base := t.TempDir()
	stage := filepath.Join(base, "stage")
	outside := filepath.Join(base, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := open(t, stage)
	ctx := t.Context()

	invalid := append(slices.Clone(objectstest.InvalidKeys),
		"../escape", "../outside/secret", "a/../../escape", "../../../../../../tmp/escape",
		".lake-tmp", ".lake-tmp/x", ".LAKE-TMP/x")
	for _, key := range invalid {
		if _, err := s.Put(ctx, key, bytes.NewReader([]byte("x")), objects.PutOptions{}); !errors.Is(err, wire.ErrInvalidKey) {
			t.Errorf("Put(%q) = %v, want ErrInvalidKey", key, err)
		}
		if err := s.PutIfAbsent(ctx, key, []byte("x")); !errors.Is(err, wire.ErrInvalidKey) {
			t.Errorf("PutIfAbsent(%q) = %v, want ErrInvalidKey", key, err)
		}
		if _, err := s.Stat(ctx, key); !errors.Is(err, wire.ErrInvalidKey) {
			t.Errorf("Stat(%q) = %v, want ErrInvalidKey", key, err)
		}
		if err := s.Delete(ctx, key); !errors.Is(err, wire.ErrInvalidKey) {
			t.Errorf("Delete(%q) = %v, want ErrInvalidKey", key, err)
		}
	}
	if got, want := tree(t, base), []string{"outside", "outside/secret", "stage", "stage/.lake-tmp"}; !slices.Equal(got, want) {
		t.Fatalf("after invalid keys the tree is %q, want %q", got, want)
	}

	// A valid key through a symbolic link that leads out of the stage.
	if err := os.Symlink("../outside", filepath.Join(stage, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "link/new", bytes.NewReader([]byte("x")), objects.PutOptions{}); err == nil {
		t.Error("Put through an escaping symlink succeeded")
	}
	if err := s.PutIfAbsent(ctx, "link/new", []byte("x")); err == nil {
		t.Error("PutIfAbsent through an escaping symlink succeeded")
	}
	if rc, err := s.Open(ctx, "link/secret", 0, -1); err == nil {
		rc.Close()
		t.Error("Open through an escaping symlink succeeded")
	}
	if _, err := s.Stat(ctx, "link/secret"); err == nil {
		t.Error("Stat through an escaping symlink succeeded")
	}
	s.Delete(ctx, "link/secret")
	for in, err := range s.List(ctx, "link/") {
		if err == nil {
			t.Errorf("List(link/) yielded %q", in.Key)
		}
	}
	if got, want := tree(t, outside), []string{"secret"}; !slices.Equal(got, want) {
		t.Fatalf("outside the stage: %q, want %q", got, want)
	}
}

func TestStaleTempRemoved(t *testing.T) {
	dir := t.TempDir()
	open(t, dir)
	tmp := filepath.Join(dir, local.TempDir)
	old := time.Now().Add(-local.StaleTempAge - time.Hour)
	for _, name := range []string{"put-old", "client-upload-old"} {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	// Written by a live upload in another process: must survive.
	if err := os.WriteFile(filepath.Join(tmp, "put-fresh"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	open(t, dir)
	if got, want := tree(t, tmp), []string{"put-fresh"}; !slices.Equal(got, want) {
		t.Fatalf("temp dir after Open: %q, want %q", got, want)
	}
}

func TestPublishedAtPath(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	data := []byte("visible to any reader of the directory")
	if _, err := s.Put(t.Context(), "x/y/z.bin", bytes.NewReader(data), objects.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(t.Context(), "x/log/1.json", data); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"x/y/z.bin", "x/log/1.json"} {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(key)))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s on disk: %q, %v", key, got, err)
		}
	}
}

func TestNoTempLeftBehind(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	ctx := t.Context()
	if err := s.PutIfAbsent(ctx, "k", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "k", []byte("2")); !errors.Is(err, objects.ErrExists) {
		t.Fatalf("PutIfAbsent = %v, want ErrExists", err)
	}
	if _, err := s.Put(ctx, "p", bytes.NewReader([]byte("x")), objects.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "q", io.MultiReader(bytes.NewReader([]byte("x")), iotestErr{}), objects.PutOptions{}); err == nil {
		t.Fatal("Put with a failing reader succeeded")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Put(cctx, "r", bytes.NewReader([]byte("x")), objects.PutOptions{}); err == nil {
		t.Fatal("cancelled Put succeeded")
	}
	if got := tree(t, filepath.Join(dir, local.TempDir)); len(got) != 0 {
		t.Fatalf("temp files left: %q", got)
	}
}

type iotestErr struct{}

func (iotestErr) Read([]byte) (int, error) { return 0, errors.New("source broke") }

func TestListSkipsNonObjects(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	if _, err := s.Put(t.Context(), "real", bytes.NewReader([]byte("x")), objects.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, local.TempDir, "put-inflight"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(dir, "alias")); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for in, err := range s.List(t.Context(), "") {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, in.Key)
	}
	if !slices.Equal(keys, []string{"real"}) {
		t.Fatalf("List = %q, want [real]", keys)
	}
}

func TestDeleteRemovesEmptyParents(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	ctx := t.Context()
	for _, k := range []string{"p/q/r", "p/s"} {
		if _, err := s.Put(ctx, k, bytes.NewReader([]byte("x")), objects.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "p/q/r"); err != nil {
		t.Fatal(err)
	}
	if got, want := tree(t, dir), []string{".lake-tmp", "p", "p/s"}; !slices.Equal(got, want) {
		t.Fatalf("tree = %q, want %q", got, want)
	}
	if err := s.Delete(ctx, "p/s"); err != nil {
		t.Fatal(err)
	}
	if got, want := tree(t, dir), []string{".lake-tmp"}; !slices.Equal(got, want) {
		t.Fatalf("tree = %q, want %q", got, want)
	}
}

// The documented limit of a directory tree: "a" cannot be an object while
// "a/b" exists. It must fail plainly, not claim the key exists.
func TestObjectOverDirectory(t *testing.T) {
	s := open(t, t.TempDir())
	ctx := t.Context()
	if _, err := s.Put(ctx, "a/b", bytes.NewReader([]byte("x")), objects.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "a", bytes.NewReader([]byte("x")), objects.PutOptions{}); err == nil {
		t.Error("Put(a) over directory a/ succeeded")
	}
	if err := s.PutIfAbsent(ctx, "a", []byte("x")); err == nil || errors.Is(err, objects.ErrExists) {
		t.Errorf("PutIfAbsent(a) over directory a/ = %v, want a plain error", err)
	}
	if rc, err := s.Open(ctx, "a/b", 0, -1); err != nil {
		t.Fatalf("a/b lost: %v", err)
	} else {
		rc.Close()
	}
}

// A closed store refuses reads instead of using a descriptor number the
// process may have handed out again, and closing it twice is harmless.
func TestUseAfterClose(t *testing.T) {
	s, err := local.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(t.Context(), "k", bytes.NewReader([]byte("x")), objects.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if in, err := s.Stat(t.Context(), "k"); err == nil {
		t.Errorf("Stat after Close = %+v", in)
	}
	if rc, err := s.Open(t.Context(), "k", 0, -1); err == nil {
		rc.Close()
		t.Error("Open after Close succeeded")
	}
	for in, err := range s.List(t.Context(), "") {
		if err == nil {
			t.Errorf("List after Close yields %q", in.Key)
		}
	}
}

// A local put completes in one step: the store must not offer resumable
// uploads, which callers would then route through a checkpoint for
// nothing.
func TestNotResumer(t *testing.T) {
	var s objects.Store = open(t, t.TempDir())
	if _, ok := s.(objects.Resumer); ok {
		t.Fatal("the local store is an objects.Resumer")
	}
}

// TestPutBesideDeletesOfItsDirectory: puts into a directory that deletes
// keep emptying (and so removing, parents and all) never fail for want of
// a directory: a Delete may remove a parent that a put's MkdirAll has
// just made, and the put makes it again.
func TestPutBesideDeletesOfItsDirectory(t *testing.T) {
	st, err := local.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			for i := range 150 {
				key := fmt.Sprintf("objects/2026/12/%02d/w%d-%d", i%3, w, i)
				if _, err := st.Put(ctx, key, strings.NewReader("x"), objects.PutOptions{}); err != nil {
					errs <- err
					return
				}
				if err := st.Delete(ctx, key); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
