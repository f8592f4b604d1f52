// Package failpoint kills the process at named points, so tests can crash
// a real lake process exactly where a real crash could happen (between
// "part uploaded" and "checkpoint saved", say), the way bbolt's failpoints
// do. It does nothing unless LAKE_FAILPOINTS names the point.
//
// LAKE_FAILPOINTS is a comma-separated list of name or name=N entries:
// the process dies with SIGKILL the N-th time (default the first time) it
// passes the point. An entry ending in ":stop" (name=N:stop) freezes the
// process with SIGSTOP instead, as a long GC pause or a stalled VM would;
// it runs on when the test sends SIGCONT.
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
	armed map[string]int  // name → hits left before the kill
	stops map[string]bool // name → SIGSTOP instead of SIGKILL
	mu    sync.Mutex
)

func load() {
	armed, stops = map[string]int{}, map[string]bool{}
	for _, e := range strings.Split(os.Getenv(Env), ",") {
		e, stop := strings.CutSuffix(strings.TrimSpace(e), ":stop")
		name, n, found := strings.Cut(e, "=")
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
		stops[name] = stop
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
	stop := stops[name]
	mu.Unlock()
	if ok && left == 0 && stop {
		stopHere()
		return
	}
	if ok && left == 0 {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL cannot be caught; wait for it
	}
}
