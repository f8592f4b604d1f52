// Package fstree describes a directory tree as text, so tests can assert
// that something left a tree (a stage, a scratch directory) unchanged.
package fstree

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// Describe lists every entry under dir, one a line: its path relative to
// dir, whether it is a directory, and its size.
func Describe(dir string) (string, error) {
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(&b, "%s %v %d\n", rel, d.IsDir(), info.Size())
		return nil
	})
	return b.String(), err
}
