package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lakedata/lake/client"
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

// A run of many files shows files done of all, bytes, the rates and the
// failures, and draws its last line however soon it comes.
func TestProgressCountsFiles(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, false, "put")
	p.updateFiles(client.BulkProgress{FilesDone: 0, FilesTotal: 4, Bytes: 0, BytesTotal: 4 << 20})
	p.updateFiles(client.BulkProgress{FilesDone: 1, FilesTotal: 4, Bytes: 2 << 20, BytesTotal: 4 << 20}) // within p.every: not drawn
	p.updateFiles(client.BulkProgress{FilesDone: 3, FilesFailed: 1, FilesTotal: 4, Bytes: 4 << 20, BytesTotal: 4 << 20})
	p.finish()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines %q", lines)
	}
	if !strings.Contains(lines[0], "  0.0% 0/4 files 0 B/4.0 MiB") {
		t.Errorf("first line %q", lines[0])
	}
	if !strings.Contains(lines[1], "100.0% 3/4 files 4.0 MiB/4.0 MiB") || !strings.Contains(lines[1], "files/s") ||
		!strings.Contains(lines[1], "(1 failed)") || strings.Contains(lines[1], "ETA") {
		t.Errorf("last line %q", lines[1])
	}
}
