package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/wire"
)

// `lake table describe --version N` shows that version's rows and data
// files; `lake get --version N` finds a row in that version only.
func TestCLITimeTravel(t *testing.T) {
	f := newCLIFixture(t)
	f.mustRun("table", "create", "videos")
	var keys []string
	for _, name := range []string{"a.txt", "b.txt"} {
		var put struct{ Key string }
		if err := json.Unmarshal([]byte(f.mustRun("put", writeTemp(t, name, "content of "+name), "--table", "videos", "--json")), &put); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, put.Key)
	}

	out := f.mustRun("table", "describe", "videos", "--version", "1")
	for _, want := range []string{"version     1\n", "rows        1\n", "data files  1\n", "committed", "COLUMN", "DATA FILE"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe --version 1 lacks %q:\n%s", want, out)
		}
	}
	if out := f.mustRun("table", "describe", "videos", "--version", "0"); !strings.Contains(out, "rows        0\n") || strings.Contains(out, "DATA FILE") {
		t.Errorf("describe --version 0:\n%s", out)
	}
	if _, err := f.run("", "table", "describe", "videos", "--version", "9"); !errors.Is(err, wire.ErrVersionNotFound) {
		t.Errorf("describe --version 9: %v", err)
	}
	if _, err := f.run("", "table", "describe", "videos", "--version", "-1"); !errors.Is(err, errUsage) {
		t.Errorf("describe --version -1: %v", err)
	}

	dst := filepath.Join(t.TempDir(), "a.out")
	f.mustRun("get", "--table", "videos", "--key", keys[0], "--version", "1", "-o", dst)
	if got, err := os.ReadFile(dst); err != nil || string(got) != "content of a.txt" {
		t.Errorf("get --version 1 wrote %q (%v)", got, err)
	}
	if _, err := f.run("", "get", "--table", "videos", "--key", keys[1], "--version", "1", "-o", dst); !errors.Is(err, client.ErrFileNotFound) {
		t.Errorf("get of a row added at version 2, at version 1: %v", err)
	}
	if _, err := f.run("", "get", "--table", "videos", "--key", keys[1], "--version", "7", "-o", dst); !errors.Is(err, wire.ErrVersionNotFound) {
		t.Errorf("get at version 7: %v", err)
	}
	if got, _ := os.ReadFile(dst); string(got) != "content of a.txt" {
		t.Errorf("a failed get changed OUT to %q", got)
	}
}
