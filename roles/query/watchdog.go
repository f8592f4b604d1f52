package query

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DuckDB's memory_limit bounds its buffer pool, but not every allocation:
// lists, long strings and constant folding live outside it, and
// `SELECT len(range(200000000))` takes a process with a 1 GB limit to
// 17 GB. So the role watches its own resident size and interrupts the
// running statements when it passes the limit by more than the margin.
const (
	// memoryMargin is what the process may hold beyond the memory limit:
	// the Go heap, gRPC buffers, DuckDB's own allocations outside its
	// pool, and what a statement allocates between two samples.
	memoryMarginMin = 512 << 20
	// watchInterval is how often the resident size is sampled; reading
	// /proc/self/statm costs a few microseconds.
	watchInterval = 10 * time.Millisecond
)

// memoryMargin is the margin for a memory limit of limit bytes: a quarter
// of it, at least memoryMarginMin.
func memoryMargin(limit int64) int64 { return max(memoryMarginMin, limit/4) }

// allocationCap is the largest single C heap request the process accepts
// (alloccap_linux.go): half the margin, so one request can never by
// itself carry the process past the ceiling by more than that.
func allocationCap(limit int64) int64 { return memoryMargin(limit) / 2 }

// running is one statement the watchdog may stop.
type running struct {
	cancel    context.CancelCauseFunc
	interrupt func() // duckdb_interrupt on its connection; nil if unknown
	started   time.Time
	stopped   bool
}

// escalateAfter is how long the watchdog waits for a stopped statement to
// give its memory back before it stops the next one.
const escalateAfter = 250 * time.Millisecond

// watchdog stops statements while the process's resident size is above
// ceiling: the one that has run longest first (a memory bomb has, when
// it is noticed; the short statements of other clients have not), then,
// every escalateAfter that the size stays above, the next. Statements
// that began after the size went above are never stopped: they did not
// cause it, and other clients keep being served while a bomb unwinds.
type watchdog struct {
	ceiling  int64
	mu       sync.Mutex
	next     uint64
	stmts    map[uint64]*running
	lastStop time.Time
	over     time.Time // when the size went above the ceiling; zero while below
	stop     chan struct{}
	done     chan struct{}
	// peak is the largest resident size seen, for tests and logs.
	peak int64
}

func startWatchdog(ceiling int64) *watchdog {
	w := &watchdog{ceiling: ceiling, stmts: map[uint64]*running{}, stop: make(chan struct{}), done: make(chan struct{})}
	go w.loop()
	return w
}

// track registers a statement; the returned function forgets it.
func (w *watchdog) track(cancel context.CancelCauseFunc, interrupt func()) (forget func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.next++
	id := w.next
	w.stmts[id] = &running{cancel: cancel, interrupt: interrupt, started: time.Now()}
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.stmts, id)
	}
}

func (w *watchdog) loop() {
	defer close(w.done)
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case now := <-t.C:
			if rss, err := residentBytes(); err == nil {
				w.sample(rss, now)
			}
		}
	}
}

// sample acts on one reading of the resident size.
func (w *watchdog) sample(rss int64, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.peak = max(w.peak, rss)
	if rss <= w.ceiling {
		w.over = time.Time{}
		return
	}
	if w.over.IsZero() {
		w.over = now
	}
	var oldest *running
	for _, r := range w.stmts {
		if r.stopped {
			// Keep interrupting: DuckDB clears the flag between phases.
			if r.interrupt != nil {
				r.interrupt()
			}
			continue
		}
		if r.started.Before(w.over) && (oldest == nil || r.started.Before(oldest.started)) {
			oldest = r
		}
	}
	if oldest == nil || now.Sub(w.lastStop) < escalateAfter {
		return
	}
	oldest.stopped = true
	w.lastStop = now
	oldest.cancel(fmt.Errorf("%w: resident %d MiB, limit with margin %d MiB", ErrMemoryExhausted, rss>>20, w.ceiling>>20))
	if oldest.interrupt != nil {
		oldest.interrupt()
	}
}

func (w *watchdog) close() {
	close(w.stop)
	<-w.done
}

// residentBytes is the process's resident set size.
func residentBytes() (int64, error) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, err
	}
	fields := bytes.Fields(b)
	if len(fields) < 2 {
		return 0, fmt.Errorf("statm: %q", b)
	}
	pages, err := strconv.ParseInt(string(fields[1]), 10, 64)
	if err != nil {
		return 0, err
	}
	return pages * int64(os.Getpagesize()), nil
}

// physicalMemory is the machine's memory, from /proc/meminfo.
func physicalMemory() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(b) {
		if rest, ok := bytes.CutPrefix(line, []byte("MemTotal:")); ok {
			f := bytes.Fields(rest)
			if len(f) == 0 {
				break
			}
			kb, err := strconv.ParseInt(string(f[0]), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("meminfo: no MemTotal")
}

// parseMemoryLimit reads DuckDB's memory_limit syntax ("1GB", "512MiB",
// "4 GB"): DuckDB's KB/MB/GB/TB are powers of 1000, KiB/MiB/GiB/TiB of 1024.
func parseMemoryLimit(s string) (int64, error) {
	num, unit := s, ""
	for i, r := range s {
		if (r < '0' || r > '9') && r != '.' {
			num, unit = s[:i], s[i:]
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("memory limit %q: want a size such as 4GB or 512MiB", s)
	}
	units := map[string]float64{
		"": 1, "b": 1, "bytes": 1,
		"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
		"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
	}
	m, ok := units[strings.ToLower(strings.ReplaceAll(unit, " ", ""))]
	if !ok {
		return 0, fmt.Errorf("memory limit %q: unknown unit %q", s, unit)
	}
	return int64(v * m), nil
}
