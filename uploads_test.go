package main

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakedata/lake/client"
)

// TestCLIUploads: ls (no endpoint, so called directly) of an empty checkpoint directory prints the header
// only; cancel of a file with no pending upload says so (client.ErrNoUpload)
// and prints nothing.
func TestCLIUploads(t *testing.T) {
	f := newCLIFixture(t)
	dir := t.TempDir()
	var buf bytes.Buffer
	if err := runUploadsLs(&uploadsLsOptions{checkpointDir: dir}, &buf, time.Now()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "FILE") {
		t.Errorf("uploads ls of an empty dir:\n%s", out)
	}
	path := filepath.Join(t.TempDir(), "clip.mp4")
	out, err := f.run("", "uploads", "cancel", path, "--checkpoint-dir", dir)
	if !errors.Is(err, client.ErrNoUpload) || out != "" {
		t.Errorf("uploads cancel without an upload: %q, %v; want ErrNoUpload and no output", out, err)
	}
}
