package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/internal/humanize"
)

// isTerminal reports whether f is a terminal, where a redrawn progress bar
// makes sense; elsewhere (logs, CI) plain lines do.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// progress shows one upload's progress, or a whole run's of many files:
// a bar redrawn in place on a terminal, a plain line every few seconds
// otherwise.
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

	// A run of many files (updateFiles) also counts files.
	files, filesTotal, failed int
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
	p.draw(done >= total)
}

// updateFiles records how a run of many files goes: files committed
// (or skipped) and failed of all, bytes uploaded of those to upload.
func (p *progress) updateFiles(pr client.BulkProgress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done, p.total = pr.Bytes, pr.BytesTotal
	p.files, p.filesTotal, p.failed = pr.FilesDone, pr.FilesTotal, pr.FilesFailed
	p.draw(pr.FilesDone+pr.FilesFailed >= pr.FilesTotal)
}

// draw shows the state, at most every 100 ms on a terminal and every
// p.every otherwise, unless it is the last; p.mu is held.
func (p *progress) draw(last bool) {
	now := time.Now()
	if p.tty {
		if now.Sub(p.last) < 100*time.Millisecond && !last {
			return
		}
		p.last = now
		fmt.Fprintf(p.w, "\r\033[K%s", p.line(now, true))
		p.drawn = true
		return
	}
	if now.Sub(p.last) < p.every && !last {
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
	switch {
	case p.filesTotal > 0: // a run of files: the share of files settled
		pct = 100 * float64(p.files+p.failed) / float64(p.filesTotal)
	case p.total > 0:
		pct = 100 * float64(p.done) / float64(p.total)
	}
	var b strings.Builder
	b.WriteString(p.name)
	if bar {
		const width = 24
		filled := int(pct / 100 * width)
		fmt.Fprintf(&b, " [%s%s]", strings.Repeat("=", filled), strings.Repeat(" ", width-filled))
	}
	fmt.Fprintf(&b, " %5.1f%%", pct)
	if p.filesTotal > 0 {
		fmt.Fprintf(&b, " %d/%d files", p.files, p.filesTotal)
	}
	fmt.Fprintf(&b, " %s/%s %s/s", humanize.Bytes(p.done), humanize.Bytes(p.total), humanize.Bytes(int64(rate)))
	if p.filesTotal > 0 && elapsed > 0 {
		fmt.Fprintf(&b, " %.0f files/s", float64(p.files)/elapsed)
	}
	if rate > 0 && p.done < p.total {
		eta := time.Duration(float64(p.total-p.done) / rate * float64(time.Second))
		fmt.Fprintf(&b, " ETA %s", eta.Round(time.Second))
	}
	if p.failed > 0 {
		fmt.Fprintf(&b, " (%d failed)", p.failed)
	}
	if p.resumed > 0 {
		fmt.Fprintf(&b, " (resumed: %d parts verified)", p.resumed)
	}
	return b.String()
}
