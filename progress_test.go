package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestProgressPlainLines(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, false, "clip.mp4")
	p.every = 0
	p.update(512<<20, 2<<30, 3)
	p.update(2<<30, 2<<30, 3)
	p.finish()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines %q", lines)
	}
	if !strings.Contains(lines[0], "clip.mp4") || !strings.Contains(lines[0], " 25.0%") ||
		!strings.Contains(lines[0], "512.0 MiB/2.0 GiB") || !strings.Contains(lines[0], "ETA") ||
		!strings.Contains(lines[0], "resumed: 3 parts verified") {
		t.Errorf("first line %q", lines[0])
	}
	if strings.Contains(lines[1], "ETA") || !strings.Contains(lines[1], "100.0%") {
		t.Errorf("last line %q", lines[1])
	}
	if strings.Contains(buf.String(), "\r") {
		t.Error("plain mode wrote a carriage return")
	}
}

func TestProgressBarRedrawsOnATerminal(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, true, "w.bin")
	p.update(1<<20, 4<<20, 0)
	p.finish()
	out := buf.String()
	if !strings.HasPrefix(out, "\r\033[K") || !strings.Contains(out, "[======") || !strings.HasSuffix(out, "\r\033[K") {
		t.Fatalf("terminal output %q", out)
	}
}
