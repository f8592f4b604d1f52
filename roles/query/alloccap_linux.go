//go:build linux && cgo

package query

/*
#include <stddef.h>
#include <stdint.h>
#include <errno.h>

// glibc's own allocator, which these wrappers call.
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);

static size_t lake_alloc_cap = SIZE_MAX;

void lake_set_alloc_cap(size_t c) { __atomic_store_n(&lake_alloc_cap, c, __ATOMIC_RELAXED); }

// The executable's malloc, calloc and realloc take the place of libc's
// for every C and C++ caller in the process (operator new included). Each
// refuses one request larger than the cap, as an out-of-memory would.
void *malloc(size_t n) {
	if (n > __atomic_load_n(&lake_alloc_cap, __ATOMIC_RELAXED)) { errno = ENOMEM; return NULL; }
	return __libc_malloc(n);
}
void *calloc(size_t count, size_t size) {
	size_t cap = __atomic_load_n(&lake_alloc_cap, __ATOMIC_RELAXED);
	if (size != 0 && count > cap / size) { errno = ENOMEM; return NULL; }
	return __libc_calloc(count, size);
}
void *realloc(void *p, size_t n) {
	if (n > __atomic_load_n(&lake_alloc_cap, __ATOMIC_RELAXED)) { errno = ENOMEM; return NULL; }
	return __libc_realloc(p, n);
}
*/
import "C"

import "sync"

var allocCap struct {
	sync.Mutex
	n int64
}

// capAllocations refuses, process-wide, any single C or C++ heap request
// (malloc, calloc, realloc, operator new) above n bytes; with several
// engines in one process the largest cap asked for holds.
//
// Why: DuckDB binds some functions (len, unnest, ...) and folds constant
// expressions by turning a constant list into one C++ Value per element,
// inside one call that never looks at an interrupt. `SELECT
// len(range(200000000))` grows that way to 17 GB. With the cap, the
// element array cannot be allocated, DuckDB gives up the fold and runs the
// expression as vectors instead, which the memory watchdog can interrupt.
// DuckDB's buffer pool and vectors come from its own allocator (jemalloc),
// not malloc, and Go does not use malloc, so ordinary statements never
// meet the cap.
func capAllocations(n int64) {
	allocCap.Lock()
	defer allocCap.Unlock()
	if n > allocCap.n {
		allocCap.n = n
		C.lake_set_alloc_cap(C.size_t(n))
	}
}

// allocationsCapped reports whether this build caps C allocations.
const allocationsCapped = true
