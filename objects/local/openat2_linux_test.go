package local_test

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lakedata/lake/objects/local"
)

// Where the kernel has openat2, the store must use it: the walk costs two
// calls per directory on every Stat of the append path.
func TestOpenat2UsedWhereAvailable(t *testing.T) {
	dir := t.TempDir()
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, dir, &how)
	if err != nil {
		t.Skipf("openat2 not available here: %v", err)
	}
	unix.Close(fd)
	if s := open(t, dir); !local.UsesOpenat2(s) {
		t.Fatal("openat2 works here but the store resolves keys component by component")
	}
}
