package local

// Syncs returns how many fsyncs s has made, of files and directories.
func Syncs(s *Store) int64 { return s.syncs.Load() }
