//go:build !unix

package local_test

import (
	"testing"

	"github.com/lakedata/lake/objects/local"
)

type resolveMode struct {
	name string
	set  func(*local.Store)
}

func resolveModes(testing.TB) []resolveMode {
	return []resolveMode{{"Lstat", func(*local.Store) {}}}
}

func mkfifo(t *testing.T, _ string) { t.Skip("no named pipes in a directory here") }
