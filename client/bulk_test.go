package client

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lakedata/lake/objects/checkpoint"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// writeTree writes n small files of random bytes under dir, some in a
// subdirectory, and returns their paths by base name.
func writeTree(t *testing.T, dir string, n int) map[string]string {
	t.Helper()
	out := make(map[string]string, n)
	for i := range n {
		sub := dir
		if i%3 == 0 {
			sub = filepath.Join(dir, "sub")
		}
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1000+i)
		rand.Read(b)
		name := fmt.Sprintf("f%03d.jpg", i)
		p := filepath.Join(sub, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		out[name] = p
	}
	return out
}

// runFiles lists the run checkpoints in a client's checkpoint dir.
func runFiles(t *testing.T, c *Client) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(c.checkpointDir, "*"+checkpoint.RunSuffix))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// PutFiles of a directory tree commits one row per file in batches of at
// most BatchRows, reports each file once, and removes its run checkpoint.
func TestPutFilesCommitsInBatches(t *testing.T) {
	f := newFixture(t, nil)
	c := f.connect()
	if _, err := c.CreateTable(ctx, "t", nil, false); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := writeTree(t, dir, 10)
	var mu sync.Mutex
	seen := map[string]FileResult{}
	var last BulkProgress
	res, err := c.PutFiles(ctx, "t", []string{dir}, PutFilesOptions{
		Recursive: true, Jobs: 3, BatchRows: 4, BatchWait: time.Minute,
		OnFile: func(r FileResult) {
			mu.Lock()
			defer mu.Unlock()
			if _, dup := seen[r.Path]; dup {
				t.Errorf("%s reported twice", r.Path)
			}
			seen[r.Path] = r
		},
		Progress: func(p BulkProgress) { last = p },
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Committed != 10 || res.Failed != 0 || res.Skipped != 0 || res.Batches != 3 || len(res.Files) != 10 {
		t.Fatalf("result: committed %d failed %d skipped %d batches %d files %d", res.Committed, res.Failed, res.Skipped, res.Batches, len(res.Files))
	}
	for name, p := range files {
		r, ok := seen[p]
		if !ok || r.Err != nil || r.File.SHA256 != sha(mustRead(t, p)) || !strings.HasSuffix(r.File.Key, name) || r.File.ContentType != "image/jpeg" {
			t.Errorf("%s: %+v", p, r)
		}
	}
	info, err := c.Describe(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if info.GetRows() != 10 || info.GetVersion() != 3 {
		t.Errorf("table: %d rows at version %d, want 10 at 3", info.GetRows(), info.GetVersion())
	}
	if last.FilesDone != 10 || last.FilesTotal != 10 || last.Bytes != last.BytesTotal || last.BytesTotal == 0 {
		t.Errorf("last progress %+v", last)
	}
	if n := len(f.objectFiles()); n != 10 {
		t.Errorf("%d objects in the stage, want 10", n)
	}
	if m := runFiles(t, c); len(m) != 0 {
		t.Errorf("run checkpoint left after success: %v", m)
	}
}

// A batch's rows are the rows a single put makes: name, --set values and
// created_at, the FILE value around the upload.
func TestBatchRowsAreSinglePutRows(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		wire.FileField("file", true),
		{Name: "camera", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "created_at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	}, nil)
	plan, err := planRow(schema, "", map[string]string{"camera": "north"})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	rows := []fileRow{{name: "a.jpg", at: at}, {name: "b.jpg", at: at.Add(time.Second)}}
	rows[0].file.Key, rows[1].file.Key = "objects/a/a.jpg", "objects/b/b.jpg"
	rec, err := plan.records(rows)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	one, err := (&rowPlan{schema: plan.schema, fileCol: plan.fileCol, createdCol: plan.createdCol, nameCol: plan.nameCol, name: "b.jpg", cells: plan.cells}).record(rows[1].file, rows[1].at)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Release()
	if rec.NumRows() != 2 {
		t.Fatalf("%d rows", rec.NumRows())
	}
	names := rec.Column(0).(*array.String)
	cams := rec.Column(2).(*array.String)
	if names.Value(0) != "a.jpg" || names.Value(1) != "b.jpg" || cams.Value(0) != "north" || cams.Value(1) != "north" {
		t.Errorf("rows %v", rec)
	}
	if !array.RecordEqual(rec.NewSlice(1, 2), one) {
		t.Errorf("the batch's second row differs from a single put's:\n%v\n%v", rec.NewSlice(1, 2), one)
	}
}

// A file that vanishes during the run is reported, the others commit, the
// call fails with ErrFilesFailed and keeps its run checkpoint; the same
// call again puts only that file.
func TestPutFilesReportsAVanishedFile(t *testing.T) {
	f := newFixture(t, nil)
	dir := t.TempDir()
	files := writeTree(t, dir, 6)
	gone := files["f004.jpg"]
	content := mustRead(t, gone)
	hs := &hookStore{hook: func(key string) {
		if strings.HasSuffix(key, "f004.jpg") {
			os.Remove(gone)
		}
	}}
	c := connectHooked(t, f, hs)
	if _, err := c.CreateTable(ctx, "t", nil, false); err != nil {
		t.Fatal(err)
	}
	res, err := c.PutFiles(ctx, "t", []string{dir}, PutFilesOptions{Recursive: true, BatchRows: 2})
	if !errors.Is(err, ErrFilesFailed) {
		t.Fatalf("err = %v, want ErrFilesFailed", err)
	}
	if res.Committed != 5 || res.Failed != 1 {
		t.Fatalf("committed %d failed %d", res.Committed, res.Failed)
	}
	for _, r := range res.Files {
		if (r.Err != nil) != (r.Path == gone) {
			t.Errorf("%s: err %v", r.Path, r.Err)
		}
		if r.Path == gone && !errors.Is(r.Err, fs.ErrNotExist) {
			t.Errorf("the vanished file's error: %v", r.Err)
		}
	}
	if m := runFiles(t, c); len(m) != 1 {
		t.Fatalf("run checkpoints after a failed file: %v", m)
	}

	hs.hook = nil
	if err := os.WriteFile(gone, content, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = c.PutFiles(ctx, "t", []string{dir}, PutFilesOptions{Recursive: true, BatchRows: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Committed != 1 || res.Skipped != 5 {
		t.Fatalf("second run: committed %d skipped %d", res.Committed, res.Skipped)
	}
	if info, _ := c.Describe(ctx, "t"); info.GetRows() != 6 {
		t.Errorf("%d rows, want 6", info.GetRows())
	}
	if m := runFiles(t, c); len(m) != 0 {
		t.Errorf("run checkpoint left after success: %v", m)
	}
}

// A batch left pending by a killed run is resent with its commit id and
// rows: once when its append never arrived, and answered duplicate when
// it had committed. Either way each file is one row.
func TestPutFilesResendsPendingBatches(t *testing.T) {
	for _, committed := range []bool{false, true} {
		t.Run(fmt.Sprintf("append committed %v", committed), func(t *testing.T) {
			f := newFixture(t, nil)
			c := f.connect()
			if _, err := c.CreateTable(ctx, "t", nil, false); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			files := writeTree(t, dir, 4)
			args := []string{dir}
			o := PutFilesOptions{Recursive: true}

			// What a run killed right after saving its first batch leaves:
			// two objects uploaded, their rows pending under one commit id.
			b := &bulk{c: c, table: "t", o: o, res: &PutFilesResult{}}
			schema, err := c.schema(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			if b.plan, err = planRow(schema, "", nil); err != nil {
				t.Fatal(err)
			}
			if err := b.openRun(args); err != nil {
				t.Fatal(err)
			}
			var batch []uploaded
			for _, name := range []string{"f001.jpg", "f002.jpg"} {
				abs, _ := canonicalPath(files[name])
				u := b.upload(ctx, bulkFile{path: files[name], abs: abs, name: name, size: 1})
				if u.err != nil {
					t.Fatal(u.err)
				}
				batch = append(batch, u)
			}
			rb := checkpoint.RunBatch{CommitID: "pending-1"}
			for _, u := range batch {
				rb.Files = append(rb.Files, u.row)
			}
			b.run.Pending = append(b.run.Pending, rb)
			if err := b.save(); err != nil {
				t.Fatal(err)
			}
			if committed { // the append arrived; its acknowledgement did not
				if err := b.commit(ctx, rb, nil); err != nil {
					t.Fatal(err)
				}
				b.run.Pending, b.run.Committed = []checkpoint.RunBatch{rb}, nil
				if err := b.save(); err != nil {
					t.Fatal(err)
				}
			}
			b.closeRun()

			res, err := c.PutFiles(ctx, "t", args, o)
			if err != nil {
				t.Fatal(err)
			}
			if res.Committed != 4 || res.Batches != 2 {
				t.Fatalf("committed %d in %d batches, want 4 in 2", res.Committed, res.Batches)
			}
			for _, r := range res.Files {
				resent := strings.HasSuffix(r.Path, "f001.jpg") || strings.HasSuffix(r.Path, "f002.jpg")
				if r.Duplicate != (resent && committed) {
					t.Errorf("%s: duplicate %v", r.Path, r.Duplicate)
				}
			}
			info, err := c.Describe(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			if info.GetRows() != 4 {
				t.Errorf("%d rows, want 4", info.GetRows())
			}
			if n := len(f.objectFiles()); n != 4 {
				t.Errorf("%d objects, want 4: a pending file was uploaded again", n)
			}
		})
	}
}

// Bad arguments and options fail before anything is uploaded; so do a
// corrupt run checkpoint (with an error naming it), one of another table,
// and the same run already going on.
func TestPutFilesRefuses(t *testing.T) {
	f := newFixture(t, nil)
	c := f.connect()
	if _, err := c.CreateTable(ctx, "t", nil, false); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeTree(t, dir, 3)
	for _, tt := range []struct {
		name  string
		paths []string
		o     PutFilesOptions
		want  error
	}{
		{"directory without Recursive", []string{dir}, PutFilesOptions{}, ErrIsDirectory},
		{"missing path", []string{filepath.Join(dir, "nope")}, PutFilesOptions{Recursive: true}, fs.ErrNotExist},
		{"negative jobs", []string{dir}, PutFilesOptions{Recursive: true, Jobs: -1}, ErrBadOptions},
		{"unknown column", []string{dir}, PutFilesOptions{Recursive: true, Set: map[string]string{"nope": "1"}}, ErrUnknownColumn},
	} {
		if _, err := c.PutFiles(ctx, "t", tt.paths, tt.o); !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}

	o := PutFilesOptions{Recursive: true}
	cp := c.runCheckpointPath("t", []string{dir}, o)
	if err := os.MkdirAll(filepath.Dir(cp), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cp, []byte(`{"version": 1, "stage_id": 7}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutFiles(ctx, "t", []string{dir}, o); !errors.Is(err, checkpoint.ErrCorrupt) || !strings.Contains(err.Error(), cp) {
		t.Errorf("corrupt run checkpoint: %v", err)
	}

	other := &checkpoint.Run{Version: checkpoint.RunVersion, StageID: checkpoint.StageID(c.stage.GetRootUri()), Table: "clips"}
	sess, err := checkpoint.OpenRun(cp)
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Save(other); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutFiles(ctx, "t", []string{dir}, o); !errors.Is(err, checkpoint.ErrInProgress) {
		t.Errorf("run in progress: %v", err)
	}
	sess.Close()
	if _, err := c.PutFiles(ctx, "t", []string{dir}, o); !errors.Is(err, checkpoint.ErrRunMismatch) {
		t.Errorf("run checkpoint of another table: %v", err)
	}
	other.Table, other.StageID = "t", checkpoint.StageID("s3://elsewhere/lake")
	sess, _ = checkpoint.OpenRun(cp)
	if err := sess.Save(other); err != nil {
		t.Fatal(err)
	}
	sess.Close()
	if _, err := c.PutFiles(ctx, "t", []string{dir}, o); !errors.Is(err, checkpoint.ErrRunMismatch) {
		t.Errorf("run checkpoint of another stage: %v", err)
	}
	if n := len(f.objectFiles()); n != 0 {
		t.Errorf("%d objects uploaded by refused runs", n)
	}
	info, err := c.Describe(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if info.GetRows() != 0 {
		t.Errorf("%d rows committed by refused runs", info.GetRows())
	}
}

// The run checkpoint's name depends on what the command puts, not on how
// its paths are spelt or ordered.
func TestRunCheckpointNames(t *testing.T) {
	c := &Client{checkpointDir: "/state", stage: &lakepb.StageDescriptor{RootUri: "file:///srv/stage"}}
	a, b := "/data/a", "/data/b"
	base := c.runCheckpointPath("t", []string{a, b}, PutFilesOptions{})
	if got := c.runCheckpointPath("t", []string{b, a, a + "/."}, PutFilesOptions{}); got != base {
		t.Errorf("reordered, repeated paths: %s != %s", got, base)
	}
	for name, other := range map[string]string{
		"table":     c.runCheckpointPath("u", []string{a, b}, PutFilesOptions{}),
		"paths":     c.runCheckpointPath("t", []string{a}, PutFilesOptions{}),
		"set":       c.runCheckpointPath("t", []string{a, b}, PutFilesOptions{Set: map[string]string{"x": "1"}}),
		"recursive": c.runCheckpointPath("t", []string{a, b}, PutFilesOptions{Recursive: true}),
	} {
		if other == base {
			t.Errorf("another %s, the same run checkpoint", name)
		}
	}
	c.stage = &lakepb.StageDescriptor{RootUri: "s3://bucket/lake"}
	if c.runCheckpointPath("t", []string{a, b}, PutFilesOptions{}) == base {
		t.Error("another stage, the same run checkpoint")
	}
	if !strings.HasSuffix(base, checkpoint.RunSuffix) || filepath.Dir(base) != "/state" {
		t.Errorf("name %s", base)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A small file whose single put was interrupted (its upload checkpoint
// records a commit id that may have committed) is refused by a bulk run,
// which commits the others: only that put, run again, knows whether its
// row is in.
func TestPutFilesRefusesAFileWithAnInterruptedSinglePut(t *testing.T) {
	f := newFixture(t, nil)
	dir := t.TempDir()
	files := writeTree(t, dir, 4)
	c := connectHooked(t, f, &hookStore{})
	if _, err := c.CreateTable(ctx, "t", nil, false); err != nil {
		t.Fatal(err)
	}
	pending := files["f002.jpg"]
	abs, err := canonicalPath(pending)
	if err != nil {
		t.Fatal(err)
	}
	cp := c.checkpointPath(abs, "t")
	if err := os.MkdirAll(filepath.Dir(cp), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cp, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := c.PutFiles(ctx, "t", []string{dir}, PutFilesOptions{Recursive: true})
	if !errors.Is(err, ErrFilesFailed) || res.Committed != 3 || res.Failed != 1 {
		t.Fatalf("run: %v, committed %d failed %d; want the other 3 committed", err, res.Committed, res.Failed)
	}
	for _, r := range res.Files {
		if (r.Err != nil) != (r.Path == pending) || r.Path == pending && !errors.Is(r.Err, errInterruptedPut) {
			t.Errorf("%s: %v", r.Path, r.Err)
		}
	}
}
