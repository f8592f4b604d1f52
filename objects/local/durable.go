package local

import (
	"io/fs"
	"os"
	"sync"
)

// maxDurableDirs bounds durableDirs. Past it the set starts over, which
// costs one walk up to root per directory in use, not correctness.
const maxDurableDirs = 4096

// durableDirs remembers the directories of the stage whose entry this
// Store has made durable: it fsync'd the parent after the directory
// appeared, and the parent was itself durable. A put into such a directory
// then fsyncs only the directory, for its new entry, instead of every
// ancestor up to root.
//
// A directory is remembered with its identity (device and inode): one that
// was removed and made again — by a Delete of its last object and a later
// put, in this process or another — is a new directory whose entry may not
// be durable yet, and it no longer matches. This process also forgets what
// its own Delete removes and what a put found missing, so a reused inode
// number cannot pass for the old directory either. What remains is another
// process removing and recreating a directory with the very same inode
// number between two puts of this one; the journaling file systems this
// runs on (ext4, XFS) commit that recreation with this put's own fsync.
type durableDirs struct {
	mu   sync.Mutex
	dirs map[string]fs.FileInfo
}

type durableDir struct {
	name string
	fi   fs.FileInfo
}

// has reports whether dir, which is fi now, is known durable.
func (d *durableDirs) has(dir string, fi fs.FileInfo) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	known, ok := d.dirs[dir]
	return ok && os.SameFile(known, fi)
}

func (d *durableDirs) add(dirs []durableDir) {
	if len(dirs) == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dirs == nil || len(d.dirs)+len(dirs) > maxDurableDirs {
		d.dirs = make(map[string]fs.FileInfo)
	}
	for _, e := range dirs {
		d.dirs[e.name] = e.fi
	}
}

func (d *durableDirs) forget(dir string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.dirs, dir)
}
