//go:build failpoints

package failpoint

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The helper process passes a point three times; armed with =2 it must die
// on the second pass, never printing "survived".
func TestHitKillsOnTheNthPass(t *testing.T) {
	if os.Getenv("FAILPOINT_CHILD") == "1" {
		for range 3 {
			Hit("point")
			os.Stdout.WriteString("pass\n")
		}
		os.Stdout.WriteString("survived\n")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=TestHitKillsOnTheNthPass")
	cmd.Env = append(os.Environ(), "FAILPOINT_CHILD=1", Env+"=other,point=2")
	out, err := cmd.Output()
	if err == nil {
		t.Fatalf("the process survived an armed failpoint:\n%s", out)
	}
	if string(out) != "pass\n" {
		t.Fatalf("output %q, want one pass before the kill", out)
	}
}

// Armed with :stop, the process freezes at the point (SIGSTOP) and runs on
// after SIGCONT.
func TestHitStopsAndContinues(t *testing.T) {
	if os.Getenv("FAILPOINT_CHILD") == "1" {
		Hit("point")
		os.Stdout.WriteString("continued\n")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=TestHitStopsAndContinues")
	cmd.Env = append(os.Environ(), "FAILPOINT_CHILD=1", Env+"=point:stop")
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	for range 500 {
		if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid)); err == nil {
			// The state follows the command name in parentheses.
			if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(f) > 0 && f[0] == "T" {
				stopped = true
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !stopped {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the process never stopped at the armed point")
	}
	if out.Len() != 0 {
		t.Fatalf("the process ran past the point before SIGCONT: %q", out.String())
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "continued") {
		t.Fatalf("output %q, want the process to run on after SIGCONT", out.String())
	}
}
