//go:build unix

package local_test

import (
	"syscall"
	"testing"

	"github.com/lakedata/lake/objects/local"
)

type resolveMode struct {
	name string
	set  func(*local.Store)
}

// resolveModes are the ways a store may resolve keys here: openat2 where
// the kernel allows it, and always the component walk that stands in
// where it does not.
func resolveModes(t testing.TB) []resolveMode {
	probe := open(t, t.TempDir())
	modes := []resolveMode{{"Walk", local.UseComponentWalk}}
	if local.UsesOpenat2(probe) {
		modes = append([]resolveMode{{"Openat2", func(*local.Store) {}}}, modes...)
	}
	return modes
}

func mkfifo(t *testing.T, p string) {
	t.Helper()
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
}
