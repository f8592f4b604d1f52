package meta

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// ErrDataDirLocked: another process serves the same data dir.
var ErrDataDirLocked = errors.New("data dir is in use by another lake meta process")

// dirLock is an exclusive flock on <data-dir>/LOCK, held for the life of
// the service so two metas can never share one bbolt index. The kernel
// drops it when the process dies, so a crash never leaves it stale.
type dirLock struct{ f *os.File }

func lockDataDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("meta: open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			pid := string(bytes.TrimSpace(holder))
			if pid == "" {
				pid = "unknown"
			}
			return nil, fmt.Errorf("meta: %w: %s (held by pid %s); stop that process or pass another --data-dir", ErrDataDirLocked, dir, pid)
		}
		return nil, fmt.Errorf("meta: lock %s: %w", path, err)
	}
	// The pid is only for the error message above.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f}, nil
}

func (l *dirLock) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	return l.f.Close() // closing drops the flock
}
