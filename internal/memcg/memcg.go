package memcg

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrUnavailable: this machine offers no memory cgroup the caller may
// create.
var ErrUnavailable = errors.New("memcg: no writable memory cgroup")

// Group is a memory cgroup with a hard limit.
type Group struct {
	dir string
	v2  bool
}

// New creates a group named name (made unique with the process id) whose
// members together may use at most limit bytes.
func New(name string, limit int64) (*Group, error) {
	name = fmt.Sprintf("%s-%d-%d", name, os.Getpid(), time.Now().UnixNano())
	if fi, err := os.Stat("/sys/fs/cgroup/memory"); err == nil && fi.IsDir() {
		g := &Group{dir: filepath.Join("/sys/fs/cgroup/memory", name)}
		if err := g.create("memory.limit_in_bytes", limit); err == nil {
			return g, nil
		}
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil && strings.Contains(string(b), "memory") {
		g := &Group{dir: filepath.Join("/sys/fs/cgroup", name), v2: true}
		if err := g.create("memory.max", limit); err == nil {
			// No swap: the limit is a limit.
			_ = os.WriteFile(filepath.Join(g.dir, "memory.swap.max"), []byte("0"), 0o644)
			return g, nil
		}
	}
	return nil, ErrUnavailable
}

func (g *Group) create(limitFile string, limit int64) error {
	if err := os.Mkdir(g.dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(g.dir, limitFile), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		os.Remove(g.dir)
		return err
	}
	return nil
}

// Add moves the process pid into the group.
func (g *Group) Add(pid int) error {
	return os.WriteFile(filepath.Join(g.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
}

// Peak is the most memory the group has held, as the kernel counts it.
func (g *Group) Peak() (int64, error) {
	file := "memory.max_usage_in_bytes"
	if g.v2 {
		file = "memory.peak"
	}
	b, err := os.ReadFile(filepath.Join(g.dir, file))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// Close removes the group; its processes must have exited.
func (g *Group) Close() error {
	var err error
	for range 50 { // the kernel frees a group a moment after its last process
		if err = os.Remove(g.dir); err == nil || os.IsNotExist(err) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}
