//go:build failpoints

package failpoint

import (
	"runtime"
	"syscall"
)

// stopHere freezes the process before the calling goroutine runs another
// instruction. A SIGSTOP sent to the process may be taken by another
// thread, letting this one run on for a moment (long enough to send a
// request); sent to this very thread, it stops the thread on its way out
// of the tgkill call, and the whole process with it.
func stopHere() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	syscall.Tgkill(syscall.Getpid(), syscall.Gettid(), syscall.SIGSTOP)
}
