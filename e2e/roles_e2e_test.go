package e2e

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/lakedata/lake/wire"
)

// runLake runs a CLI command of the built binary and returns its stdout.
func runLake(t *testing.T, endpoint string, args ...string) string {
	t.Helper()
	cmd := exec.Command(lakeBin, append(args, "--endpoint", endpoint)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("lake %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// TestRolesAsProcessesEndToEnd: meta and query as separate processes; the
// CLI creates a table, puts files and queries them; a third-party Flight
// SQL client sees the FILE struct of DESIGN §4; the object read straight
// from the stage matches the row's sha256.
func TestRolesAsProcessesEndToEnd(t *testing.T) {
	dir := t.TempDir()
	stageDir := filepath.Join(dir, "stage")
	m := startLake(t, "serve", "--role=meta", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "meta"), "--stage", "file://"+stageDir)
	q := startLake(t, "serve", "--role=query", "--listen", "127.0.0.1:0", "--meta", m.Addr(), "--data-dir", filepath.Join(dir, "query"))
	endpoint := "grpc://" + q.Addr()

	runLake(t, endpoint, "table", "create", "clips")
	var paths []string
	contents := map[string][]byte{}
	for _, name := range []string{"a.mp4", "b.safetensors", "c.bin"} {
		p := filepath.Join(dir, name)
		data := make([]byte, 100_000+len(name))
		rand.Read(data)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
		contents[name] = data
	}
	out := runLake(t, endpoint, append([]string{"put", "--table", "clips", "--json"}, paths...)...)
	type putLine struct {
		Path, Key, SHA256 string
		Size, Version     int64
	}
	put := map[string]putLine{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var l putLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("put --json line %q: %v", sc.Text(), err)
		}
		put[filepath.Base(l.Path)] = l
	}
	if len(put) != 3 {
		t.Fatalf("put printed %d files:\n%s", len(put), out)
	}

	// lake sql sees them.
	out = runLake(t, endpoint, "sql", "SELECT name, file.sha256 AS sha FROM clips ORDER BY name", "--format", "json")
	var rows []map[string]any
	sc = bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("sql json line %q: %v", sc.Text(), err)
		}
		rows = append(rows, r)
	}
	if len(rows) != 3 || rows[0]["name"] != "a.mp4" || rows[0]["sha"] != put["a.mp4"].SHA256 {
		t.Fatalf("lake sql rows: %v", rows)
	}

	// A third-party Flight SQL client, no lake code.
	ctx := withTimeout(t, time.Minute)
	fsc, err := flightsql.NewClient(q.Addr(), nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer fsc.Close()
	info, err := fsc.Execute(ctx, "SELECT name, file FROM clips ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := fsc.DoGet(ctx, info.Endpoint[0].Ticket)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	f := rdr.Schema().Field(1)
	if !arrow.TypeEqual(f.Type, wire.FileType()) || !wire.IsFileField(f) {
		t.Fatalf("third-party client got file column %v", f)
	}
	var values []wire.FileValue
	for rdr.Next() {
		vs, _, err := wire.FileValues(rdr.RecordBatch().Column(1))
		if err != nil {
			t.Fatal(err)
		}
		values = append(values, vs...)
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	if len(values) != 3 {
		t.Fatalf("%d FILE values", len(values))
	}
	// Straight from the stage: the bytes match the row.
	for i, name := range []string{"a.mp4", "b.safetensors", "c.bin"} {
		v := values[i]
		raw, err := os.ReadFile(filepath.Join(stageDir, filepath.FromSlash(v.Key)))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(raw)
		if hex.EncodeToString(sum[:]) != v.SHA256 || !bytes.Equal(raw, contents[name]) || v.Size != int64(len(raw)) || v.Key != put[name].Key {
			t.Errorf("%s: the stage object does not match its row %+v", name, v)
		}
	}

	// lake get writes the same bytes.
	outPath := filepath.Join(dir, "got.bin")
	runLake(t, endpoint, "get", "--table", "clips", "--key", put["b.safetensors"].Key, "-o", outPath)
	got, err := os.ReadFile(outPath)
	if err != nil || !bytes.Equal(got, contents["b.safetensors"]) {
		t.Fatalf("lake get: %v, %d bytes", err, len(got))
	}
}

// TestEmbeddedDefaultServes: `lake serve` with no flags but --data-dir is
// the embedded default; put and sql work against it.
func TestEmbeddedDefaultServes(t *testing.T) {
	dir := t.TempDir()
	p := startLake(t, "serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "lake-data"))
	endpoint := "grpc://" + p.Addr()
	runLake(t, endpoint, "table", "create", "clips")
	file := filepath.Join(dir, "hello.txt")
	if err := os.WriteFile(file, []byte("hello lake"), 0o644); err != nil {
		t.Fatal(err)
	}
	runLake(t, endpoint, "put", file, "--table", "clips")
	out := runLake(t, endpoint, "sql", "SELECT count(*) AS n FROM clips", "--format", "csv")
	if !strings.Contains(out, "\n1") {
		t.Fatalf("count after one put:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "lake-data", "stage", "_lake")); err != nil {
		t.Fatalf("stage not under <data-dir>/stage: %v", err)
	}
}
