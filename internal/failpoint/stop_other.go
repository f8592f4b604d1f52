//go:build failpoints && !linux

package failpoint

import (
	"os"
	"syscall"
)

// stopHere freezes the process (elsewhere than Linux, another thread may
// run on for a moment before it stops).
func stopHere() {
	syscall.Kill(os.Getpid(), syscall.SIGSTOP)
}
