package checkpoint_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lakedata/lake/objects/checkpoint"
)

func validRun() *checkpoint.Run {
	at := time.Date(2026, 3, 1, 10, 0, 0, 123456789, time.UTC)
	return &checkpoint.Run{
		Version: checkpoint.RunVersion,
		StageID: checkpoint.StageID("file:///srv/stage"),
		Table:   "frames",
		Pending: []checkpoint.RunBatch{{
			CommitID: "c-2",
			Files: []checkpoint.RunFile{{
				Path: "/home/ann/frames/b.jpg", Name: "b.jpg", Size: 65536, ModTime: at,
				Key: "objects/2026/03/0195aaaa-0000-7000-8000-000000000000/b.jpg", SHA256: strings.Repeat("ab", 32),
				ContentType: "image/jpeg", ETag: `"e"`, UploadedAt: at.Add(time.Second),
			}},
		}},
		Committed: []checkpoint.CommittedBatch{{CommitID: "c-1", TableVersion: 3, Paths: []string{"/home/ann/frames/a.jpg"}}},
		UpdatedAt: at,
	}
}

func mustEncodeRun(t testing.TB, r *checkpoint.Run) []byte {
	t.Helper()
	b, err := checkpoint.EncodeRun(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRunRoundTrip(t *testing.T) {
	want := validRun()
	got, err := checkpoint.DecodeRun(mustEncodeRun(t, want))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip:\n got %#v\nwant %#v", got, want)
	}
}

func TestDecodeRunRejects(t *testing.T) {
	good := string(mustEncodeRun(t, validRun()))
	replace := func(old, new string) string {
		t.Helper()
		if !strings.Contains(good, old) {
			t.Fatalf("%q not in the encoding", old)
		}
		return strings.Replace(good, old, new, 1)
	}
	tests := []struct {
		name string
		doc  string
		want error
	}{
		{"empty", "", checkpoint.ErrCorrupt},
		{"garbage", marker, checkpoint.ErrCorrupt},
		{"truncated", good[:len(good)/2], checkpoint.ErrCorrupt},
		{"an upload checkpoint", string(mustEncode(t, valid())), checkpoint.ErrUnknownVersion},
		{"a version 1 upload checkpoint", string(mustRead(t, "testdata/v1_completed.json")), checkpoint.ErrCorrupt},
		{"unknown field", replace(`"table":`, `"x":"`+marker+`","table":`), checkpoint.ErrCorrupt},
		{"unknown field in a file", replace(`"name":`, `"x":"`+marker+`","name":`), checkpoint.ErrCorrupt},
		{"duplicate field", replace(`"table":`, `"table":"`+marker+`","table":`), checkpoint.ErrCorrupt},
		{"trailing data", good + marker, checkpoint.ErrCorrupt},
		{"other version", replace(`"version":1`, `"version":2`), checkpoint.ErrUnknownVersion},
		{"bad stage id", replace(`"stage_id":"`, `"stage_id":"`+marker), checkpoint.ErrCorrupt},
		{"relative path", replace(`"/home/ann/frames/b.jpg"`, `"frames/`+marker+`"`), checkpoint.ErrCorrupt},
		{"path twice", replace(`"/home/ann/frames/a.jpg"`, `"/home/ann/frames/b.jpg"`), checkpoint.ErrCorrupt},
		{"commit id twice", replace(`"c-1"`, `"c-2"`), checkpoint.ErrCorrupt},
		{"bad key", replace(`"objects/`, `"../`+marker+`/`), checkpoint.ErrCorrupt},
		{"version 0 committed", replace(`"table_version":3`, `"table_version":0`), checkpoint.ErrCorrupt},
		{"empty batch", replace(`"paths":["/home/ann/frames/a.jpg"]`, `"paths":[]`), checkpoint.ErrCorrupt},
		{"too deep", replace(`"table":`, `"x":[[[[[1]]]]],"table":`), checkpoint.ErrCorrupt},
		{"too large", good + strings.Repeat(" ", checkpoint.RunMaxSize), checkpoint.ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := checkpoint.DecodeRun([]byte(tt.doc))
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if strings.Contains(err.Error(), marker) {
				t.Fatalf("the error quotes the file: %v", err)
			}
		})
	}
}

func TestRunCheckOwner(t *testing.T) {
	r := validRun()
	if err := r.CheckOwner(checkpoint.StageID("file:///srv/stage"), "frames"); err != nil {
		t.Fatal(err)
	}
	if err := r.CheckOwner(checkpoint.StageID("s3://bucket/prefix"), "frames"); !errors.Is(err, checkpoint.ErrRunMismatch) {
		t.Errorf("another stage: %v", err)
	}
	if err := r.CheckOwner(r.StageID, "clips"); !errors.Is(err, checkpoint.ErrRunMismatch) {
		t.Errorf("another table: %v", err)
	}
}

// A run checkpoint is saved and locked like an upload checkpoint: mode
// 0600 in a 0700 directory, one session at a time, gone after Remove, and
// never a ".json" file that `lake uploads ls` would take for an upload.
func TestRunSession(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "uploads")
	p := filepath.Join(dir, "put-x"+checkpoint.RunSuffix)
	s, err := checkpoint.OpenRun(p)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Load(); !errors.Is(err, checkpoint.ErrNoCheckpoint) {
		t.Fatalf("load before save: %v", err)
	}
	if _, err := checkpoint.OpenRun(p); !errors.Is(err, checkpoint.ErrInProgress) ||
		!strings.Contains(err.Error(), "the same put is already running (pid "+strconv.Itoa(os.Getpid())+")") {
		t.Fatalf("second open: %v", err)
	}
	want := validRun()
	if err := s.Save(want); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("load:\n got %#v\nwant %#v", got, want)
	}
	for path, mode := range map[string]os.FileMode{p: 0o600, dir: 0o700 | os.ModeDir} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode() != mode {
			t.Errorf("%s: mode %v, %v; want %v", path, fi.Mode(), err, mode)
		}
	}
	if entries, err := checkpoint.List(dir); err != nil || len(entries) != 0 {
		t.Errorf("List sees the run: %v, %v", entries, err)
	}
	if err := s.Save(&checkpoint.Run{Version: checkpoint.RunVersion}); !errors.Is(err, checkpoint.ErrInvalid) {
		t.Errorf("save of an invalid run: %v", err)
	}
	if err := os.WriteFile(p, []byte("{\"version\":1,"+marker), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(); !errors.Is(err, checkpoint.ErrCorrupt) || !strings.Contains(err.Error(), p) || strings.Contains(err.Error(), marker) {
		t.Errorf("load of a corrupt run: %v", err)
	}
	if err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Remove: %v", err)
	}
}

func FuzzDecodeRun(f *testing.F) {
	f.Add(mustEncodeRun(f, validRun()))
	f.Add(mustEncodeRun(f, &checkpoint.Run{Version: 1, StageID: strings.Repeat("0", 64), Table: "t"}))
	f.Add([]byte(`{"version": 2, "whatever": true}`))
	f.Add([]byte(`{"version": 1, "pending": [{"files": [{"path": "/a"}]}], "x": [[[]]]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := checkpoint.DecodeRun(b)
		if err != nil {
			if !errors.Is(err, checkpoint.ErrCorrupt) && !errors.Is(err, checkpoint.ErrUnknownVersion) {
				t.Fatalf("DecodeRun error %v is neither ErrCorrupt nor ErrUnknownVersion", err)
			}
			return
		}
		enc, err := checkpoint.EncodeRun(r)
		if err != nil {
			t.Fatalf("EncodeRun of a decoded run: %v", err)
		}
		again, err := checkpoint.DecodeRun(enc)
		if err != nil {
			t.Fatalf("DecodeRun of its encoding: %v\n%s", err, enc)
		}
		if !reflect.DeepEqual(r, again) {
			t.Fatalf("round trip changed the run:\n%#v\n%#v", r, again)
		}
		if enc2, _ := checkpoint.EncodeRun(again); !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable")
		}
	})
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// BenchmarkRunSave is the cost of one save of a bulk put's run checkpoint
// that has committed 300,000 files in batches of 256 and has one batch
// pending: every batch of such a run pays it once (docs/operations.md,
// "Bulk puts").
func BenchmarkRunSave(b *testing.B) {
	const files, batch = 300_000, 256
	r := validRun()
	r.Committed = nil
	for i := 0; i < files; i += batch {
		c := checkpoint.CommittedBatch{CommitID: fmt.Sprintf("c-%d", i), TableVersion: int64(i/batch + 1)}
		for j := i; j < min(files, i+batch); j++ {
			c.Paths = append(c.Paths, fmt.Sprintf("/home/ann/frames/%07d.jpg", j))
		}
		r.Committed = append(r.Committed, c)
	}
	s, err := checkpoint.OpenRun(filepath.Join(b.TempDir(), "bench.run"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for b.Loop() {
		if err := s.Save(r); err != nil {
			b.Fatal(err)
		}
	}
	got, err := s.Load()
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, c := range got.Committed {
		n += len(c.Paths)
	}
	if n != files {
		b.Fatalf("the saved run holds %d committed files, want %d", n, files)
	}
}
