package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/roles/meta"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

var ctx = context.Background()

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func readAll(t *testing.T, c *Client, v wire.FileValue) ([]byte, error) {
	t.Helper()
	rc, err := c.Open(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func TestClientPutFileThenSnapshotHasRow(t *testing.T) {
	f := newFixture(t, nil)
	c := f.connect()
	info, err := c.CreateTable(ctx, "docs", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if !info.GetCreated() || info.GetVersion() != 0 {
		t.Fatalf("create: %+v", info)
	}
	content := []byte("hello, lake\n")
	path := writeFile(t, "hello.txt", content)

	res, err := c.PutFile(ctx, "docs", path, PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != 1 || res.Duplicate || res.Table != "docs" {
		t.Fatalf("put: %+v", res)
	}
	v := res.File
	if v.Size != int64(len(content)) || v.SHA256 != sha(content) || !strings.HasSuffix(v.Key, "hello.txt") {
		t.Errorf("file value: %+v", v)
	}
	if !strings.HasPrefix(v.ContentType, "text/plain") {
		t.Errorf("content type %q, want text/plain", v.ContentType)
	}

	snap, err := c.Snapshot(ctx, "docs", nil)
	if err != nil {
		t.Fatal(err)
	}
	if snap.GetVersion() != 1 || len(snap.GetFiles()) != 1 || snap.GetFiles()[0].GetRows() != 1 {
		t.Fatalf("snapshot: %v", snap)
	}
	got, err := c.FindFile(ctx, "docs", v.Key)
	if err != nil {
		t.Fatal(err)
	}
	if got.Key != v.Key || got.Size != v.Size || got.SHA256 != v.SHA256 || got.ContentType != v.ContentType {
		t.Errorf("row holds %+v, put returned %+v", got, v)
	}
	if _, err := c.FindFile(ctx, "docs", "objects/none"); !errors.Is(err, ErrFileNotFound) {
		t.Errorf("missing key: %v, want ErrFileNotFound", err)
	}

	back, err := readAll(t, c, got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, content) {
		t.Errorf("read back %q, want %q", back, content)
	}
	// The bytes went to the stage itself, at the key.
	onDisk, err := os.ReadFile(filepath.Join(f.stageDir, filepath.FromSlash(v.Key)))
	if err != nil || !bytes.Equal(onDisk, content) {
		t.Errorf("stage holds %q, %v", onDisk, err)
	}
}

func TestClientPutReader(t *testing.T) {
	f := newFixture(t, nil)
	c := f.connect()
	if _, err := c.CreateTable(ctx, "blobs", nil, false); err != nil {
		t.Fatal(err)
	}
	content := bytes.Repeat([]byte("0123456789"), 300_000) // 3 MB: several copy chunks
	res, err := c.PutReader(ctx, "blobs", "big.bin", bytes.NewReader(content), PutOptions{CommitID: "stream-1"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != 1 || res.File.Size != int64(len(content)) || res.File.SHA256 != sha(content) {
		t.Fatalf("put: %+v", res)
	}
	back, err := readAll(t, c, res.File)
	if err != nil || !bytes.Equal(back, content) {
		t.Fatalf("read back %d bytes, %v", len(back), err)
	}
	h, err := c.History(ctx, "blobs", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.GetVersions()) != 1 || h.GetVersions()[0].GetCommitIds()[0] != "stream-1" {
		t.Errorf("history: %v", h)
	}
	if _, err := c.PutReader(ctx, "blobs", "", strings.NewReader("x"), PutOptions{}); err == nil {
		t.Error("a stream without a name was accepted")
	}
}

// typedSchema has one column of each type Set parses, and a non-nullable
// one every put must set.
func typedSchema() *arrow.Schema {
	ts := func(u arrow.TimeUnit) arrow.DataType { return &arrow.TimestampType{Unit: u, TimeZone: "UTC"} }
	return arrow.NewSchema([]arrow.Field{
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		wire.FileField("file", true),
		{Name: "created_at", Type: ts(arrow.Microsecond), Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "u16", Type: arrow.PrimitiveTypes.Uint16, Nullable: true},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "ts", Type: ts(arrow.Microsecond), Nullable: true},
		{Name: "ts_ms", Type: ts(arrow.Millisecond), Nullable: true},
		{Name: "d", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "req", Type: arrow.PrimitiveTypes.Int32, Nullable: false},
	}, nil)
}

func TestClientSetParsing(t *testing.T) {
	f := newFixture(t, nil)
	c := f.connect()
	if _, err := c.CreateTable(ctx, "typed", typedSchema(), false); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		col, val string
		want     string // the column's ValueStr; "" when an error is expected
		err      error
	}{
		{col: "s", val: "hello world", want: "hello world"},
		{col: "i8", val: "-128", want: "-128"},
		{col: "i8", val: "128", err: ErrInvalidValue},
		{col: "i64", val: "9007199254740993", want: "9007199254740993"},
		{col: "i64", val: "12abc", err: ErrInvalidValue},
		{col: "u16", val: "65535", want: "65535"},
		{col: "u16", val: "-1", err: ErrInvalidValue},
		{col: "f32", val: "1.5", want: "1.5"},
		{col: "f64", val: "-2.25e3", want: "-2250"},
		{col: "f64", val: "one", err: ErrInvalidValue},
		{col: "b", val: "true", want: "true"},
		{col: "b", val: "yes", err: ErrInvalidValue},
		{col: "ts", val: "2024-05-01T12:00:00+02:00", want: "2024-05-01T10:00:00Z"},
		{col: "ts", val: "1714557600000000", want: "2024-05-01T10:00:00Z"},
		{col: "ts", val: "2024-05-01", err: ErrInvalidValue},
		{col: "ts_ms", val: "2024-05-01T10:00:00.123Z", want: "2024-05-01T10:00:00.123Z"},
		{col: "d", val: "2024-05-01", want: "2024-05-01"},
		{col: "d", val: "01/05/2024", err: ErrInvalidValue},
		{col: "created_at", val: "2020-01-01T00:00:00Z", want: "2020-01-01T00:00:00Z"},
		{col: "name", val: "override", want: "override"},
		{col: "file", val: "x", err: ErrInvalidValue},
		{col: "nope", val: "1", err: ErrUnknownColumn},
	}
	schema := typedSchema()
	for _, tc := range cases {
		t.Run(tc.col+"="+tc.val, func(t *testing.T) {
			set := map[string]string{"req": "7", tc.col: tc.val}
			plan, err := planRow(schema, "a.bin", set)
			if tc.err != nil {
				var ve *ValueError
				if !errors.Is(err, tc.err) || !errors.As(err, &ve) || ve.Column != tc.col {
					t.Fatalf("err = %v, want a ValueError for %q wrapping %v", err, tc.col, tc.err)
				}
				// Through the client: refused before anything is uploaded.
				path := writeFile(t, "a.bin", []byte("data"))
				if _, err := c.PutFile(ctx, "typed", path, PutOptions{Set: set}); !errors.Is(err, tc.err) {
					t.Fatalf("PutFile: %v, want %v", err, tc.err)
				}
				if files := f.objectFiles(); len(files) != 0 {
					t.Fatalf("a refused put uploaded %v", files)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			rec, err := plan.record(wire.FileValue{Key: "objects/a", SHA256: sha(nil)}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			defer rec.Release()
			idx := schema.FieldIndices(tc.col)[0]
			if got := rec.Column(idx).ValueStr(0); got != tc.want {
				t.Errorf("%s = %q, want %q", tc.col, got, tc.want)
			}
			if got := rec.Column(schema.FieldIndices("req")[0]).ValueStr(0); got != "7" {
				t.Errorf("req = %q", got)
			}
		})
	}

	t.Run("missing non-nullable", func(t *testing.T) {
		path := writeFile(t, "a.bin", []byte("data"))
		_, err := c.PutFile(ctx, "typed", path, PutOptions{})
		var ve *ValueError
		if !errors.Is(err, ErrMissingValue) || !errors.As(err, &ve) || ve.Column != "req" {
			t.Fatalf("err = %v, want ErrMissingValue for req", err)
		}
		if files := f.objectFiles(); len(files) != 0 {
			t.Fatalf("a refused put uploaded %v", files)
		}
	})

	t.Run("defaults and every type accepted by the service", func(t *testing.T) {
		set := map[string]string{
			"req": "1", "s": "x", "i8": "1", "i64": "2", "u16": "3", "f32": "4.5", "f64": "5.5",
			"b": "false", "ts": "2024-01-02T03:04:05Z", "ts_ms": "0", "d": "1999-12-31",
		}
		path := writeFile(t, "typed.bin", []byte("typed"))
		res, err := c.PutFile(ctx, "typed", path, PutOptions{Set: set})
		if err != nil {
			t.Fatal(err)
		}
		if res.Version != 1 {
			t.Errorf("version %d", res.Version)
		}
		plan, err := planRow(schema, "typed.bin", set)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		rec, err := plan.record(res.File, now)
		if err != nil {
			t.Fatal(err)
		}
		defer rec.Release()
		if got := rec.Column(0).ValueStr(0); got != "typed.bin" {
			t.Errorf("name = %q", got)
		}
		if got := rec.Column(2).ValueStr(0); got != "2025-01-01T00:00:00Z" {
			t.Errorf("created_at = %q", got)
		}
	})

	t.Run("no FILE column", func(t *testing.T) {
		s := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
		if _, err := c.CreateTable(ctx, "plain", s, false); err != nil {
			t.Fatal(err)
		}
		path := writeFile(t, "a.bin", []byte("data"))
		if _, err := c.PutFile(ctx, "plain", path, PutOptions{}); !errors.Is(err, ErrNoFileColumn) {
			t.Fatalf("err = %v, want ErrNoFileColumn", err)
		}
	})
}

func TestClientOpenDetectsCorruption(t *testing.T) {
	f := newFixture(t, nil)
	c := f.connect()
	if _, err := c.CreateTable(ctx, "t", nil, false); err != nil {
		t.Fatal(err)
	}
	content := []byte("the quick brown fox jumps over the lazy dog")
	damage := map[string]func([]byte) []byte{
		"flipped byte": func(b []byte) []byte { b[3] ^= 1; return b },
		"truncated":    func(b []byte) []byte { return b[:len(b)-5] },
		"extended":     func(b []byte) []byte { return append(b, "tail"...) },
	}
	for name, fn := range damage {
		t.Run(name, func(t *testing.T) {
			res, err := c.PutReader(ctx, "t", "fox.txt", bytes.NewReader(content), PutOptions{})
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(f.stageDir, filepath.FromSlash(res.File.Key))
			if err := os.WriteFile(p, fn(bytes.Clone(content)), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := readAll(t, c, res.File); !errors.Is(err, ErrIntegrity) {
				t.Fatalf("read: %v, want ErrIntegrity", err)
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		v := wire.FileValue{Key: "objects/gone", Size: 1, SHA256: sha([]byte("x"))}
		if _, err := c.Open(ctx, v); !errors.Is(err, objects.ErrNotFound) {
			t.Fatalf("open: %v, want objects.ErrNotFound", err)
		}
	})
}

func TestClientErrorsMapToSentinels(t *testing.T) {
	f := newFixture(t, nil)
	c := f.connect()
	_, err := c.Describe(ctx, "nope")
	if !errors.Is(err, wire.ErrTableNotFound) || status.Code(err) != codes.NotFound {
		t.Fatalf("describe unknown: %v (code %v), want ErrTableNotFound", err, status.Code(err))
	}
	if !strings.Contains(err.Error(), `table not found: "nope"`) {
		t.Errorf("the server's message is lost: %v", err)
	}
	if _, err := c.CreateTable(ctx, "t", nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTable(ctx, "t", nil, false); !errors.Is(err, wire.ErrTableExists) {
		t.Errorf("create twice: %v", err)
	}
	if info, err := c.CreateTable(ctx, "t", nil, true); err != nil || info.GetCreated() {
		t.Errorf("create if not exists: %v, %v", info, err)
	}
	v := int64(9)
	if _, err := c.Snapshot(ctx, "t", &v); !errors.Is(err, wire.ErrVersionNotFound) {
		t.Errorf("snapshot of a future version: %v", err)
	}
	if _, err := c.History(ctx, "Bad-Name", 0); !errors.Is(err, wire.ErrInvalidTable) {
		t.Errorf("bad name: %v", err)
	}
	res, err := c.PutReader(ctx, "t", "a", strings.NewReader("a"), PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Append with a wrong expected version.
	schema := wire.DefaultSchema()
	plan, err := planRow(schema, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := plan.record(res.File, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	zero := int64(0)
	if _, err := c.Append(ctx, "t", rec, AppendOptions{ExpectedVersion: &zero}); !errors.Is(err, wire.ErrVersionConflict) {
		t.Errorf("stale expected version: %v", err)
	}
	one := int64(1)
	if r, err := c.Append(ctx, "t", rec, AppendOptions{ExpectedVersion: &one}); err != nil || r.GetVersion() != 2 {
		t.Errorf("expected version 1: %v, %v", r, err)
	}
	// An object that is not in the stage.
	gone := res.File
	gone.Key = "objects/never/uploaded"
	rec2, _ := plan.record(gone, time.Now())
	defer rec2.Release()
	if _, err := c.Append(ctx, "t", rec2, AppendOptions{}); !errors.Is(err, wire.ErrObjectMissing) {
		t.Errorf("missing object: %v", err)
	}
}

func TestClientRecordingStore(t *testing.T) {
	var doPuts countDoPut
	f := newFixture(t, func(cfg *meta.Config) {
		cfg.ServerOptions = append(cfg.ServerOptions, grpc.StreamInterceptor(doPuts.intercept))
	})
	rec := &recordingStore{}
	cpDir := filepath.Join(t.TempDir(), "cp")
	c := f.connect(WithCheckpointDir(cpDir), withStore(func(s objects.Store) objects.Store { rec.Store = s; return rec }))
	if _, err := c.CreateTable(ctx, "t", nil, false); err != nil {
		t.Fatal(err)
	}

	path := writeFile(t, "clip.mp4", []byte("not really a video"))
	res, err := c.PutFile(ctx, "t", path, PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	calls := rec.takeCalls()
	canon, _ := filepath.EvalSymlinks(path)
	want := c.checkpointPath(canon, "t")
	// A local stage cannot resume: the plain PutPath, the checkpoint
	// session held around it all the same.
	if len(calls) != 1 || calls[0].method != "PutPath" || calls[0].path != canon || calls[0].key != res.File.Key {
		t.Fatalf("path source: calls %+v, want one PutPath", calls)
	}
	if filepath.Dir(want) != cpDir || c.checkpointPath(canon, "t") != want || c.checkpointPath(canon, "u") == want {
		t.Errorf("checkpoint path %s is not deterministic per file and table under %s", want, cpDir)
	}
	if res.File.ContentType != "video/mp4" {
		t.Errorf("content type %q", res.File.ContentType)
	}
	if n := doPuts.count(); n != 1 {
		t.Errorf("the endpoint got %d appends, want 1", n)
	}

	if _, err := c.PutReader(ctx, "t", "s.bin", strings.NewReader("stream"), PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if calls := rec.takeCalls(); len(calls) != 1 || calls[0].method != "Put" {
		t.Fatalf("reader source: calls %+v, want one Put", calls)
	}
	if n := doPuts.count(); n != 2 {
		t.Errorf("the endpoint got %d appends in all, want 2", n)
	}
	h, err := c.History(ctx, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range h.GetVersions()[:2] {
		if v.GetRows() != 1 || len(v.GetCommitIds()) != 1 {
			t.Errorf("version %d: %d rows, commits %v; want one row, one commit", v.GetVersion(), v.GetRows(), v.GetCommitIds())
		}
	}
}

// TestClientRetriesAmbiguousAppend makes the service commit an append but
// answer Unavailable: the client resends with the same commit id and gets
// the original version back, and the table holds the row once.
func TestClientRetriesAmbiguousAppend(t *testing.T) {
	var failed atomic.Bool
	flaky := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		err := handler(srv, ss)
		if filepath.Base(info.FullMethod) == "DoPut" && err == nil && failed.CompareAndSwap(false, true) {
			return status.Error(codes.Unavailable, "connection lost after the commit")
		}
		return err
	}
	f := newFixture(t, func(cfg *meta.Config) {
		cfg.ServerOptions = append(cfg.ServerOptions, grpc.StreamInterceptor(flaky))
	})
	c := f.connect()
	if _, err := c.CreateTable(ctx, "t", nil, false); err != nil {
		t.Fatal(err)
	}
	res, err := c.PutReader(ctx, "t", "a.txt", strings.NewReader("a"), PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !failed.Load() || res.Version != 1 || !res.Duplicate {
		t.Fatalf("put: %+v (failure injected: %v), want version 1 as a duplicate", res, failed.Load())
	}
	info, err := c.Describe(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if info.GetVersion() != 1 || info.GetRows() != 1 {
		t.Errorf("table at version %d with %d rows, want 1 and 1", info.GetVersion(), info.GetRows())
	}
	// Read-your-writes: the version the put returned is there; one that
	// was never committed is not.
	if info, err := c.DescribeAtLeast(ctx, "t", res.Version); err != nil || info.GetVersion() < res.Version {
		t.Errorf("DescribeAtLeast(%d): %v, %v", res.Version, info, err)
	}
	if _, err := c.DescribeAtLeast(ctx, "t", res.Version+5); !errors.Is(err, wire.ErrVersionNotFound) {
		t.Errorf("DescribeAtLeast(%d) of a table at %d: %v, want ErrVersionNotFound", res.Version+5, res.Version, err)
	}
}

func TestClientConnect(t *testing.T) {
	t.Run("unknown stage kind", func(t *testing.T) {
		f := newFixture(t, func(cfg *meta.Config) {
			cfg.Discover = &lakepb.StageDescriptor{Kind: "ftp", RootUri: "ftp://host/p"}
		})
		_, err := Connect(ctx, f.addr)
		if !errors.Is(err, ErrStageUnsupported) {
			t.Fatalf("connect: %v, want ErrStageUnsupported", err)
		}
	})
	t.Run("unreachable local stage", func(t *testing.T) {
		f := newFixture(t, func(cfg *meta.Config) {
			cfg.Discover = &lakepb.StageDescriptor{Kind: "file", RootUri: "file:///nonexistent/stage", LocalPath: "/nonexistent/stage"}
		})
		if _, err := Connect(ctx, f.addr); err == nil || !strings.Contains(err.Error(), "not a directory this machine can reach") {
			t.Fatalf("connect: %v", err)
		}
		if _, err := os.Stat("/nonexistent/stage"); err == nil {
			t.Error("Connect created the advertised stage directory")
		}
	})
	t.Run("token is not leaked", func(t *testing.T) {
		_, err := Connect(ctx, "grpc://127.0.0.1:1", WithToken("s3cr3t-token"))
		if err == nil || strings.Contains(err.Error(), "s3cr3t") {
			t.Fatalf("connect to a closed port: %v", err)
		}
	})
}

// TestClientDoesNotDependOnRoles keeps the client speaking only the wire
// contract (STYLE: client may import wire and objects).
func TestClientDoesNotDependOnRoles(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/lakedata/lake/client").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/lakedata/lake/roles") {
			t.Errorf("the client depends on %s", pkg)
		}
	}
}
