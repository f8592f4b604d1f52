package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakedata/lake/client"
)

// writeDir writes n files (some in a subdirectory) under a new directory.
func writeDir(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	for i := range n {
		sub := dir
		if i%2 == 1 {
			sub = filepath.Join(dir, "odd")
		}
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%02d.txt", i)), []byte(strings.Repeat("x", i+1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// lake put -r puts every file under a directory, batch by batch, lists
// each row, ends with a summary and leaves no run checkpoint.
func TestCLIPutRecursive(t *testing.T) {
	f := newCLIFixture(t)
	f.mustRun("table", "create", "docs")
	dir := writeDir(t, 7)
	root := newRootCommand()
	var out, errOut strings.Builder
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs([]string{"put", "-r", dir, "--table", "docs", "--batch-rows", "3", "--json", "--endpoint", f.endpoint, "--log-level", "warn"})
	if err := root.Execute(); err != nil {
		t.Fatalf("put -r: %v\n%s", err, errOut.String())
	}
	versions := map[int64]int{}
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		var l putLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		versions[l.Version]++
		if l.Table != "docs" || !strings.HasPrefix(l.Path, dir) {
			t.Errorf("line %+v", l)
		}
	}
	if len(versions) != 3 || versions[1] != 3 || versions[2] != 3 || versions[3] != 1 {
		t.Errorf("rows per version %v, want 3, 3, 1", versions)
	}
	if s := errOut.String(); !strings.Contains(s, "put 7 files into docs in 3 versions") || !strings.Contains(s, "7/7 files") {
		t.Errorf("stderr:\n%s", s)
	}
	if desc := f.mustRun("table", "describe", "docs"); !strings.Contains(desc, "rows        7") {
		t.Errorf("describe:\n%s", desc)
	}
	runs, _ := filepath.Glob(filepath.Join(os.Getenv("XDG_STATE_HOME"), "lake", "uploads", "*.run"))
	if len(runs) != 0 {
		t.Errorf("run checkpoints left: %v", runs)
	}
}

// Bad input is a usage error (exit status 2) and uploads nothing: a
// directory without -r (the message says to add it), a missing path,
// --jobs 0, a batch bound of 0, standard input among other paths.
func TestCLIPutManyRefusesBadInput(t *testing.T) {
	f := newCLIFixture(t)
	f.mustRun("table", "create", "docs")
	dir := writeDir(t, 3)
	file := writeTemp(t, "a.txt", "a")
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"directory without -r", []string{dir}, "add -r"},
		{"missing path", []string{"-r", dir, filepath.Join(dir, "missing")}, "no such file"},
		{"jobs 0", []string{"-r", dir, "--jobs", "0"}, "--jobs 0"},
		{"batch rows 0", []string{"-r", dir, "--batch-rows", "0"}, "--batch-rows 0"},
		{"batch wait 0", []string{"-r", dir, "--batch-wait", "0s"}, "--batch-wait"},
		{"stdin among paths", []string{"-", file, "--name", "x"}, "alone"},
		{"stdin with -r", []string{"-", "-r", "--name", "x"}, "alone"},
		{"name with a directory", []string{dir, "-r", "--name", "x"}, "--name"},
	} {
		_, err := f.run("", append([]string{"put", "--table", "docs"}, tt.args...)...)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want a usage error saying %q", tt.name, err, tt.want)
		}
	}
	if n := f.objectCount(); n != 0 {
		t.Errorf("%d objects uploaded by refused puts", n)
	}
}

// removeOnWrite removes a file the first time it is written to: given as
// the progress output, it makes the file vanish once the run has started
// (the first progress line is drawn before the first upload).
type removeOnWrite struct {
	path string
	once sync.Once
	buf  strings.Builder
}

func (w *removeOnWrite) Write(b []byte) (int, error) {
	w.once.Do(func() { os.Remove(w.path) })
	return w.buf.Write(b)
}

// A file that vanishes during the run is reported on stderr and in --json
// output; the others commit, and the error is one of exit status 1.
func TestCLIPutManyReportsAVanishedFile(t *testing.T) {
	f := newCLIFixture(t)
	f.mustRun("table", "create", "docs")
	dir := writeDir(t, 4)
	gone := filepath.Join(dir, "odd", "f01.txt")
	c, err := client.Connect(context.Background(), f.endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	o := &putOptions{table: "docs", json: true, recursive: true, jobs: 2, batchRows: 10, batchWait: time.Second,
		progressOut: &removeOnWrite{path: gone}}
	var out, errOut strings.Builder
	err = runPutFiles(context.Background(), c, o, nil, []string{dir}, &out, &errOut)
	if !errors.Is(err, client.ErrFilesFailed) || errors.Is(err, errUsage) {
		t.Fatalf("err = %v, want ErrFilesFailed (exit status 1)", err)
	}
	if !strings.Contains(errOut.String(), "lake: "+gone+": ") || !strings.Contains(errOut.String(), "1 failed") {
		t.Errorf("stderr:\n%s", errOut.String())
	}
	var failed, committed int
	for _, l := range lines(out.String()) {
		var got struct{ Path, Error, Key string }
		if err := json.Unmarshal([]byte(l), &got); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		switch {
		case got.Path == gone && got.Error != "":
			failed++
		case got.Key != "" && got.Error == "":
			committed++
		default:
			t.Errorf("line %q", l)
		}
	}
	if failed != 1 || committed != 3 {
		t.Errorf("%d failed and %d committed lines, want 1 and 3:\n%s", failed, committed, out.String())
	}
	if desc := f.mustRun("table", "describe", "docs"); !strings.Contains(desc, "rows        3") {
		t.Errorf("describe:\n%s", desc)
	}
}
