//go:build !unix

package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/lakedata/lake/objects"
)

// resolver has no *at calls to work with here: it checks every component
// with Lstat through the Root, then makes sure the file it opened is the
// one it checked. Slower than on unix, and only as good as Lstat's view of
// links, but it refuses the same entries.
type resolver struct{ root *os.Root }

func (r *resolver) init(root *os.Root) error { r.root = root; return nil }

func (r *resolver) close() error { return nil }

// lstatPath checks each directory on the way to name and returns name's
// own Lstat, or ErrNotFound / ErrNotRegular.
func (r *resolver) lstatPath(name string) (fs.FileInfo, error) {
	for i := 0; ; {
		j := strings.IndexByte(name[i:], '/')
		p := name
		if j >= 0 {
			p = name[:i+j]
		}
		fi, err := r.root.Lstat(p)
		if isNotExist(err) {
			return nil, objects.ErrNotFound
		}
		if err != nil {
			return nil, err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("%w: a symbolic link at or above the key", objects.ErrNotRegular)
		}
		if j < 0 {
			return fi, nil
		}
		if !fi.IsDir() {
			return nil, objects.ErrNotFound
		}
		i += j + 1
	}
}

func regular(fi fs.FileInfo) error {
	switch {
	case fi.Mode().IsRegular():
		return nil
	case fi.IsDir():
		return objects.ErrNotFound
	}
	return fmt.Errorf("%w: %v", objects.ErrNotRegular, fi.Mode().Type())
}

func (s *Store) stat(key string) (objects.Info, error) {
	fi, err := s.res.lstatPath(key)
	if err != nil {
		return objects.Info{}, err
	}
	if err := regular(fi); err != nil {
		return objects.Info{}, err
	}
	return info(key, fi), nil
}

func (s *Store) open(key string) (*os.File, int64, error) {
	fi, err := s.res.lstatPath(key)
	if err != nil {
		return nil, 0, err
	}
	if err := regular(fi); err != nil {
		return nil, 0, err
	}
	f, err := s.root.Open(key)
	if isNotExist(err) {
		return nil, 0, objects.ErrNotFound
	}
	if err != nil {
		return nil, 0, err
	}
	got, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !os.SameFile(fi, got) {
		f.Close()
		return nil, 0, fmt.Errorf("%w: replaced while being opened", objects.ErrNotRegular)
	}
	return f, got.Size(), nil
}

func (s *Store) list(ctx context.Context, start, prefix string) ([]objects.Info, error) {
	if start != "." {
		fi, err := s.res.lstatPath(start)
		if errors.Is(err, objects.ErrNotFound) || errors.Is(err, objects.ErrNotRegular) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			return nil, nil
		}
	}
	var out []objects.Info
	err := fs.WalkDir(s.root.FS(), start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if isNotExist(err) { // a concurrent Delete
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			if p == start {
				return nil
			}
			if p == TempDir {
				return fs.SkipDir
			}
			sub := p + "/"
			if !strings.HasPrefix(sub, prefix) && !strings.HasPrefix(prefix, sub) {
				return fs.SkipDir
			}
			return nil
		}
		// WalkDir reports links without following them: not objects.
		if !d.Type().IsRegular() || !strings.HasPrefix(p, prefix) {
			return nil
		}
		fi, err := d.Info()
		if isNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		out = append(out, info(p, fi))
		return nil
	})
	return out, err
}
