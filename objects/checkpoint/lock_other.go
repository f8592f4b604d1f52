//go:build !unix

package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"runtime"
)

// flock is not implemented here: without a lock two uploads of one file
// could corrupt each other's checkpoint, so Open refuses instead.
func flock(*os.File, bool) error {
	return fmt.Errorf("file locks on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
