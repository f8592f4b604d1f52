//go:build failpoints

package failpoint

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

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
