package e2e

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// untar unpacks the gzipped tar at archive into dir, refusing any entry
// that would land outside it.
func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(h.Name, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			w, err := root.OpenFile(h.Name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(w, tr); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("%s: unexpected entry type %c", h.Name, h.Typeflag)
		}
	}
}

// TestStageOfThePreviousRelease: the data directory an earlier release
// left (testdata/prev-release: its local stage, log checkpoints and
// metadata index; make.sh says how it was made) opens with this one.
// Tables, rows, time travel, reads with their sha256 checked, verify, a
// new put and gc all work; and so they do again after the index is
// dropped and rebuilt from the old stage alone.
func TestStageOfThePreviousRelease(t *testing.T) {
	dir := t.TempDir()
	untar(t, filepath.Join("testdata", "prev-release", "data.tar.gz"), dir)
	data := filepath.Join(dir, "data")
	serve := func() *proc {
		return startLake(t, "serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0", "--http-listen", "", "--data-dir", data)
	}

	check := func(endpoint, when string) {
		t.Helper()
		if out := runLake(t, endpoint, "table", "ls"); !strings.Contains(out, "clips") || !strings.Contains(out, "frames") {
			t.Fatalf("%s: table ls:\n%s", when, out)
		}
		if out := runLake(t, endpoint, "sql", "SELECT string_agg(name, ' ' ORDER BY name) AS names FROM clips", "--format", "csv"); !strings.Contains(out, "a.txt b.bin d.txt") {
			t.Fatalf("%s: the rows of clips:\n%s", when, out)
		}
		if out := runLake(t, endpoint, "sql", "SELECT count(*) AS n FROM clips AT (VERSION => 3) WHERE name = 'c.json'", "--format", "csv"); !strings.Contains(out, "\n1") {
			t.Fatalf("%s: the deleted row at version 3:\n%s", when, out)
		}
		if out := runLake(t, endpoint, "sql", "SELECT count(*) AS n FROM frames", "--format", "csv"); !strings.Contains(out, "\n5") {
			t.Fatalf("%s: the rows of frames:\n%s", when, out)
		}
		row := strings.Split(strings.TrimSpace(runLake(t, endpoint, "sql", "SELECT file.key AS k, file.sha256 AS s FROM clips WHERE name = 'b.bin'", "--format", "csv")), "\n")
		key, sum, _ := strings.Cut(row[len(row)-1], ",")
		got := filepath.Join(t.TempDir(), "b.bin")
		runLake(t, endpoint, "get", "--table", "clips", "--key", key, "-o", got)
		b, err := os.ReadFile(got)
		if err != nil {
			t.Fatal(err)
		}
		if s := sha256.Sum256(b); hex.EncodeToString(s[:]) != sum {
			t.Fatalf("%s: b.bin read back does not match its row's sha256", when)
		}
		runLake(t, endpoint, "verify", "--table", "clips", "--all")
	}

	p := serve()
	endpoint := "grpc://" + p.Addr()
	check(endpoint, "opened")
	file := writeFile(t, dir, "e.txt")
	runLake(t, endpoint, "put", file, "--table", "clips", "--no-progress", "--checkpoint-dir", filepath.Join(dir, "cp"))
	if out := runLake(t, endpoint, "table", "describe", "clips"); !strings.Contains(out, "version     6\n") {
		t.Fatalf("after a put into the old table:\n%s", out)
	}
	runLake(t, endpoint, "gc", "--grace", "0s")
	check(endpoint, "after gc")
	p.kill(syscall.SIGTERM)

	// The index is derived state: rebuilt from the old stage, it agrees.
	if err := os.Remove(filepath.Join(data, "meta.db")); err != nil {
		t.Fatal(err)
	}
	p = serve()
	check("grpc://"+p.Addr(), "index rebuilt")
}
