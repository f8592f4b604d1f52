package e2e

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/local"
	"github.com/lakedata/lake/wire"
)

// runLakeExit runs a CLI command of the built binary and returns its
// stdout, stderr and exit status.
func runLakeExit(t *testing.T, endpoint string, args ...string) (string, string, int) {
	t.Helper()
	return runLakeExitEnv(t, nil, endpoint, args...)
}

// runLakeExitEnv is runLakeExit in the environment env (nil: this
// process's).
func runLakeExitEnv(t *testing.T, env []string, endpoint string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(lakeBin, append(args, "--endpoint", endpoint)...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return stdout.String(), stderr.String(), 0
	case errors.As(err, &exit):
		return stdout.String(), stderr.String(), exit.ExitCode()
	}
	t.Fatalf("lake %s: %v", strings.Join(args, " "), err)
	return "", "", -1
}

// TestVerifyFindsLiesAndDamage: against a real `lake serve`, a row whose
// client claimed a wrong sha256 and a row whose object was truncated in the
// stage after its put are both listed by `lake verify`, with their names
// and keys, and it exits 1; a healthy table exits 0 with one summary line;
// restarted with --verify-rate, the service's background verifier logs
// both mismatches on its own.
func TestVerifyFindsLiesAndDamage(t *testing.T) {
	dir := t.TempDir()
	stageDir := filepath.Join(dir, "stage")
	serve := []string{"serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0",
		"--data-dir", filepath.Join(dir, "data"), "--stage", "file://" + stageDir}
	// No background verification yet: it could read an object before the
	// test damages it, and it never reads an object twice.
	p := startLake(t, append(serve, "--verify-rate", "0")...)
	endpoint := "grpc://" + p.Addr()

	runLake(t, endpoint, "table", "create", "clips")
	runLake(t, endpoint, "table", "create", "healthy")
	var paths []string
	for _, name := range []string{"good.mp4", "truncated.mp4"} {
		data := make([]byte, 300_000)
		rand.Read(data)
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	keys := map[string]string{}
	out := runLake(t, endpoint, append([]string{"put", "--table", "clips", "--json", "--no-progress"}, paths...)...)
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var l struct{ Path, Key string }
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("put --json line %q: %v", sc.Text(), err)
		}
		keys[filepath.Base(l.Path)] = l.Key
	}
	runLake(t, endpoint, append([]string{"put", "--table", "healthy", "--no-progress"}, paths...)...)

	// A client that lies: it stores an object and commits a row for it
	// with the right size and someone else's sha256. The commit accepts it
	// (it stats the object, it does not read it).
	ctx := withTimeout(t, time.Minute)
	stage, err := local.Open(stageDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stage.Close()
	liarKey := objects.NewObjectKey("liar.bin", time.Now())
	liarBytes := []byte(strings.Repeat("bytes nobody hashed ", 1000))
	if _, err := stage.Put(ctx, liarKey, bytes.NewReader(liarBytes), objects.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	other := sha256.Sum256([]byte("other bytes"))
	c, err := client.Connect(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rec := wiretest.FileRow("liar.bin", wire.FileValue{Key: liarKey, Size: int64(len(liarBytes)), SHA256: hex.EncodeToString(other[:])})
	defer rec.Release()
	if _, err := c.Append(ctx, "clips", rec, client.AppendOptions{}); err != nil {
		t.Fatalf("the lying append was refused: %v", err)
	}
	keys["liar.bin"] = liarKey

	// Damage after the put: the stage loses the end of a file.
	if err := os.Truncate(filepath.Join(stageDir, filepath.FromSlash(keys["truncated.mp4"])), 1000); err != nil {
		t.Fatal(err)
	}

	stdout, stderr, code := runLakeExit(t, endpoint, "verify", "--table", "clips")
	if code != 1 {
		t.Fatalf("lake verify of a damaged table exited %d:\n%s\n%s", code, stdout, stderr)
	}
	wantLines := map[string]string{"liar.bin": "sha256 differs", "truncated.mp4": "size differs"}
	for name, problem := range wantLines {
		found := false
		for _, l := range strings.Split(stdout, "\n") {
			if strings.HasPrefix(l, name+" ") && strings.Contains(l, keys[name]) && strings.Contains(l, problem) {
				found = true
			}
		}
		if !found {
			t.Errorf("no line for %s (%s, %s):\n%s", name, keys[name], problem, stdout)
		}
	}
	if strings.Contains(stdout, keys["good.mp4"]) {
		t.Errorf("the healthy object is listed:\n%s", stdout)
	}
	if !strings.Contains(stderr, "2 of 3 objects") {
		t.Errorf("stderr %q does not count the damage", stderr)
	}

	stdout, _, code = runLakeExit(t, endpoint, "verify", "--table", "clips", "--all", "--json")
	var rep struct {
		OK         bool
		Objects    int64
		Mismatches []struct{ Key, Problem, Name string }
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != 1 {
		t.Fatalf("--json: exit %d, %v:\n%s", code, err, stdout)
	}
	if rep.OK || rep.Objects != 3 || len(rep.Mismatches) != 2 {
		t.Errorf("--json report %+v", rep)
	}

	stdout, stderr, code = runLakeExit(t, endpoint, "verify", "--table", "healthy")
	if code != 0 || strings.Count(stdout, "\n") != 1 || !strings.Contains(stdout, "2 objects") {
		t.Errorf("lake verify of a healthy table exited %d:\n%s\n%s", code, stdout, stderr)
	}
	if stderr != "" {
		t.Errorf("a short healthy run wrote to stderr: %q", stderr)
	}

	_, stderr, code = runLakeExit(t, endpoint, "verify", "--table", "nope")
	if code != 1 || !strings.Contains(stderr, "table not found") {
		t.Errorf("unknown table: exit %d, %q", code, stderr)
	}

	// Restarted with background verification, the leader finds the same
	// two on its own.
	p.kill(syscall.SIGTERM)
	p = startLake(t, append(serve, "--verify-rate", "1GiB")...)
	deadline := time.Now().Add(30 * time.Second)
	for {
		logs := p.output()
		if strings.Contains(logs, liarKey) && strings.Contains(logs, keys["truncated.mp4"]) {
			if n := strings.Count(logs, "object does not match its rows"); n != 2 {
				t.Errorf("%d background warnings, want 2:\n%s", n, logs)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the background verifier did not report both mismatches within 30 s:\n%s", logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
