package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/internal/s3test"
)

// bulkFiles writes n files of size random bytes under dir/a and dir/b and
// returns each file's SHA-256 by name.
func bulkFiles(t *testing.T, dir string, n, size int) map[string]string {
	t.Helper()
	sums := make(map[string]string, n)
	buf := make([]byte, size)
	for i := range n {
		sub := filepath.Join(dir, string(rune('a'+i%2)))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		rand.Read(buf)
		name := fmt.Sprintf("img%05d.jpg", i)
		if err := os.WriteFile(filepath.Join(sub, name), buf, 0o644); err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(buf)
		sums[name] = hex.EncodeToString(s[:])
	}
	return sums
}

// bulkLake is a lake serve and the command line of a bulk put into it.
type bulkLake struct {
	endpoint string
	cpDir    string
	table    string
}

func startBulkLake(t *testing.T, stage ...string) *bulkLake {
	t.Helper()
	dir := t.TempDir()
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0",
		"--data-dir", filepath.Join(dir, "data")}, stage...)
	if len(stage) == 0 {
		args = append(args, "--stage", "file://"+filepath.Join(dir, "stage"))
	}
	p := startLake(t, args...)
	l := &bulkLake{endpoint: "grpc://" + p.Addr(), cpDir: filepath.Join(dir, "checkpoints"), table: "frames"}
	runLake(t, l.endpoint, "table", "create", l.table)
	return l
}

// put is the bulk put command, the same on every run.
func (l *bulkLake) put(env []string, extra ...string) *exec.Cmd {
	args := append([]string{"put", "--table", l.table, "--endpoint", l.endpoint, "--checkpoint-dir", l.cpDir,
		"--no-progress", "--json"}, extra...)
	cmd := exec.Command(lakeBin, args...)
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// run runs the bulk put to its end and returns stdout, stderr and the exit
// status.
func (l *bulkLake) run(t *testing.T, env []string, extra ...string) (string, string, int) {
	t.Helper()
	cmd := l.put(env, extra...)
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
	t.Fatalf("lake put: %v", err)
	return "", "", -1
}

func (l *bulkLake) client(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.Connect(withTimeout(t, 10*time.Second), l.endpoint, client.WithCheckpointDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (l *bulkLake) rows(t *testing.T, c *client.Client) int64 {
	t.Helper()
	info, err := c.Describe(context.Background(), l.table)
	if err != nil {
		t.Fatal(err)
	}
	return info.GetRows()
}

// checkEachOnce asserts the table holds exactly one row per file, with the
// file's SHA-256, read through SQL, and that no run checkpoint is left.
func (l *bulkLake) checkEachOnce(t *testing.T, sums map[string]string) {
	t.Helper()
	out := runLake(t, l.endpoint, "sql", "SELECT name, file.sha256 AS sha FROM "+l.table, "--format", "csv")
	got := make(map[string]int)
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Scan() // header
	rows := 0
	for sc.Scan() {
		name, sha, _ := strings.Cut(sc.Text(), ",")
		rows++
		got[name]++
		if want, ok := sums[name]; !ok || sha != want {
			t.Errorf("row %s: sha256 %s, want %s", name, sha, want)
		}
	}
	if rows != len(sums) {
		t.Errorf("%d rows, want %d", rows, len(sums))
	}
	for name := range sums {
		if got[name] != 1 {
			t.Errorf("%s: %d rows, want 1", name, got[name])
		}
	}
	if runs, _ := filepath.Glob(filepath.Join(l.cpDir, "*.run")); len(runs) != 0 {
		t.Errorf("run checkpoints left after the run succeeded: %v", runs)
	}
}

// TestBulkPutKilledAndRunAgain: `lake put -r` of 2,000 small files is
// SIGKILLed at about 40 % (by the test once 800 rows are committed, or by
// a failpoint on either side of a batch's append) or interrupted (SIGINT,
// as Ctrl-C), and the same command run again ends with exactly 2,000
// rows, each file once; on the local stage and on versitygw.
func TestBulkPutKilledAndRunAgain(t *testing.T) {
	const files, size = 2000, 4 << 10
	kills := []struct {
		name      string
		failpoint string         // "": the test sends signal at 800 rows
		signal    syscall.Signal // with a failpoint: the process kills itself
	}{
		{"SIGKILL at 800 rows", "", syscall.SIGKILL},
		{"Ctrl-C at 800 rows", "", syscall.SIGINT},
		{"before the 5th batch's append", "client-before-batch-append=5", syscall.SIGKILL},
		{"after the 4th batch's append", "client-after-batch-append=4", syscall.SIGKILL},
	}
	stages := []struct {
		name  string
		start func(t *testing.T) *bulkLake
	}{
		{"local", func(t *testing.T) *bulkLake { return startBulkLake(t) }},
		{"versitygw", func(t *testing.T) *bulkLake {
			gw := s3test.Start(t)
			gw.SetEnv(t)
			return startBulkLake(t, "--stage", "s3://"+gw.NewBucket(t)+"/lake", "--s3-endpoint", gw.Endpoint)
		}},
	}
	for _, st := range stages {
		t.Run(st.name, func(t *testing.T) {
			for _, k := range kills {
				if st.name == "versitygw" && (k.failpoint != "" || k.signal != syscall.SIGKILL) {
					// The failpoints and Ctrl-C take the same client paths
					// on either stage; the kill from outside suffices here.
					continue
				}
				t.Run(k.name, func(t *testing.T) {
					l := st.start(t)
					dir := t.TempDir()
					sums := bulkFiles(t, dir, files, size)
					// 200-row batches, never sealed early by their age on a
					// slow machine: the 4th commit is 40 % of the run.
					args := []string{"-r", dir, "--batch-rows", "200", "--batch-wait", "1h", "--jobs", "8"}
					var env []string
					if k.failpoint != "" {
						env = []string{"LAKE_FAILPOINTS=" + k.failpoint}
					}
					cmd := l.put(env, args...)
					var stderr bytes.Buffer
					cmd.Stderr = &stderr
					if err := cmd.Start(); err != nil {
						t.Fatal(err)
					}
					exited := make(chan error, 1)
					go func() { exited <- cmd.Wait() }()
					var err error
					if k.failpoint == "" {
						c := l.client(t)
						deadline := time.Now().Add(2 * time.Minute)
					poll:
						for {
							select {
							case err = <-exited:
								t.Fatalf("the put ended before it was killed (%v); rows %d:\n%s", err, l.rows(t, c), stderr.String())
							default:
							}
							if l.rows(t, c) >= 800 {
								cmd.Process.Signal(k.signal)
								err = <-exited
								break poll
							}
							if time.Now().After(deadline) {
								cmd.Process.Kill()
								t.Fatalf("800 rows not committed in 2 minutes:\n%s", stderr.String())
							}
							time.Sleep(2 * time.Millisecond)
						}
					} else {
						err = <-exited
					}
					var exit *exec.ExitError
					switch {
					case !errors.As(err, &exit):
						t.Fatalf("the put was not stopped: %v\n%s", err, stderr.String())
					case k.signal == syscall.SIGKILL && exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL:
						t.Fatalf("the put was not killed: %v\n%s", err, stderr.String())
					case k.signal == syscall.SIGINT && exit.ExitCode() != 1:
						// Interrupted, lake stops its uploads and its append
						// and exits with status 1, the run checkpoint kept.
						t.Fatalf("the interrupted put: %v, want exit status 1\n%s", err, stderr.String())
					}
					committed := l.rows(t, l.client(t))
					if committed == 0 || committed >= files {
						t.Fatalf("%d rows committed when killed, want part of the run", committed)
					}
					runs, _ := filepath.Glob(filepath.Join(l.cpDir, "*.run"))
					if len(runs) != 1 {
						t.Fatalf("run checkpoints after the kill: %v", runs)
					}

					stdout, errOut, code := l.run(t, nil, args...)
					if code != 0 {
						t.Fatalf("the run again: exit %d\n%s", code, errOut)
					}
					skipped, dup := 0, 0
					for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
						var r struct{ Skipped, Duplicate bool }
						if err := json.Unmarshal([]byte(line), &r); err != nil {
							t.Fatalf("line %q: %v", line, err)
						}
						if r.Skipped {
							skipped++
						}
						if r.Duplicate {
							dup++
						}
					}
					t.Logf("killed with %d rows committed; the run again skipped %d files and resent %d rows already committed", committed, skipped, dup)
					if k.failpoint == "client-after-batch-append=4" && (committed != 800 || skipped != 600 || dup != 200) {
						t.Errorf("after the 4th append: %d committed, %d skipped, %d duplicates; want 800, 600, 200", committed, skipped, dup)
					}
					l.checkEachOnce(t, sums)
				})
			}
		})
	}
}

// TestBulkPutReportsAVanishedFile: a file removed while `lake put -r`
// runs is reported on stderr and in the --json output, every other file
// commits, and the exit status is 1. The put is frozen (SIGSTOP) after
// its first batch commits, the file removed, and the put let go on.
func TestBulkPutReportsAVanishedFile(t *testing.T) {
	l := startBulkLake(t)
	dir := t.TempDir()
	sums := bulkFiles(t, dir, 300, 1<<10)
	gone := filepath.Join(dir, "b", "img00299.jpg") // the last one uploaded
	cmd := l.put([]string{"LAKE_FAILPOINTS=client-after-batch-append=1:stop"}, "-r", dir, "--batch-rows", "10", "--jobs", "1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for i := 0; processState(cmd.Process.Pid) != "T"; i++ {
		if i == 6000 {
			cmd.Process.Kill()
			t.Fatalf("the put never stopped at its failpoint:\n%s", stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if err := <-exited; !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit: %v, want status 1\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "lake: "+gone+": ") || !strings.Contains(stderr.String(), "1 failed") {
		t.Errorf("stderr does not report %s:\n%s", gone, stderr.String())
	}
	failed := 0
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var r struct{ Path, Error string }
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if r.Error != "" {
			failed++
			if r.Path != gone {
				t.Errorf("%s failed: %s", r.Path, r.Error)
			}
		}
	}
	if failed != 1 {
		t.Errorf("%d failures in the --json output, want 1", failed)
	}
	delete(sums, filepath.Base(gone))
	out := runLake(t, l.endpoint, "sql", "SELECT count(*) AS n, count(DISTINCT name) AS names FROM "+l.table, "--format", "csv")
	if want := fmt.Sprintf("%d,%d", len(sums), len(sums)); !strings.Contains(out, want) {
		t.Errorf("rows: %s, want %s", out, want)
	}
}

// TestBulkPutResumesLargeFiles: in a bulk put on versitygw, files larger
// than a part go through their own resumable upload checkpoints. Killed
// mid-upload or right after an upload completed, the same command run
// again commits every file once and leaves no checkpoint behind.
func TestBulkPutResumesLargeFiles(t *testing.T) {
	gw := s3test.Start(t)
	gw.SetEnv(t)
	for _, fp := range []string{"s3-after-part-checkpoint=2", "s3-after-complete=1"} {
		t.Run(fp, func(t *testing.T) {
			l := startBulkLake(t, "--stage", "s3://"+gw.NewBucket(t)+"/lake", "--s3-endpoint", gw.Endpoint)
			dir := t.TempDir()
			sums := bulkFiles(t, dir, 8, 1<<10)
			big := make([]byte, 20<<20) // two 16 MiB parts
			for _, name := range []string{"big0.bin", "big1.bin"} {
				rand.Read(big)
				if err := os.WriteFile(filepath.Join(dir, name), big, 0o644); err != nil {
					t.Fatal(err)
				}
				s := sha256.Sum256(big)
				sums[name] = hex.EncodeToString(s[:])
			}
			args := []string{"-r", dir, "--jobs", "2"}
			// exec reports a death by a signal as exit status -1.
			if _, errOut, code := l.run(t, []string{"LAKE_FAILPOINTS=" + fp}, args...); code != -1 {
				t.Fatalf("the put was not killed: exit %d\n%s", code, errOut)
			}
			// The interrupted uploads' object keys: the run again finishes
			// those uploads rather than starting others.
			uploads, _ := filepath.Glob(filepath.Join(l.cpDir, "*.json"))
			if len(uploads) == 0 || len(uploads) > 2 {
				t.Fatalf("upload checkpoints after the kill: %v", uploads)
			}
			var resumed []string
			for _, u := range uploads {
				raw, err := os.ReadFile(u)
				if err != nil {
					t.Fatal(err)
				}
				var cp struct{ Binding struct{ Key string } }
				if err := json.Unmarshal(raw, &cp); err != nil {
					t.Fatal(err)
				}
				resumed = append(resumed, strings.TrimPrefix(cp.Binding.Key, "lake/"))
			}
			if _, errOut, code := l.run(t, nil, args...); code != 0 {
				t.Fatalf("the run again: exit %d\n%s", code, errOut)
			}
			l.checkEachOnce(t, sums)
			keys := runLake(t, l.endpoint, "sql", "SELECT file.key FROM "+l.table, "--format", "csv")
			for _, k := range resumed {
				if !strings.Contains(keys, k+"\n") {
					t.Errorf("the resumed upload's key %s is in no row:\n%s", k, keys)
				}
			}
			if left, _ := filepath.Glob(filepath.Join(l.cpDir, "*")); len(left) != 0 {
				t.Errorf("checkpoints left: %v", left)
			}
		})
	}
}
