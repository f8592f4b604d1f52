package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// isTerminal reports whether f is a terminal, where a redrawn progress bar
// makes sense; elsewhere (logs, CI) plain lines do.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// progress shows one upload's progress: a bar redrawn in place on a
// terminal, a plain line every few seconds otherwise.
type progress struct {
	w     io.Writer
	tty   bool
	name  string
	every time.Duration // plain mode: at most one line per this

	mu      sync.Mutex
	start   time.Time
	last    time.Time
	resumed int
	done    int64
	total   int64
	drawn   bool
}

func newProgress(w io.Writer, tty bool, name string) *progress {
	now := time.Now()
	return &progress{w: w, tty: tty, name: name, every: 5 * time.Second, start: now}
}

// update records bytes done of total and, for a resumed upload, how many
// finished parts were verified instead of sent again.
func (p *progress) update(done, total int64, resumed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done, p.total, p.resumed = done, total, resumed
	now := time.Now()
	if p.tty {
		if now.Sub(p.last) < 100*time.Millisecond && done < total {
			return
		}
		p.last = now
		fmt.Fprintf(p.w, "\r\033[K%s", p.line(now, true))
		p.drawn = true
		return
	}
	if now.Sub(p.last) < p.every && done < total {
		return
	}
	p.last = now
	fmt.Fprintln(p.w, p.line(now, false))
}

// finish ends the bar's line on a terminal.
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

func (p *progress) line(now time.Time, bar bool) string {
	elapsed := now.Sub(p.start).Seconds()
	rate := 0.0
	if elapsed > 0 {
		rate = float64(p.done) / elapsed
	}
	pct := 100.0
	if p.total > 0 {
		pct = 100 * float64(p.done) / float64(p.total)
	}
	var b strings.Builder
	b.WriteString(p.name)
	if bar {
		const width = 24
		filled := int(pct / 100 * width)
		fmt.Fprintf(&b, " [%s%s]", strings.Repeat("=", filled), strings.Repeat(" ", width-filled))
	}
	fmt.Fprintf(&b, " %5.1f%% %s/%s %s/s", pct, humanBytes(p.done), humanBytes(p.total), humanBytes(int64(rate)))
	if rate > 0 && p.done < p.total {
		eta := time.Duration(float64(p.total-p.done) / rate * float64(time.Second))
		fmt.Fprintf(&b, " ETA %s", eta.Round(time.Second))
	}
	if p.resumed > 0 {
		fmt.Fprintf(&b, " (resumed: %d parts verified)", p.resumed)
	}
	return b.String()
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
