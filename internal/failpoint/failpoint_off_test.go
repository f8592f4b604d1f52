//go:build !failpoints

package failpoint

import (
	"context"
	"go/build"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// Built without the tag, a process armed to die or freeze at a point
// passes it as if nothing were set.
func TestHitIgnoresTheEnvironmentWithoutTheTag(t *testing.T) {
	if os.Getenv("FAILPOINT_CHILD") == "1" {
		for range 3 {
			Hit("point")
		}
		os.Stdout.WriteString("survived\n")
		return
	}
	for _, spec := range []string{"point", "point=2", "point:stop"} {
		t.Run(spec, func(t *testing.T) {
			// A frozen child would hang the test: give up on it after a while.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHitIgnoresTheEnvironmentWithoutTheTag$")
			cmd.Env = append(os.Environ(), "FAILPOINT_CHILD=1", Env+"="+spec)
			out, err := cmd.Output()
			if err != nil || !strings.HasPrefix(string(out), "survived\n") {
				t.Fatalf("%s=%s: the process did not run past the point: %v, output %q", Env, spec, err, out)
			}
		})
	}
}

// Without the tag the package cannot even look the variable up: none of
// its files imports os or syscall.
func TestUntaggedBuildReadsNoEnvironment(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range []string{"os", "syscall"} {
		if slices.Contains(pkg.Imports, imp) {
			t.Errorf("files %v import %s without the failpoints tag", pkg.GoFiles, imp)
		}
	}
}
