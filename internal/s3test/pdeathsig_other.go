//go:build !linux

package s3test

import "os/exec"

// setParentDeathSignal has no portable equivalent outside Linux; a test
// process that dies without cleanups leaves its gateway running there.
func setParentDeathSignal(*exec.Cmd) {}
