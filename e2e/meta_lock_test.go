package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSecondMetaOnSameDataDirFailsAtOnce: a second meta process on a data
// dir in use exits quickly with a message naming the problem.
func TestSecondMetaOnSameDataDirFailsAtOnce(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	startLake(t, "serve", "--role=meta", "--listen", "127.0.0.1:0", "--data-dir", dataDir)
	start := time.Now()
	out, err := exec.Command(lakeBin, "serve", "--role=meta", "--listen", "127.0.0.1:0", "--data-dir", dataDir).CombinedOutput()
	if err == nil {
		t.Fatalf("second meta started on a locked data dir:\n%s", out)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("second meta took %v to fail", took)
	}
	if !strings.Contains(string(out), "in use by another lake meta process") || !strings.Contains(string(out), "--data-dir") {
		t.Fatalf("unclear message:\n%s", out)
	}
}
