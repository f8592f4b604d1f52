//go:build unix

package local_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/local"
	"github.com/lakedata/lake/objects/objectstest"
)

const catalogKey = "_lake/catalog/t.json"

var catalogRecord = []byte(`{"table":"t","id":"0190-not-an-object"}`)

// refusalStage is a stage holding one catalog record and one object, with
// a secret file beside it (outside the stage), in each resolve mode.
type refusalStage struct {
	s       *local.Store
	dir     string // the stage
	outside string // a directory next to the stage, with a file "secret"
}

func refusalStages(t *testing.T, fn func(t *testing.T, st refusalStage)) {
	for _, m := range resolveModes(t) {
		t.Run(m.name, func(t *testing.T) {
			base := t.TempDir()
			st := refusalStage{dir: filepath.Join(base, "stage"), outside: filepath.Join(base, "outside")}
			st.s = open(t, st.dir)
			m.set(st.s)
			if err := st.s.PutIfAbsent(t.Context(), catalogKey, catalogRecord); err != nil {
				t.Fatal(err)
			}
			if _, err := st.s.Put(t.Context(), "objects/real/a.bin", bytes.NewReader([]byte("a real object")), objects.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(st.outside, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(st.outside, "secret"), []byte("outside the stage"), 0o644); err != nil {
				t.Fatal(err)
			}
			fn(t, st)
			// Nothing planted is listed, and nothing it points at changed.
			var keys []string
			for in, err := range st.s.List(t.Context(), "") {
				if err != nil {
					t.Fatalf("List: %v", err)
				}
				keys = append(keys, in.Key)
			}
			if want := []string{catalogKey, "objects/real/a.bin"}; strings.Join(keys, " ") != strings.Join(want, " ") {
				t.Errorf("List = %q, want %q", keys, want)
			}
			if got, err := os.ReadFile(filepath.Join(st.dir, "_lake", "catalog", "t.json")); err != nil || !bytes.Equal(got, catalogRecord) {
				t.Errorf("catalog record now %q, %v", got, err)
			}
		})
	}
}

// plant makes the directories up to p, then runs mk(p).
func plant(t *testing.T, p string, mk func(p string) error) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := mk(p); err != nil {
		t.Fatal(err)
	}
}

func symlink(target string) func(string) error {
	return func(p string) error { return os.Symlink(target, p) }
}

// wantRefused requires Stat and Open of key to fail with want, Open within
// a few seconds and without a byte served, and List of the key's
// directory not to report it (nor, for a link, anything below it).
func wantRefused(t *testing.T, s *local.Store, key string, want error) {
	t.Helper()
	if in, err := s.Stat(t.Context(), key); !errors.Is(err, want) {
		t.Errorf("Stat(%q) = %+v, %v; want %v", key, in, err, want)
	}
	objectstest.WantOpenRefused(t, s, key, want)
	dir := key[:strings.LastIndexByte(key, '/')+1]
	for in, err := range s.List(t.Context(), dir) {
		if err != nil {
			t.Errorf("List(%q): %v", dir, err)
			continue
		}
		if in.Key == key || (want == objects.ErrNotRegular && strings.HasPrefix(in.Key, key+"/")) {
			t.Errorf("List(%q) reports %q", dir, in.Key)
		}
	}
}

func TestLinkToFileInStageRefused(t *testing.T) {
	refusalStages(t, func(t *testing.T, st refusalStage) {
		// Relative, absolute, and to a real object: a link is never one.
		plant(t, filepath.Join(st.dir, "objects", "aa", "t.json"), symlink("../../_lake/catalog/t.json"))
		plant(t, filepath.Join(st.dir, "objects", "ab", "t.json"), symlink(filepath.Join(st.dir, "_lake", "catalog", "t.json")))
		plant(t, filepath.Join(st.dir, "objects", "ac", "alias.bin"), symlink("../real/a.bin"))
		for _, key := range []string{"objects/aa/t.json", "objects/ab/t.json", "objects/ac/alias.bin"} {
			wantRefused(t, st.s, key, objects.ErrNotRegular)
		}
	})
}

func TestLinkToFileOutsideStageRefused(t *testing.T) {
	refusalStages(t, func(t *testing.T, st refusalStage) {
		plant(t, filepath.Join(st.dir, "objects", "ad", "secret"), symlink(filepath.Join(st.outside, "secret")))
		plant(t, filepath.Join(st.dir, "objects", "ae", "secret"), symlink("../../../outside/secret"))
		for _, key := range []string{"objects/ad/secret", "objects/ae/secret"} {
			wantRefused(t, st.s, key, objects.ErrNotRegular)
		}
	})
}

func TestLinkedDirectoryOnTheWayRefused(t *testing.T) {
	refusalStages(t, func(t *testing.T, st refusalStage) {
		// objects/ab/ -> _lake/, the link right below objects/.
		plant(t, filepath.Join(st.dir, "objects", "ab"), symlink("../_lake"))
		// Deeper, absolute, to the catalog directory itself.
		plant(t, filepath.Join(st.dir, "objects", "ac", "x"), symlink(filepath.Join(st.dir, "_lake", "catalog")))
		// To a directory outside the stage.
		plant(t, filepath.Join(st.dir, "objects", "ad"), symlink(st.outside))
		for _, key := range []string{"objects/ab/catalog/t.json", "objects/ac/x/t.json", "objects/ad/secret"} {
			wantRefused(t, st.s, key, objects.ErrNotRegular)
		}
		for _, prefix := range []string{"objects/ab/", "objects/ab/catalog/", "objects/ac/x/", "objects/ad/", "objects/ad/s"} {
			for in, err := range st.s.List(t.Context(), prefix) {
				t.Errorf("List(%q) yields %+v, %v; want nothing", prefix, in, err)
			}
		}
	})
}

// objects/ itself a link to _lake/.
func TestLinkedObjectsDirectoryRefused(t *testing.T) {
	for _, m := range resolveModes(t) {
		t.Run(m.name, func(t *testing.T) {
			s := open(t, t.TempDir())
			m.set(s)
			if err := s.PutIfAbsent(t.Context(), catalogKey, catalogRecord); err != nil {
				t.Fatal(err)
			}
			plant(t, filepath.Join(s.Dir(), "objects"), symlink("_lake"))
			wantRefused(t, s, "objects/catalog/t.json", objects.ErrNotRegular)
			for in, err := range s.List(t.Context(), "objects/") {
				t.Errorf("List(objects/) yields %+v, %v; want nothing", in, err)
			}
		})
	}
}

func TestNamedPipeRefused(t *testing.T) {
	refusalStages(t, func(t *testing.T, st refusalStage) {
		plant(t, filepath.Join(st.dir, "objects", "af", "pipe"), func(p string) error { return unix.Mkfifo(p, 0o644) })
		wantRefused(t, st.s, "objects/af/pipe", objects.ErrNotRegular)
	})
}

func TestSocketRefused(t *testing.T) {
	refusalStages(t, func(t *testing.T, st refusalStage) {
		plant(t, filepath.Join(st.dir, "objects", "ag", "sock"), func(p string) error { return unix.Mknod(p, unix.S_IFSOCK|0o644, 0) })
		wantRefused(t, st.s, "objects/ag/sock", objects.ErrNotRegular)
	})
}

func TestDeviceRefused(t *testing.T) {
	refusalStages(t, func(t *testing.T, st refusalStage) {
		p := filepath.Join(st.dir, "objects", "ah", "null")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		// The numbers of /dev/null on Linux; elsewhere any device will do.
		dev := int(unix.Mkdev(1, 3))
		if err := unix.Mknod(p, unix.S_IFCHR|0o644, dev); err != nil {
			t.Skipf("cannot make a device node here (%s): %v", runtime.GOOS, err)
		}
		wantRefused(t, st.s, "objects/ah/null", objects.ErrNotRegular)
	})
}

// A directory at a key is how this stage holds a prefix, so it is no
// object: not found, as a prefix is on S3.
func TestDirectoryAtKeyRefused(t *testing.T) {
	refusalStages(t, func(t *testing.T, st refusalStage) {
		if err := os.MkdirAll(filepath.Join(st.dir, "objects", "ai", "empty"), 0o755); err != nil {
			t.Fatal(err)
		}
		wantRefused(t, st.s, "objects/ai/empty", objects.ErrNotFound)
		wantRefused(t, st.s, "objects/real", objects.ErrNotFound)
		wantRefused(t, st.s, "_lake/catalog", objects.ErrNotFound)
	})
}

// A regular file on the way to a key means no such key, and a link after
// a real directory is still a link.
func TestNotFoundAndLinkBelowRealDirs(t *testing.T) {
	refusalStages(t, func(t *testing.T, st refusalStage) {
		wantRefused(t, st.s, "objects/real/a.bin/deeper", objects.ErrNotFound)
		wantRefused(t, st.s, "objects/real/missing", objects.ErrNotFound)
		plant(t, filepath.Join(st.dir, "objects", "real", "link"), symlink("."))
		wantRefused(t, st.s, "objects/real/link/a.bin", objects.ErrNotRegular)
		if got, err := objects.ReadAll(t.Context(), st.s, "objects/real/a.bin"); err != nil || string(got) != "a real object" {
			t.Fatalf("the real object: %q, %v", got, err)
		}
	})
}
