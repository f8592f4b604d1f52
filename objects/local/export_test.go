package local

// Syncs returns how many fsyncs s has made, of files and directories.
func Syncs(s *Store) int64 { return s.syncs.Load() }

// SetBeforeDirSync makes fn run before each directory fsync until the
// test ends.
func SetBeforeDirSync(t interface{ Cleanup(func()) }, fn func(dir string)) {
	beforeDirSync = fn
	t.Cleanup(func() { beforeDirSync = nil })
}

// WaitingDirSyncs is how many calls for dir wait for or run an fsync.
func WaitingDirSyncs(s *Store, dir string) int {
	d := &s.dirSyncs
	d.mu.Lock()
	defer d.mu.Unlock()
	if e := d.dirs[dir]; e != nil {
		return int(e.asked - e.synced)
	}
	return 0
}
