//go:build unix

package checkpoint

import (
	"errors"
	"os"
	"syscall"
)

// flock takes an exclusive or shared flock(2) on f without waiting; a lock
// held by another open file description → errBusy. flock locks belong to
// the open file, not the process, so two Opens in one process exclude each
// other too (fcntl locks would not), and the kernel drops them when the
// holder dies.
func flock(f *os.File, exclusive bool) error {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return errBusy
		default:
			return &os.PathError{Op: "flock", Path: f.Name(), Err: err}
		}
	}
}
