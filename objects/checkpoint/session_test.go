package checkpoint_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakedata/lake/objects/checkpoint"
)

// holdEnv makes the test binary a helper process that opens the checkpoint
// it names, prints "locked", and holds the lock until stdin closes.
const holdEnv = "LAKE_CHECKPOINT_TEST_HOLD"

func TestMain(m *testing.M) {
	if path := os.Getenv(holdEnv); path != "" {
		s, err := checkpoint.Open(path)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("locked")
		io.Copy(io.Discard, os.Stdin)
		if err := s.Close(); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// holder is a helper process holding the checkpoint at path.
type holder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

func startHolder(t *testing.T, path string) *holder {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdEnv+"="+path)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &holder{cmd: cmd, stdin: stdin}
	t.Cleanup(func() {
		h.cmd.Process.Kill()
		h.cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if line != "locked\n" {
		t.Fatalf("helper process said %q, %v", line, err)
	}
	return h
}

func open(t *testing.T, path string) *checkpoint.Session {
	t.Helper()
	s, err := checkpoint.Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func save(t *testing.T, s *checkpoint.Session, cp *checkpoint.Checkpoint) {
	t.Helper()
	if err := s.Save(cp); err != nil {
		t.Fatalf("Save: %v", err)
	}
}

func load(t *testing.T, s *checkpoint.Session) *checkpoint.Checkpoint {
	t.Helper()
	cp, err := s.Load()
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return cp
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestOpenCreatesDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "lake", "uploads")
	s := open(t, filepath.Join(dir, "a.json"))
	if m := mode(t, dir); m != 0o700 {
		t.Errorf("directory mode %v, want 0700", m)
	}
	_, err := s.Load()
	if !errors.Is(err, checkpoint.ErrNoCheckpoint) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load = %v, want ErrNoCheckpoint", err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"a.json.lock"}) {
		t.Errorf("directory holds %v", got)
	}
}

func TestOpenRefusesAFileAsDirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := checkpoint.Open(filepath.Join(file, "a.json")); err == nil {
		s.Close()
		t.Fatal("Open below a file succeeded")
	}
}

func TestSaveLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.json")
	s := open(t, path)

	cp := valid()
	cp.UpdatedAt = time.Time{}
	before := time.Now()
	save(t, s, cp)
	if cp.UpdatedAt.Before(before) || cp.UpdatedAt.After(time.Now()) {
		t.Errorf("Save stamped UpdatedAt %v", cp.UpdatedAt)
	}
	sameCheckpoint(t, load(t, s), cp)
	if m := mode(t, path); m != 0o600 {
		t.Errorf("checkpoint mode %v, want 0600", m)
	}

	done := completed()
	save(t, s, done)
	sameCheckpoint(t, load(t, s), done)

	// Another session sees it after this one closes.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	sameCheckpoint(t, load(t, open(t, path)), done)
	if got := names(t, dir); !slices.Equal(got, []string{"a.json", "a.json.lock"}) {
		t.Errorf("directory holds %v", got)
	}
}

func TestSaveTightensMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.json")
	if err := os.WriteFile(path, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := open(t, path)
	save(t, s, valid())
	if m := mode(t, path); m != 0o600 {
		t.Errorf("checkpoint mode %v, want 0600", m)
	}
}

func TestSaveInvalidWritesNothing(t *testing.T) {
	dir := t.TempDir()
	s := open(t, filepath.Join(dir, "a.json"))
	save(t, s, valid())
	bad := valid()
	bad.Parts[0].Length = 1
	if err := s.Save(bad); !errors.Is(err, checkpoint.ErrInvalid) {
		t.Fatalf("Save = %v, want ErrInvalid", err)
	}
	if err := s.Save(nil); !errors.Is(err, checkpoint.ErrInvalid) {
		t.Fatalf("Save(nil) = %v, want ErrInvalid", err)
	}
	sameSaved(t, load(t, s), valid())
	if got := names(t, dir); !slices.Equal(got, []string{"a.json", "a.json.lock"}) {
		t.Errorf("directory holds %v", got)
	}
}

// TestCrashDuringSave simulates a crash between writing the temp file and
// renaming it: the previous checkpoint stays, and the next Open of the same
// checkpoint removes the temp file, whatever its age.
func TestCrashDuringSave(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.json")
	s := open(t, path)
	save(t, s, valid())
	half := mustEncode(t, completed())
	half = half[:len(half)/2]
	for _, name := range []string{"a.json.tmp-123", "a.json.tmp-4567", "b.json.tmp-1", "a.json.tmp-x"} {
		if err := os.WriteFile(filepath.Join(dir, name), half, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sameSaved(t, load(t, s), valid())
	s.Close()

	s = open(t, path)
	sameSaved(t, load(t, s), valid())
	// b's temp is not a's to remove; "tmp-x" is no temp name of Save's.
	want := []string{"a.json", "a.json.lock", "a.json.tmp-x", "b.json.tmp-1"}
	if got := names(t, dir); !slices.Equal(got, want) {
		t.Errorf("directory holds %v, want %v", got, want)
	}
}

func TestCrashBeforeFirstSave(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.json.tmp-99"), mustEncode(t, valid()), 0o600); err != nil {
		t.Fatal(err)
	}
	s := open(t, filepath.Join(dir, "a.json"))
	if _, err := s.Load(); !errors.Is(err, checkpoint.ErrNoCheckpoint) {
		t.Fatalf("Load = %v, want ErrNoCheckpoint", err)
	}
}

func TestLoadCorrupt(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"garbage.json": marker,
		"v3.json":      `{"version": 3}`,
		"big.json":     strings.Repeat(" ", checkpoint.MaxSize+1),
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := open(t, path).Load()
		want := checkpoint.ErrCorrupt
		if name == "v3.json" {
			want = checkpoint.ErrUnknownVersion
		}
		if !errors.Is(err, want) || strings.Contains(err.Error(), marker) {
			t.Errorf("%s: Load = %v, want %v", name, err, want)
		}
		if !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v does not name the file", name, err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "dir.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := open(t, filepath.Join(dir, "dir.json")).Load(); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Errorf("Load of a directory = %v", err)
	}
}

func TestRemove(t *testing.T) {
	dir := t.TempDir()
	s := open(t, filepath.Join(dir, "a.json"))
	if err := s.Remove(); err != nil {
		t.Fatalf("Remove of nothing: %v", err)
	}
	save(t, s, valid())
	if err := s.Remove(); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if _, err := s.Load(); !errors.Is(err, checkpoint.ErrNoCheckpoint) {
		t.Fatalf("Load after Remove = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); len(got) != 0 {
		t.Errorf("directory holds %v", got)
	}
}

func TestDrop(t *testing.T) {
	dir := t.TempDir()
	s := open(t, filepath.Join(dir, "a.json"))
	if err := s.Drop(); err != nil {
		t.Fatalf("Drop of nothing: %v", err)
	}
	save(t, s, single())
	if err := s.Drop(); err != nil {
		t.Fatalf("Drop: %v", err)
	}
	if _, err := s.Load(); !errors.Is(err, checkpoint.ErrNoCheckpoint) {
		t.Fatalf("Load after Drop = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Drop(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Drop of a closed session = %v", err)
	}
	if got := names(t, dir); len(got) != 0 {
		t.Errorf("directory holds %v", got)
	}
}

func TestClosedSession(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "a.json"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := s.Save(valid()); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Save = %v", err)
	}
	if _, err := s.Load(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Load = %v", err)
	}
	if err := s.Remove(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Remove = %v", err)
	}
}

func TestOpenTwiceInOneProcess(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.json")
	s := open(t, path)
	_, err := checkpoint.Open(path)
	if !errors.Is(err, checkpoint.ErrInProgress) {
		t.Fatalf("second Open = %v, want ErrInProgress", err)
	}
	if want := fmt.Sprintf("an upload of this file is already in progress (pid %d)", os.Getpid()); !strings.Contains(err.Error(), want) {
		t.Errorf("message %q lacks %q", err, want)
	}
	// The same path spelt differently is the same lock.
	if _, err := checkpoint.Open(filepath.Join(dir, ".", "a.json")); !errors.Is(err, checkpoint.ErrInProgress) {
		t.Fatalf("Open of the same path spelt differently = %v", err)
	}
	// Another checkpoint in the same directory is not locked.
	open(t, filepath.Join(dir, "b.json"))

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + ".lock"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("lock file after Close: %v", err)
	}
	open(t, path)
}

func TestOpenRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.json")
	var (
		won, lost atomic.Int32
		start     sync.WaitGroup
		done      sync.WaitGroup
		release   = make(chan struct{})
	)
	start.Add(1)
	for range 16 {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			s, err := checkpoint.Open(path)
			if err != nil {
				if !errors.Is(err, checkpoint.ErrInProgress) {
					t.Errorf("Open: %v", err)
				}
				lost.Add(1)
				return
			}
			won.Add(1)
			<-release
			s.Close()
		}()
	}
	start.Done()
	deadline := time.Now().Add(10 * time.Second)
	for won.Load()+lost.Load() < 16 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	done.Wait()
	if won.Load() != 1 || lost.Load() != 15 {
		t.Fatalf("%d sessions opened, %d refused; want 1 and 15", won.Load(), lost.Load())
	}
}

// TestListDoesNotFailOpen: List's lock probes never make an upload that
// starts at the same moment fail.
func TestListDoesNotFailOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.json")
	s := open(t, path)
	save(t, s, valid())
	s.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := checkpoint.List(dir); err != nil {
				t.Errorf("List: %v", err)
				return
			}
		}
	}()
	for range 200 {
		s, err := checkpoint.Open(path)
		if err != nil {
			t.Errorf("Open: %v", err)
			break
		}
		s.Close()
	}
	close(stop)
	wg.Wait()
}

func TestOpenHeldByAnotherProcess(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no flock")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "a.json")
	h := startHolder(t, path)

	_, err := checkpoint.Open(path)
	if !errors.Is(err, checkpoint.ErrInProgress) {
		t.Fatalf("Open = %v, want ErrInProgress", err)
	}
	if want := fmt.Sprintf("(pid %d)", h.cmd.Process.Pid); !strings.Contains(err.Error(), want) {
		t.Errorf("message %q lacks %q", err, want)
	}
	entries := list(t, dir)
	if len(entries) != 0 {
		t.Errorf("List = %+v; a lock without a checkpoint is no entry", entries)
	}

	// The holder closes its session: the lock is free and its file gone.
	h.stdin.Close()
	if err := h.cmd.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	if got := names(t, dir); len(got) != 0 {
		t.Errorf("directory holds %v", got)
	}
	open(t, path)
}

// TestHolderCrashes: a killed holder's lock is free at once; its lock file
// stays behind, the next session takes it over, and the checkpoint resumes.
func TestHolderCrashes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no flock")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "a.json")
	s := open(t, path)
	save(t, s, valid())
	s.Close()

	h := startHolder(t, path)
	if e := list(t, dir); len(e) != 1 || !e[0].Locked || e[0].PID != h.cmd.Process.Pid {
		t.Errorf("List = %+v, want a.json locked by pid %d", e, h.cmd.Process.Pid)
	}
	if err := h.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	h.cmd.Wait()
	if got := names(t, dir); !slices.Equal(got, []string{"a.json", "a.json.lock"}) {
		t.Errorf("after the crash the directory holds %v", got)
	}
	if e := list(t, dir); len(e) != 1 || e[0].Locked || e[0].PID != 0 {
		t.Errorf("List = %+v, want a.json unlocked", e)
	}
	s = open(t, path)
	sameSaved(t, load(t, s), valid())
}

func list(t *testing.T, dir string) []checkpoint.Entry {
	t.Helper()
	entries, err := checkpoint.List(dir)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return entries
}

func TestList(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	age := func(name string) {
		t.Helper()
		old := time.Now().Add(-checkpoint.StaleTempAge - time.Minute)
		if err := os.Chtimes(filepath.Join(dir, name), old, old); err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, filepath.Join(dir, "a.json"))
	save(t, s, valid())
	s.Close()
	held := open(t, filepath.Join(dir, "b.json"))
	save(t, held, completed())
	write("c.json", marker)
	write("d.json", `{"version": 7}`)
	write("notes.txt", "not a checkpoint")
	write("e.json.lock", "12345\n") // left by a crash, no checkpoint
	write("a.json.tmp-1", marker)   // fresh: may be a live Save
	write("f.json.tmp-2", marker)   // stale and unlocked: removed
	age("f.json.tmp-2")
	write("b.json.tmp-3", marker) // stale but locked: kept
	age("b.json.tmp-3")
	if err := os.Mkdir(filepath.Join(dir, "sub.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "a.json"), filepath.Join(dir, "link.json")); err != nil {
		t.Fatal(err)
	}

	entries := list(t, dir)
	var got []string
	for _, e := range entries {
		got = append(got, filepath.Base(e.Path))
		if e.Path != filepath.Join(dir, filepath.Base(e.Path)) {
			t.Errorf("Path %q", e.Path)
		}
		if e.Err != nil && strings.Contains(e.Err.Error(), marker) {
			t.Errorf("%s: error quotes the file: %v", e.Path, e.Err)
		}
	}
	if want := []string{"a.json", "b.json", "c.json", "d.json"}; !slices.Equal(got, want) {
		t.Fatalf("List = %v, want %v", got, want)
	}
	a, b, c, d := entries[0], entries[1], entries[2], entries[3]
	if a.Err != nil || a.Locked || a.PID != 0 {
		t.Errorf("a: %+v", a)
	} else {
		sameSaved(t, a.Checkpoint, valid())
	}
	if b.Err != nil || !b.Locked || b.PID != os.Getpid() || b.Checkpoint == nil || !b.Checkpoint.Completed {
		t.Errorf("b: %+v", b)
	}
	if c.Checkpoint != nil || !errors.Is(c.Err, checkpoint.ErrCorrupt) || c.Locked {
		t.Errorf("c: %+v", c)
	}
	if d.Checkpoint != nil || !errors.Is(d.Err, checkpoint.ErrUnknownVersion) {
		t.Errorf("d: %+v", d)
	}
	want := []string{"a.json", "a.json.tmp-1", "b.json", "b.json.lock", "b.json.tmp-3", "c.json", "d.json",
		"e.json.lock", "link.json", "notes.txt", "sub.json"}
	if got := names(t, dir); !slices.Equal(got, want) {
		t.Errorf("after List the directory holds %v, want %v", got, want)
	}
	// The probe left the holder's lock intact.
	if _, err := checkpoint.Open(filepath.Join(dir, "b.json")); !errors.Is(err, checkpoint.ErrInProgress) {
		t.Errorf("Open of a held checkpoint after List = %v", err)
	}
	held.Close()
	if e := list(t, dir); !slices.ContainsFunc(e, func(e checkpoint.Entry) bool { return filepath.Base(e.Path) == "b.json" && !e.Locked }) {
		t.Errorf("b.json still locked after Close: %+v", e)
	}
}

func TestListMissingDirectory(t *testing.T) {
	entries, err := checkpoint.List(filepath.Join(t.TempDir(), "none"))
	if err != nil || len(entries) != 0 {
		t.Fatalf("List = %v, %v", entries, err)
	}
}

func TestDefaultDir(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/var/state")
	if d, err := checkpoint.DefaultDir(); err != nil || d != filepath.FromSlash("/var/state/lake/uploads") {
		t.Errorf("DefaultDir with XDG_STATE_HOME = %q, %v", d, err)
	}
	if runtime.GOOS != "linux" {
		return
	}
	t.Setenv("HOME", "/home/ann")
	for _, xdg := range []string{"", "relative/state"} { // a relative one is ignored
		t.Setenv("XDG_STATE_HOME", xdg)
		if d, err := checkpoint.DefaultDir(); err != nil || d != "/home/ann/.local/state/lake/uploads" {
			t.Errorf("DefaultDir with XDG_STATE_HOME=%q = %q, %v", xdg, d, err)
		}
	}
}
