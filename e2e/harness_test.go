package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lakeBin is the binary built once for the whole package.
var lakeBin string

// startTimeout bounds how long startLake waits for a process to listen. A
// benchmark that measures a slow start on purpose raises it.
var startTimeout = 30 * time.Second

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lake-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lakeBin = filepath.Join(dir, "lake")
	// Upload checkpoints of the CLI processes stay out of the user's state
	// directory.
	os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	// failpoints: the crash tests arm LAKE_FAILPOINTS in the processes;
	// a release build compiles them out.
	build := exec.Command("go", "build", "-tags", "duckdb_arrow,failpoints", "-o", lakeBin, "..")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build lake:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running lake process whose stderr is kept for failures.
type proc struct {
	t         testing.TB
	cmd       *exec.Cmd
	mu        sync.Mutex
	logs      strings.Builder
	addr      chan string
	address   string
	readyRole string
	roles     map[string]string // role → listen address
	httpAddr  string            // the HTTP listener's address, if any
	done      chan struct{}
}

var listenLine = regexp.MustCompile(`msg="[^"]*listening" role=(\S+) addr=(\S+)`)

// httpLine is the HTTP listener's address, logged before any role's.
var httpLine = regexp.MustCompile(`msg="http listening" http_addr=(\S+)`)

// startLake runs `lake args...` and waits until its last role logs its
// listen address: query for --role=all and --role=query, else meta.
func startLake(t testing.TB, args ...string) *proc {
	t.Helper()
	return startLakeEnv(t, nil, args...)
}

// startLakeEnv is startLake with extra environment (failpoints) for the
// process.
func startLakeEnv(t testing.TB, env []string, args ...string) *proc {
	t.Helper()
	return startLakeHook(t, env, nil, args...)
}

// startLakeHook is startLakeEnv with started, when not nil, called with
// the process id right after the process starts (to put it in a cgroup).
func startLakeHook(t testing.TB, env []string, started func(pid int) error, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, cmd: exec.Command(lakeBin, args...), addr: make(chan string, 1), done: make(chan struct{}),
		readyRole: "query", roles: map[string]string{}}
	if len(env) > 0 {
		p.cmd.Env = append(os.Environ(), env...)
	}
	for _, a := range args {
		if a == "--role=meta" {
			p.readyRole = "meta"
		}
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if started != nil {
		if err := started(p.cmd.Process.Pid); err != nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
			t.Fatal(err)
		}
	}
	go p.scan(stderr)
	t.Cleanup(func() {
		p.kill(syscall.SIGKILL)
		if t.Failed() {
			t.Logf("lake %s logs:\n%s", strings.Join(args, " "), p.output())
		}
	})
	select {
	case p.address = <-p.addr:
	case <-p.done:
		t.Fatalf("lake exited before listening:\n%s", p.output())
	case <-time.After(startTimeout):
		t.Fatalf("lake did not start listening within %v:\n%s", startTimeout, p.output())
	}
	return p
}

func (p *proc) scan(r io.Reader) {
	defer close(p.done)
	sc := bufio.NewScanner(r)
	sent := false
	for sc.Scan() {
		line := sc.Text()
		p.mu.Lock()
		p.logs.WriteString(line + "\n")
		if m := httpLine.FindStringSubmatch(line); m != nil {
			p.httpAddr = m[1]
		}
		p.mu.Unlock()
		if m := listenLine.FindStringSubmatch(line); m != nil && !sent {
			p.mu.Lock()
			p.roles[m[1]] = m[2]
			_, ready := p.roles[p.readyRole]
			p.mu.Unlock()
			if ready {
				p.addr <- p.roles[p.readyRole]
				sent = true
			}
		}
	}
}

// Addr is the listen address of the role the process was started for.
func (p *proc) Addr() string { return p.address }

// RoleAddr is the listen address a role of the process reported.
func (p *proc) RoleAddr(role string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.roles[role]
}

// HTTPAddr is the address of the process's HTTP listener (--http-listen),
// "" without one. It is logged before the roles', so it is known once
// startLake returns.
func (p *proc) HTTPAddr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.httpAddr
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// kill sends sig and waits for the process to exit.
func (p *proc) kill(sig syscall.Signal) {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	_ = p.cmd.Wait()
	<-p.done
}

func withTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
