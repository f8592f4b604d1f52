package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIVerify: one summary line and no error for a healthy table; the
// truncated object's row and key and "size differs", and errMismatch (exit
// status 1), once the stage loses bytes; the same as JSON.
func TestCLIVerify(t *testing.T) {
	f := newCLIFixture(t)
	f.mustRun("table", "create", "clips")
	dir := t.TempDir()
	var paths []string
	for _, name := range []string{"a.bin", "b.bin"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, bytes.Repeat([]byte(name), 1000), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	out := f.mustRun(append([]string{"put", "--table", "clips", "--json", "--no-progress"}, paths...)...)
	var keys []string
	for _, l := range lines(out) {
		var p struct{ Key string }
		if err := json.Unmarshal([]byte(l), &p); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, p.Key)
	}

	out = f.mustRun("verify", "--table", "clips")
	if ls := lines(out); len(ls) != 1 || !strings.Contains(out, "2 objects") || !strings.Contains(out, "all match") {
		t.Fatalf("healthy table: %q, want one summary line", out)
	}

	if err := os.Truncate(filepath.Join(f.stageDir, filepath.FromSlash(keys[1])), 10); err != nil {
		t.Fatal(err)
	}
	out, err := f.run("", "verify", "--table", "clips")
	if !errors.Is(err, errMismatch) {
		t.Fatalf("verify of a truncated object: %v, want errMismatch", err)
	}
	if !strings.Contains(out, "b.bin") || !strings.Contains(out, keys[1]) || !strings.Contains(out, "size differs") || strings.Contains(out, keys[0]) {
		t.Errorf("report:\n%s", out)
	}

	out, err = f.run("", "verify", "--table", "clips", "--json", "--all")
	if !errors.Is(err, errMismatch) {
		t.Fatalf("--json: %v, want errMismatch", err)
	}
	var rep verifyReportJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json output %q: %v", out, err)
	}
	if rep.OK || rep.Objects != 2 || !rep.AllVersions || len(rep.Mismatches) != 1 {
		t.Fatalf("--json report %+v", rep)
	}
	if m := rep.Mismatches[0]; m.Key != keys[1] || m.Problem != "size_differs" || m.Name == nil || *m.Name != "b.bin" || m.ActualSize == nil || *m.ActualSize != 10 {
		t.Errorf("--json mismatch %+v", m)
	}

	if _, err := f.run("", "verify", "--table", "nope"); err == nil || errors.Is(err, errMismatch) {
		t.Errorf("unknown table: %v", err)
	}
}

func TestParseByteRate(t *testing.T) {
	for in, want := range map[string]byteRate{
		"0": 0, "64MiB": 64 << 20, "64 MiB/s": 64 << 20, "1.5GiB": 3 << 29, "100MB": 100e6, "512": 512,
		"2KiB": 2048, "1TB": 1e12, "7B": 7,
	} {
		got, err := parseByteRate(in)
		if err != nil || got != want {
			t.Errorf("parseByteRate(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "-1MiB", "fast", "1e3", "0x10", "NaN", "Inf", "64Mib", "1_000", "9999999TiB"} {
		if got, err := parseByteRate(in); err == nil {
			t.Errorf("parseByteRate(%q) = %d, want an error", in, got)
		}
	}
	r := byteRate(64 << 20)
	if r.String() != "64MiB" {
		t.Errorf("String of 64 MiB/s: %q", r.String())
	}
}

// FuzzParseByteRate: any text parses to a non-negative rate or an error,
// and a rate written back parses to itself.
func FuzzParseByteRate(f *testing.F) {
	for _, s := range []string{"0", "64MiB", "1.5GiB/s", "100 MB", "-3", "1e9", "NaN", "9223372036854775807", "0.0000001KiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := parseByteRate(s)
		if err != nil {
			return
		}
		if r < 0 {
			t.Fatalf("parseByteRate(%q) = %d", s, r)
		}
		back := r.String()
		r2, err := parseByteRate(back)
		if err != nil || r2 != r {
			t.Fatalf("%q → %d → %q → %d, %v", s, r, back, r2, err)
		}
	})
}
