//go:build !linux || !cgo

package query

// capAllocations does nothing where the libc is not glibc's: the memory
// watchdog alone bounds statements there.
func capAllocations(int64) {}

const allocationsCapped = false
