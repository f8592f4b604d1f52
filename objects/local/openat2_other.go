//go:build unix && !linux

package local

import "errors"

// oPath is 0: no O_PATH here, so Stat takes the component walk.
const oPath = 0

var errOpenat2Retry = errors.New("openat2: not available")

// openat2Beneath exists only on Linux; elsewhere keys are resolved one
// component at a time.
func openat2Beneath(int, string, int) (int, error) { return -1, errOpenat2Retry }

func probeOpenat2(int) bool { return false }
