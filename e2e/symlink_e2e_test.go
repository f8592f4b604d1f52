package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/wire"
)

// lakeOut runs a CLI command of the built binary against endpoint and
// returns stdout and stderr apart, and its error: the caller wants to see
// a failure, and that it printed nothing.
func lakeOut(t *testing.T, endpoint string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(lakeBin, append(args, "--endpoint", endpoint)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// fileValueOf is the FILE value a client would send for the bytes at p
// under key: the right size and SHA-256, so only the stage's own check can
// refuse it.
func fileValueOf(t *testing.T, key, p string) wire.FileValue {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return wire.FileValue{Key: key, Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:])}
}

// TestStageLinksRefusedEndToEnd: symbolic links planted under a local
// stage's objects/ — to the table's catalog record, to a file outside the
// stage, through a linked directory — are refused as FILE values with
// FailedPrecondition, commit nothing, and are not served by lake get, not
// even when they replace an object a row already names. Puts keep working.
func TestStageLinksRefusedEndToEnd(t *testing.T) {
	dir := t.TempDir()
	stageDir := filepath.Join(dir, "stage")
	p := startLake(t, "serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0",
		"--data-dir", filepath.Join(dir, "data"), "--stage", "file://"+stageDir)
	endpoint := "grpc://" + p.Addr()
	runLake(t, endpoint, "table", "create", "clips")

	catalogs, err := filepath.Glob(filepath.Join(stageDir, "_lake", "catalog", "*.json"))
	if err != nil || len(catalogs) != 1 {
		t.Fatalf("catalog records in the stage: %q, %v", catalogs, err)
	}
	catalog := catalogs[0]
	catalogName := filepath.Base(catalog)
	catalogBefore, err := os.ReadFile(catalog)
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(dir, "outside", "secret.bin")
	if err := os.MkdirAll(filepath.Dir(outside), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(outside, []byte("not in the stage, not for the lake"), 0o600); err != nil {
		t.Fatal(err)
	}

	// What anyone who can upload to the stage can also do.
	plant := func(rel, target string) {
		t.Helper()
		at := filepath.Join(stageDir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, at); err != nil {
			t.Fatal(err)
		}
	}
	plant("objects/2026/aa/"+catalogName, "../../../_lake/catalog/"+catalogName)
	plant("objects/2026/ab/secret.bin", outside)
	plant("objects/2026/ac", "../_lake") // objects/2026/ac/catalog/<t>.json is the record
	attempts := []wire.FileValue{
		fileValueOf(t, "objects/2026/aa/"+catalogName, catalog),
		fileValueOf(t, "objects/2026/ab/secret.bin", outside),
		fileValueOf(t, "objects/2026/ac/catalog/"+catalogName, catalog),
	}

	ctx := withTimeout(t, 2*time.Minute)
	c, err := client.Connect(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, v := range attempts {
		rec := wiretest.FileRow("planted", v)
		res, err := c.Append(ctx, "clips", rec, client.AppendOptions{})
		rec.Release()
		switch code := status.Code(err); {
		case err == nil:
			t.Errorf("append of %s (%d bytes) committed version %d, want FailedPrecondition", v.Key, v.Size, res.GetVersion())
		case code != codes.FailedPrecondition || !strings.Contains(err.Error(), "not a regular file"):
			t.Errorf("append of %s: %v (code %v), want FailedPrecondition: not a regular file", v.Key, err, code)
		}
		// No row names it, so lake get has nothing to serve.
		out, stderr, err := lakeOut(t, endpoint, "get", "--table", "clips", "--key", v.Key, "-o", "-")
		if err == nil || out != "" {
			t.Errorf("lake get %s: err %v, stdout %q, want a refusal and nothing printed\n%s", v.Key, err, out, stderr)
		}
	}
	info, err := c.Describe(ctx, "clips")
	if err != nil {
		t.Fatal(err)
	}
	if info.GetVersion() != 0 {
		t.Errorf("after the refused appends the table is at version %d, want 0", info.GetVersion())
	}

	// A row that names a real object whose file is then replaced by a
	// link: lake get must not read what the link points at.
	src := filepath.Join(dir, "real.bin")
	data := []byte("a real upload, replaced later by a link")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var put struct {
		Key     string
		Version int64
	}
	if err := json.Unmarshal([]byte(runLake(t, endpoint, "put", "--table", "clips", "--json", src)), &put); err != nil || put.Key == "" {
		t.Fatalf("put --json: %+v, %v", put, err)
	}
	obj := filepath.Join(stageDir, filepath.FromSlash(put.Key))
	if err := os.Remove(obj); err != nil {
		t.Fatal(err)
	}
	// Relative, so the link stays inside the stage.
	rel, err := filepath.Rel(filepath.Dir(obj), catalog)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(rel, obj); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := lakeOut(t, endpoint, "get", "--table", "clips", "--key", put.Key, "-o", "-")
	if err == nil || out != "" || !strings.Contains(stderr, "not a regular file") {
		t.Errorf("lake get of a row whose object became a link: err %v, stdout %q, stderr %q; want a refusal and nothing printed", err, out, stderr)
	}

	// Normal puts and gets still work.
	src2 := filepath.Join(dir, "after.bin")
	data2 := []byte("uploaded after the refusals")
	if err := os.WriteFile(src2, data2, 0o644); err != nil {
		t.Fatal(err)
	}
	var put2 struct {
		Key     string
		Version int64
	}
	if err := json.Unmarshal([]byte(runLake(t, endpoint, "put", "--table", "clips", "--json", src2)), &put2); err != nil || put2.Version != put.Version+1 {
		t.Fatalf("put after the refusals: %+v, %v; want version %d", put2, err, put.Version+1)
	}
	got := filepath.Join(dir, "got.bin")
	runLake(t, endpoint, "get", "--table", "clips", "--key", put2.Key, "-o", got)
	if b, err := os.ReadFile(got); err != nil || !bytes.Equal(b, data2) {
		t.Fatalf("lake get after the refusals: %q, %v", b, err)
	}
	if b, err := os.ReadFile(catalog); err != nil || !bytes.Equal(b, catalogBefore) {
		t.Fatalf("the catalog record changed: %q, %v", b, err)
	}
}
