package local

import (
	"io/fs"
	"sync"
)

// beforeDirSync, when set by a test, runs before each directory fsync.
var beforeDirSync func(dir string)

// dirSyncs coalesces the fsyncs of a directory that several puts ask for
// at once (group commit): each needs an fsync that starts after its own
// rename or link, and one such fsync serves every put that asked before it
// started. So while one runs, the puts that arrive wait, and the next
// fsync, started by one of them, serves them all. With 8 puts at a time
// into one directory, most share their directory's fsync; a put alone
// still gets its own at once.
type dirSyncs struct {
	mu   sync.Mutex
	dirs map[string]*dirSync
}

// dirSync is the state of one directory's fsyncs while puts use it.
type dirSync struct {
	users   int // calls holding this entry; it leaves the map at 0
	cond    sync.Cond
	asked   uint64 // requests so far
	synced  uint64 // requests served by a finished fsync
	running bool
	fi      fs.FileInfo // of the last finished fsync
	err     error
}

// sync returns once an fsync of dir by syncNow that started after this
// call did has finished, with that fsync's result (or a later one's).
func (d *dirSyncs) sync(dir string, syncNow func(string) (fs.FileInfo, error)) (fs.FileInfo, error) {
	d.mu.Lock()
	if d.dirs == nil {
		d.dirs = make(map[string]*dirSync)
	}
	e := d.dirs[dir]
	if e == nil {
		e = &dirSync{}
		e.cond.L = &d.mu
		d.dirs[dir] = e
	}
	e.users++
	e.asked++
	mine := e.asked
	for e.synced < mine {
		if e.running {
			e.cond.Wait()
			continue
		}
		e.running = true
		upTo := e.asked
		d.mu.Unlock()
		fi, err := syncNow(dir)
		d.mu.Lock()
		e.running = false
		e.synced, e.fi, e.err = upTo, fi, err
		e.cond.Broadcast()
	}
	fi, err := e.fi, e.err
	if e.users--; e.users == 0 {
		delete(d.dirs, dir)
	}
	d.mu.Unlock()
	return fi, err
}
