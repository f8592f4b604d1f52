// Package failpoint kills the process at named points, so tests can crash
// a real lake process exactly where a real crash could happen (between
// "part uploaded" and "checkpoint saved", say), the way bbolt's failpoints
// do. It does nothing unless LAKE_FAILPOINTS names the point.
//
// LAKE_FAILPOINTS is a comma-separated list of name or name=N entries:
// the process dies with SIGKILL the N-th time (default the first time) it
// passes the point.
package failpoint

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Env is the variable that arms failpoints.
const Env = "LAKE_FAILPOINTS"

var (
	once  sync.Once
	armed map[string]int // name → hits left before the kill
	mu    sync.Mutex
)

func load() {
	armed = map[string]int{}
	for _, e := range strings.Split(os.Getenv(Env), ",") {
		name, n, found := strings.Cut(strings.TrimSpace(e), "=")
		if name == "" {
			continue
		}
		count := 1
		if found {
			if v, err := strconv.Atoi(n); err == nil && v > 0 {
				count = v
			}
		}
		armed[name] = count
	}
}

// Hit passes the point name: when armed and its count is reached, the
// process dies at once, as if the machine lost power here (no deferred
// calls, no flushing).
func Hit(name string) {
	once.Do(load)
	if len(armed) == 0 {
		return
	}
	mu.Lock()
	left, ok := armed[name]
	if ok {
		left--
		armed[name] = left
	}
	mu.Unlock()
	if ok && left == 0 {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL cannot be caught; wait for it
	}
}
