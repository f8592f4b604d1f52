package local

import (
	"errors"

	"golang.org/x/sys/unix"
)

// oPath opens a name for fstat only (O_PATH, Linux 2.6.39 and later).
const oPath = unix.O_PATH

// errOpenat2Retry: openat2 kept failing with EAGAIN; resolve the key
// component by component instead.
var errOpenat2Retry = errors.New("openat2: resolution kept racing")

// openat2Beneath opens name below dirfd with flags, refusing a symbolic
// link at any component (ELOOP) and any path leading out of dirfd.
func openat2Beneath(dirfd int, name string, flags int) (int, error) {
	how := unix.OpenHow{
		Flags:   uint64(flags),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	// EAGAIN comes only with RESOLVE_BENEATH and a concurrent rename seen
	// while resolving "..", which a valid key never holds: a few tries
	// are plenty.
	for tries := 0; tries < 3; {
		fd, err := unix.Openat2(dirfd, name, &how)
		switch err {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			tries++
			continue
		}
		return fd, err
	}
	return -1, errOpenat2Retry
}

// probeOpenat2 reports whether openat2 works on dirfd: a kernel before 5.6
// says ENOSYS, and a container's seccomp filter may say EPERM.
func probeOpenat2(dirfd int) bool {
	fd, err := openat2Beneath(dirfd, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}
