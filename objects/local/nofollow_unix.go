//go:build unix

package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lakedata/lake/objects"
)

// resolver reads below the stage directory without following a symbolic
// link anywhere on a key's path (DESIGN §3: a FILE value names an object
// of the stage). os.Root keeps links inside the stage but follows them, so
// objects/x -> ../_lake/catalog/t.json would pass for an object; here
// every component must be a real directory and the last a regular file.
type resolver struct {
	dir  *os.File        // the stage directory, kept open for *at calls
	conn syscall.RawConn // of dir: Control keeps its descriptor alive
	// beneath: openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS works here
	// (Linux 5.6 and later, when no seccomp filter refuses it), so a key
	// resolves in one call instead of one openat per component.
	beneath bool
}

func (r *resolver) init(root *os.Root) error {
	// Through the Root, so dir is the very directory the Root holds.
	d, err := root.Open(".")
	if err != nil {
		return err
	}
	conn, err := d.SyscallConn()
	if err != nil {
		d.Close()
		return err
	}
	r.dir, r.conn = d, conn
	err = conn.Control(func(fd uintptr) { r.beneath = probeOpenat2(int(fd)) })
	if err != nil {
		d.Close()
		return err
	}
	return nil
}

// close may run twice, as Store.Close may: the second is not an error.
func (r *resolver) close() error {
	if err := r.dir.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return err
	}
	return nil
}

// errSymlink marks a symbolic link met while resolving a key.
var errSymlink = errors.New("a symbolic link at or above the key")

// withRoot runs fn with the stage directory's descriptor, which stays
// valid until fn returns even if the Store is closed meanwhile.
func (r *resolver) withRoot(fn func(root int) error) error {
	var err error
	if cerr := r.conn.Control(func(fd uintptr) { err = fn(int(fd)) }); cerr != nil {
		return cerr
	}
	return err
}

// openAt opens name, a clean relative path, below root with flags
// (O_NOFOLLOW and O_CLOEXEC added). A symbolic link at any component →
// errSymlink; a missing component or one that is not a directory → an
// error isNotExist accepts.
func (r *resolver) openAt(root int, name string, flags int) (int, error) {
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	if r.beneath {
		fd, err := openat2Beneath(root, name, flags)
		if err != errOpenat2Retry {
			if err == unix.ELOOP {
				err = errSymlink
			}
			return fd, err
		}
	}
	parent, base, err := walkParent(root, name)
	if err != nil {
		return -1, err
	}
	defer closeParent(root, parent)
	fd, err := openatRetry(parent, base, flags)
	if err != nil {
		return -1, symlinkOr(parent, base, err)
	}
	return fd, nil
}

// walkParent opens the directory holding name one component at a time,
// each with O_NOFOLLOW|O_DIRECTORY, for systems without openat2. The
// caller closes the result with closeParent.
func walkParent(root int, name string) (parent int, base string, err error) {
	parent = root
	for {
		dir, rest, ok := strings.Cut(name, "/")
		if !ok {
			return parent, name, nil
		}
		fd, err := openatRetry(parent, dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
		if err != nil {
			err = symlinkOr(parent, dir, err)
			closeParent(root, parent)
			return -1, "", err
		}
		closeParent(root, parent)
		parent, name = fd, rest
	}
}

func closeParent(root, fd int) {
	if fd != root {
		unix.Close(fd)
	}
}

// symlinkOr tells why opening name in dir with O_NOFOLLOW failed: systems
// disagree on the errno for a link (ELOOP, EMLINK on FreeBSD, EFTYPE on
// NetBSD), so on failure look at what is there. A link → errSymlink; for
// anything else err stands.
func symlinkOr(dir int, name string, err error) error {
	if err == unix.ENOENT {
		return err
	}
	var st unix.Stat_t
	if unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return errSymlink
	}
	return err
}

func openatRetry(dir int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dir, name, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

func fstat(fd int, st *unix.Stat_t) error {
	for {
		if err := unix.Fstat(fd, st); err != unix.EINTR {
			return err
		}
	}
}

// notObject maps a resolution failure to the Store's sentinels.
func notObject(err error) error {
	switch {
	case err == errSymlink:
		return fmt.Errorf("%w: %v", objects.ErrNotRegular, err)
	case err == unix.ENXIO || err == unix.EOPNOTSUPP:
		// open(2) of a socket, or of a device without a driver.
		return fmt.Errorf("%w: %v", objects.ErrNotRegular, err)
	case isNotExist(err):
		return objects.ErrNotFound
	}
	return err
}

// regular checks that st is an object: a directory is how this stage
// holds a prefix of other keys, so it is simply no key (ErrNotFound, as on
// S3); anything else that is not a regular file is ErrNotRegular.
func regular(st *unix.Stat_t) error {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return nil
	case unix.S_IFDIR:
		return objects.ErrNotFound
	case unix.S_IFLNK:
		return fmt.Errorf("%w: a symbolic link", objects.ErrNotRegular)
	case unix.S_IFIFO:
		return fmt.Errorf("%w: a named pipe", objects.ErrNotRegular)
	case unix.S_IFCHR, unix.S_IFBLK:
		return fmt.Errorf("%w: a device", objects.ErrNotRegular)
	case unix.S_IFSOCK:
		return fmt.Errorf("%w: a socket", objects.ErrNotRegular)
	}
	return objects.ErrNotRegular
}

func statInfo(key string, st *unix.Stat_t) objects.Info {
	mt := time.Unix(st.Mtim.Unix())
	return objects.Info{Key: key, Size: st.Size, ETag: etag(mt, st.Size), ModTime: mt}
}

// stat is Stat's look-up: openat2 with O_PATH and fstat where available
// (three calls whatever the key's depth); else fstatat of the last
// component in its parent, found by the component walk.
func (s *Store) stat(key string) (objects.Info, error) {
	r := &s.res
	var st unix.Stat_t
	err := r.withRoot(func(root int) error {
		if r.beneath && oPath != 0 {
			// O_PATH opens nothing for reading: no side effect on a
			// device, no wait on a named pipe.
			fd, err := openat2Beneath(root, key, oPath|unix.O_NOFOLLOW|unix.O_CLOEXEC)
			if err != errOpenat2Retry {
				if err == unix.ELOOP {
					return errSymlink
				}
				if err != nil {
					return err
				}
				err = fstat(fd, &st)
				unix.Close(fd)
				return err
			}
		}
		parent, base, err := walkParent(root, key)
		if err != nil {
			return err
		}
		defer closeParent(root, parent)
		for {
			err = unix.Fstatat(parent, base, &st, unix.AT_SYMLINK_NOFOLLOW)
			if err != unix.EINTR {
				return err
			}
		}
	})
	if err != nil {
		return objects.Info{}, notObject(err)
	}
	if err := regular(&st); err != nil {
		return objects.Info{}, err
	}
	return statInfo(key, &st), nil
}

// open is Open's look-up: the key's regular file, opened for reading, and
// its size.
func (s *Store) open(key string) (*os.File, int64, error) {
	r := &s.res
	var fd int
	err := r.withRoot(func(root int) error {
		var err error
		// O_NONBLOCK: a named pipe planted at the key must not hold the
		// open until some writer shows up. O_NOCTTY: a terminal device
		// must not become ours.
		fd, err = r.openAt(root, key, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
		return err
	})
	if err != nil {
		return nil, 0, notObject(err)
	}
	var st unix.Stat_t
	if err := fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, 0, err
	}
	if err := regular(&st); err != nil {
		unix.Close(fd)
		return nil, 0, err
	}
	// Reads of a regular file never block, but os.NewFile would hand a
	// non-blocking descriptor to the poller, and kqueue mishandles regular
	// files. No other status flag was set, so 0 clears just this one.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, 0); err != nil {
		unix.Close(fd)
		return nil, 0, err
	}
	return os.NewFile(uintptr(fd), key), st.Size, nil
}

// list gathers the objects below start whose keys begin with prefix. It
// walks by descriptor — openat with O_NOFOLLOW|O_DIRECTORY, fstatat with
// AT_SYMLINK_NOFOLLOW — so it never enters a linked directory, not even
// one swapped in while the walk runs, and reports regular files only.
func (s *Store) list(ctx context.Context, start, prefix string) ([]objects.Info, error) {
	r := &s.res
	var out []objects.Info
	err := r.withRoot(func(root int) error {
		fd, err := r.openAt(root, start, unix.O_RDONLY|unix.O_DIRECTORY)
		if err == errSymlink || isNotExist(err) {
			// A link is neither an object nor a prefix of objects.
			return nil
		}
		if err != nil {
			return err
		}
		return walkDir(ctx, fd, start, prefix, &out)
	})
	return out, err
}

// walkDir appends to out the objects in the directory fd (which it closes)
// at dir and below it, matching prefix.
func walkDir(ctx context.Context, fd int, dir, prefix string, out *[]objects.Info) error {
	f := os.NewFile(uintptr(fd), dir) // owns fd from here
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		if isNotExist(err) { // removed by a concurrent Delete
			return nil
		}
		return err
	}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := name
		if dir != "." {
			p = dir + "/" + name
		}
		if p == TempDir {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if isNotExist(err) {
				continue
			}
			return fmt.Errorf("stat %s: %w", p, err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			if strings.HasPrefix(p, prefix) {
				*out = append(*out, statInfo(p, &st))
			}
		case unix.S_IFDIR:
			sub := p + "/"
			if !strings.HasPrefix(sub, prefix) && !strings.HasPrefix(prefix, sub) {
				continue
			}
			cfd, err := openatRetry(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
			if err != nil {
				if isNotExist(err) || symlinkOr(fd, name, err) == errSymlink {
					continue // removed, or replaced by a link, since the fstatat
				}
				return fmt.Errorf("open %s: %w", p, err)
			}
			if err := walkDir(ctx, cfd, p, prefix, out); err != nil {
				return err
			}
		}
		// Links, pipes, devices and sockets are not objects.
	}
	return nil
}
