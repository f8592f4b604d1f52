//go:build unix

package local

// UseComponentWalk makes s resolve keys one directory at a time, as it does
// where openat2 is missing or refused, so tests cover both ways.
func UseComponentWalk(s *Store) { s.res.beneath = false }

// UsesOpenat2 reports whether s resolves keys with openat2.
func UsesOpenat2(s *Store) bool { return s.res.beneath }
