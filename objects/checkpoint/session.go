package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	// StaleTempAge is how old a temp file must be before List removes it.
	// Save keeps its temp file for milliseconds; List leaves younger ones
	// alone anyway, since it does not hold the checkpoint's lock.
	StaleTempAge = 10 * time.Minute

	lockSuffix = ".lock"
	tempInfix  = ".tmp-"
	filePerm   = 0o600
	dirPerm    = 0o700

	// lockWait is how long Open retries a taken lock before reporting
	// ErrInProgress. List's probe holds a shared lock for microseconds; the
	// retry keeps it from failing an upload that starts at that moment.
	lockWait     = 200 * time.Millisecond
	lockInterval = 10 * time.Millisecond
)

var errClosed = fmt.Errorf("checkpoint session: %w", os.ErrClosed)

// Session is an open, exclusively locked checkpoint file. While it is open
// no other Session, in this process or another, can open the same path.
// It is safe for concurrent use.
type Session struct {
	path string

	mu   sync.Mutex
	lock *os.File // nil once closed
}

// Open locks the checkpoint at path for this session, creating its
// directory (mode 0700) if needed, and removes the temp files a crashed
// Save of this checkpoint left behind. The lock is an exclusive flock(2)
// on path+".lock"; when another session holds it, Open fails with
// ErrInProgress naming the holder's pid. A crashed holder's lock is
// released by the kernel, so its checkpoint can be resumed at once.
// Load on the new session reports ErrNoCheckpoint when there is no
// checkpoint yet.
func Open(path string) (*Session, error) {
	if path == "" {
		return nil, errors.New("checkpoint: empty path")
	}
	path = filepath.Clean(path)
	if err := mkdirAll(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("checkpoint %s: create directory: %w", path, err)
	}
	lp := path + lockSuffix
	deadline := time.Now().Add(lockWait)
	var f *os.File
	for {
		var err error
		f, err = acquire(lp)
		if err == nil {
			break
		}
		if !errors.Is(err, errBusy) {
			return nil, fmt.Errorf("checkpoint %s: lock: %w", path, err)
		}
		if time.Now().After(deadline) {
			if pid := readPID(lp); pid > 0 {
				return nil, fmt.Errorf("checkpoint %s: %w (pid %d)", path, ErrInProgress, pid)
			}
			return nil, fmt.Errorf("checkpoint %s: %w (pid unknown)", path, ErrInProgress)
		}
		time.Sleep(lockInterval)
	}
	// The pid only serves the message of a competing Open; a failure to
	// record it leaves "pid unknown" there, nothing worse.
	if f.Truncate(0) == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	s := &Session{path: path, lock: f}
	s.removeTemps()
	return s, nil
}

// removeTemps deletes every temp file of this checkpoint. Holding the lock
// means no live Save owns one.
func (s *Session) removeTemps() {
	dir, base := filepath.Split(s.path)
	entries, err := os.ReadDir(filepath.Clean(dir))
	if err != nil {
		return // best effort; Load and Save report real trouble
	}
	for _, e := range entries {
		if target, ok := tempTarget(e.Name()); ok && target == base {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// tempTarget returns the checkpoint name a temp file belongs to:
// "X.tmp-<digits>" → "X" (os.CreateTemp puts decimal digits at the *).
func tempTarget(name string) (string, bool) {
	i := strings.LastIndex(name, tempInfix)
	if i <= 0 {
		return "", false
	}
	digits := name[i+len(tempInfix):]
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return "", false
	}
	return name[:i], true
}

// Load reads and decodes the checkpoint (see Decode). No checkpoint →
// ErrNoCheckpoint.
func (s *Session) Load() (*Checkpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return nil, fmt.Errorf("checkpoint %s: load: %w", s.path, errClosed)
	}
	cp, err := readCheckpoint(s.path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", s.path, err)
	}
	return cp, nil
}

func readCheckpoint(path string) (*Checkpoint, error) {
	b, err := readLimited(path, MaxSize)
	if err != nil {
		return nil, err
	}
	return Decode(b)
}

// readLimited reads the regular file at path, at most limit+1 bytes (so a
// decoder can tell that it is too big). Missing → ErrNoCheckpoint.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoCheckpoint
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: not a regular file", ErrCorrupt)
	}
	return io.ReadAll(io.LimitReader(f, limit+1))
}

// Save stamps cp.UpdatedAt with the current time, validates cp and
// replaces the checkpoint atomically: a temp file (mode 0600) in the same
// directory is written and fsynced, renamed over the checkpoint, and the
// directory fsynced. A crash at any point leaves the previous checkpoint
// or the new one, whole. An invalid cp → ErrInvalid, and nothing is written.
func (s *Session) Save(cp *Checkpoint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return fmt.Errorf("checkpoint %s: save: %w", s.path, errClosed)
	}
	if cp != nil {
		cp.UpdatedAt = time.Now().UTC()
	}
	b, err := Encode(cp)
	if err != nil {
		return fmt.Errorf("checkpoint %s: save: %w", s.path, err)
	}
	if err := writeAtomic(s.path, b); err != nil {
		return fmt.Errorf("checkpoint %s: save: %w", s.path, err)
	}
	return nil
}

func writeAtomic(path string, b []byte) error {
	dir, base := filepath.Split(path)
	dir = filepath.Clean(dir)
	f, err := os.CreateTemp(dir, base+tempInfix+"*") // mode 0600
	if err != nil {
		return err
	}
	tmp := f.Name()
	renamed := false
	defer func() {
		if !renamed {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(b); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	renamed = true
	return syncDir(dir)
}

// Remove deletes the checkpoint and fsyncs its directory. A missing
// checkpoint is not an error. The session stays open and locked.
func (s *Session) Remove() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return fmt.Errorf("checkpoint %s: remove: %w", s.path, errClosed)
	}
	err := os.Remove(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err == nil {
		err = syncDir(filepath.Dir(s.path))
	}
	if err != nil {
		return fmt.Errorf("checkpoint %s: remove: %w", s.path, err)
	}
	return nil
}

// Drop deletes the checkpoint like Remove but does not fsync its
// directory, for a checkpoint whose return after a crash is harmless (one
// whose commit id has committed: the put run again appends a duplicate
// and drops it again). A missing checkpoint is not an error.
func (s *Session) Drop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return fmt.Errorf("checkpoint %s: drop: %w", s.path, errClosed)
	}
	if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("checkpoint %s: drop: %w", s.path, err)
	}
	return nil
}

// Close releases the lock and removes the lock file. The checkpoint itself
// stays. Closing a closed session does nothing.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return nil
	}
	f := s.lock
	s.lock = nil
	release(f, s.path+lockSuffix)
	if err := f.Close(); err != nil {
		return fmt.Errorf("checkpoint %s: unlock: %w", s.path, err)
	}
	return nil
}

// Lock files. A lock is an flock(2) on the file at path+".lock". Only its
// holder removes that file, and only while holding it, so the lock files
// do not pile up; acquire makes that safe by checking, after locking, that
// the file it locked is still the one at the name — else it locked a file
// some holder has just removed, and tries again.

// errBusy: another holder has the lock.
var errBusy = errors.New("lock is held")

// lockAttempts bounds the retries of acquire when holders keep removing
// the file under it.
const lockAttempts = 8

func acquire(lp string) (*os.File, error) {
	for range lockAttempts {
		f, err := os.OpenFile(lp, os.O_RDWR|os.O_CREATE, filePerm)
		if err != nil {
			return nil, err
		}
		if err := flock(f, true); err != nil {
			f.Close()
			return nil, err
		}
		if same, err := sameFile(f, lp); err != nil || !same {
			f.Close()
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
			continue
		}
		return f, nil
	}
	return nil, errBusy
}

// release removes the lock file if it is still f's, while f holds the lock.
func release(f *os.File, lp string) {
	if same, err := sameFile(f, lp); err == nil && same {
		os.Remove(lp)
	}
}

func sameFile(f *os.File, name string) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	ni, err := os.Stat(name)
	if err != nil {
		return false, err
	}
	return os.SameFile(fi, ni), nil
}

// probe reports whether a session holds the lock at lp, and its pid if so.
// It takes a shared lock for a moment, so probes do not see each other; it
// never creates a lock file.
func probe(lp string) (locked bool, pid int, err error) {
	f, err := os.Open(lp)
	if errors.Is(err, fs.ErrNotExist) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	defer f.Close()
	err = flock(f, false)
	if errors.Is(err, errBusy) {
		return true, readPID(lp), nil
	}
	if err != nil {
		return false, 0, err
	}
	return false, 0, nil // the Close above releases it
}

// readPID returns the pid a holder wrote into its lock file, or 0.
func readPID(lp string) int {
	f, err := os.Open(lp)
	if err != nil {
		return 0
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 32))
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// mkdirAll creates dir and its missing parents with mode 0700, fsyncing
// each new directory's parent so the new entries survive a crash.
func mkdirAll(dir string) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirAll(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, dirPerm); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(parent)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// Entry is a checkpoint found by List.
type Entry struct {
	// Path is the checkpoint file.
	Path string
	// Checkpoint is the decoded checkpoint; nil when it could not be read
	// or decoded.
	Checkpoint *Checkpoint
	// Err says why Checkpoint is nil (wrapping ErrCorrupt,
	// ErrUnknownVersion or an I/O error), or why the lock could not be
	// probed.
	Err error
	// Locked: a session, probably a running upload, holds the checkpoint.
	Locked bool
	// PID is the holder's process id when Locked and known, else 0.
	PID int
}

// List returns the checkpoints in dir, by file name: every regular file
// whose name ends in ".json". Lock and temp files are skipped; temp files
// older than StaleTempAge whose checkpoint is not locked are removed. A
// missing dir holds no checkpoints.
func List(dir string) ([]Entry, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: list %s: %w", dir, err)
	}
	now := time.Now()
	var out []Entry
	for _, e := range entries {
		name := e.Name()
		if target, ok := tempTarget(name); ok {
			removeStaleTemp(dir, name, target, now)
			continue
		}
		if !strings.HasSuffix(name, ".json") || !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(dir, name)
		ent := Entry{Path: p}
		locked, pid, perr := probe(p + lockSuffix)
		ent.Locked, ent.PID = locked, pid
		cp, err := readCheckpoint(p)
		switch {
		case errors.Is(err, ErrNoCheckpoint):
			continue // Remove got there first
		case err != nil:
			ent.Err = fmt.Errorf("checkpoint %s: %w", p, err)
		case perr != nil:
			ent.Checkpoint = cp
			ent.Err = fmt.Errorf("checkpoint %s: probe lock: %w", p, perr)
		default:
			ent.Checkpoint = cp
		}
		out = append(out, ent)
	}
	return out, nil
}

func removeStaleTemp(dir, name, target string, now time.Time) {
	p := filepath.Join(dir, name)
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() || now.Sub(fi.ModTime()) < StaleTempAge {
		return
	}
	if locked, _, err := probe(filepath.Join(dir, target) + lockSuffix); err != nil || locked {
		return
	}
	os.Remove(p)
}

// DefaultDir is where uploads keep their checkpoints by default:
// $XDG_STATE_HOME/lake/uploads when XDG_STATE_HOME is an absolute path,
// else ~/.local/state/lake/uploads; on macOS and Windows the user's
// configuration directory (os.UserConfigDir) replaces ~/.local/state.
// It is not created here; Open creates it.
func DefaultDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "lake", "uploads"), nil
	}
	switch runtime.GOOS {
	case "darwin", "ios", "windows", "plan9":
		d, err := os.UserConfigDir()
		if err != nil {
			return "", fmt.Errorf("checkpoint: no state directory: %w", err)
		}
		return filepath.Join(d, "lake", "uploads"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("checkpoint: no state directory: %w", err)
	}
	return filepath.Join(home, ".local", "state", "lake", "uploads"), nil
}
