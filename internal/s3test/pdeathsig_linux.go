package s3test

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal kills the gateway if the test process dies without
// running its cleanups (a panic, a timeout, a kill -9).
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
