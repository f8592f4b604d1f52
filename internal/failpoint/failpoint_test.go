package failpoint

import (
	"os"
	"os/exec"
	"testing"
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
