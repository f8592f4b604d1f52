package console

import (
	"net"
	"sync"
	"time"
)

// Wrong tokens are throttled per client address: guessing a token (at
// least 16 characters) is hopeless anyway, but a flood of sign-ins costs
// the node work and fills its log. An address with maxSignInFailures
// wrong tokens within signInWindow gets 429 until the window has passed.
const (
	maxSignInFailures = 10
	signInWindow      = time.Minute
	// maxThrottled bounds the addresses remembered; past it the oldest
	// window is forgotten first.
	maxThrottled = 10000
)

// signInThrottle counts the wrong tokens of each client address.
type signInThrottle struct {
	mu    sync.Mutex
	fails map[string]*failWindow
}

type failWindow struct {
	n     int
	since time.Time
}

func newSignInThrottle() *signInThrottle {
	return &signInThrottle{fails: map[string]*failWindow{}}
}

// clientHost is the address a throttle counts for: the remote host,
// without its port (each connection has its own).
func clientHost(remote string) string {
	if h, _, err := net.SplitHostPort(remote); err == nil {
		return h
	}
	return remote
}

// allowed reports whether host may try a token now, and if not, how long
// until it may.
func (t *signInThrottle) allowed(host string, now time.Time) (bool, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w, ok := t.fails[host]
	if !ok || now.Sub(w.since) >= signInWindow {
		return true, 0
	}
	if w.n >= maxSignInFailures {
		return false, signInWindow - now.Sub(w.since)
	}
	return true, 0
}

// failed counts a wrong token of host.
func (t *signInThrottle) failed(host string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w, ok := t.fails[host]
	if !ok || now.Sub(w.since) >= signInWindow {
		if !ok && len(t.fails) >= maxThrottled {
			t.forgetOldest(now)
		}
		t.fails[host] = &failWindow{n: 1, since: now}
		return
	}
	w.n++
}

// forgetOldest drops every window that has passed, or else the oldest.
// Called with mu held.
func (t *signInThrottle) forgetOldest(now time.Time) {
	var oldest string
	var oldestAt time.Time
	for h, w := range t.fails {
		if now.Sub(w.since) >= signInWindow {
			delete(t.fails, h)
			continue
		}
		if oldestAt.IsZero() || w.since.Before(oldestAt) {
			oldest, oldestAt = h, w.since
		}
	}
	if len(t.fails) >= maxThrottled {
		delete(t.fails, oldest)
	}
}
