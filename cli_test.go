package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/objects/local"
	"github.com/lakedata/lake/roles/meta"
	"github.com/lakedata/lake/wire"
)

// cliFixture is a metadata service on a local stage; it answers the same
// table actions and appends as a query endpoint, so every command but
// `lake sql` runs against it.
type cliFixture struct {
	t        *testing.T
	endpoint string
	stageDir string
}

func newCLIFixture(t *testing.T) *cliFixture {
	t.Helper()
	// The client's default checkpoint dir lives under the user state dir.
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	t.Setenv("LAKE_TOKEN", "")
	root := t.TempDir()
	stageDir := filepath.Join(root, "stage")
	stage, err := local.Open(stageDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stage.Close() })
	cfg := meta.DefaultConfig()
	cfg.Listen, cfg.DataDir = "127.0.0.1:0", filepath.Join(root, "data")
	cfg.Stage, cfg.StageURI = stage, "file://"+stageDir
	svc, err := meta.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close(context.Background()) })
	return &cliFixture{t: t, endpoint: "grpc://" + svc.Addr().String(), stageDir: stageDir}
}

// run executes `lake args… --endpoint E` in-process and returns its
// standard output.
func (f *cliFixture) run(stdin string, args ...string) (string, error) {
	f.t.Helper()
	root := newRootCommand()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(append(args, "--endpoint", f.endpoint, "--log-level", "warn"))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func (f *cliFixture) mustRun(args ...string) string {
	f.t.Helper()
	out, err := f.run("", args...)
	if err != nil {
		f.t.Fatalf("lake %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func (f *cliFixture) objectCount() int {
	n := 0
	filepath.WalkDir(filepath.Join(f.stageDir, "objects"), func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

func lines(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestCLITable(t *testing.T) {
	f := newCLIFixture(t)
	if out := f.mustRun("table", "create", "videos"); out != "created table videos (version 0)\n" {
		t.Errorf("create: %q", out)
	}
	out := f.mustRun("table", "create", "clips", "--schema", "name utf8, file file, camera string, duration double, n bigint not null, shot date, at timestamp, ok bool, i int32")
	if !strings.HasPrefix(out, "created table clips") {
		t.Errorf("create clips: %q", out)
	}
	if out := f.mustRun("table", "create", "videos", "--if-not-exists"); out != "table videos exists (version 0)\n" {
		t.Errorf("create --if-not-exists: %q", out)
	}
	if _, err := f.run("", "table", "create", "videos"); !errors.Is(err, wire.ErrTableExists) {
		t.Errorf("create twice: %v", err)
	}
	if _, err := f.run("", "table", "create", "bad", "--schema", "a blob"); !errors.Is(err, errUsage) {
		t.Errorf("unknown type: %v", err)
	}

	ls := lines(f.mustRun("table", "ls"))
	if len(ls) != 3 || strings.Fields(ls[0])[0] != "NAME" ||
		strings.Fields(ls[1])[0] != "clips" || strings.Fields(ls[2])[0] != "videos" {
		t.Errorf("ls:\n%s", strings.Join(ls, "\n"))
	}

	desc := f.mustRun("table", "describe", "clips")
	cols := map[string]string{}
	for _, l := range lines(desc) {
		if w := strings.Fields(l); len(w) == 3 {
			cols[w[0]] = w[1] + " " + w[2]
		}
	}
	for col, want := range map[string]string{
		"file": "file true", "n": "int64 false", "shot": "date true", "at": "timestamp true",
		"duration": "float64 true", "camera": "utf8 true", "ok": "bool true", "i": "int32 true",
	} {
		if cols[col] != want {
			t.Errorf("describe: column %s is %q, want %q:\n%s", col, cols[col], want, desc)
		}
	}
	if _, err := f.run("", "table", "describe", "nope"); !errors.Is(err, wire.ErrTableNotFound) {
		t.Errorf("describe unknown: %v", err)
	}

	// Two puts, then the history, newest first.
	for _, name := range []string{"a.txt", "b.txt"} {
		f.mustRun("put", writeTemp(t, name, name), "--table", "videos")
	}
	hist := lines(f.mustRun("table", "history", "videos"))
	if len(hist) != 4 || strings.Fields(hist[1])[0] != "2" || strings.Fields(hist[3])[0] != "0" {
		t.Errorf("history:\n%s", strings.Join(hist, "\n"))
	}
	if hist := lines(f.mustRun("table", "history", "videos", "--limit", "1")); len(hist) != 2 {
		t.Errorf("history --limit 1:\n%s", strings.Join(hist, "\n"))
	}
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCLIPut(t *testing.T) {
	f := newCLIFixture(t)
	f.mustRun("table", "create", "docs", "--schema", "name utf8, file file, created_at timestamp, author string, pages int64")
	contents := []string{"first file", "second, longer file", "third"}
	var paths []string
	for i, c := range contents {
		paths = append(paths, writeTemp(t, "doc"+strconv.Itoa(i)+".txt", c))
	}

	// Text output: a header and one aligned row per file.
	out := f.mustRun(append([]string{"put", "--table", "docs", "--set", "author=ann", "--set", "pages=3"}, paths...)...)
	rows := lines(out)
	if len(rows) != 4 || strings.Join(strings.Fields(rows[0]), " ") != "KEY SIZE SHA256 VERSION" {
		t.Fatalf("put output:\n%s", out)
	}
	keyCol := strings.Index(rows[0], "SIZE")
	for i, row := range rows[1:] {
		fields := strings.Fields(row)
		if len(fields) != 4 {
			t.Fatalf("row %q", row)
		}
		// Many files commit as one batch: one version for all.
		if !strings.HasSuffix(fields[0], "doc"+strconv.Itoa(i)+".txt") || fields[1] != strconv.Itoa(len(contents[i])) ||
			fields[2] != sha([]byte(contents[i])) || fields[3] != "1" {
			t.Errorf("row %d: %q", i, row)
		}
		if len(fields[0])+strings.Index(row[len(fields[0]):], fields[1]) != keyCol {
			t.Errorf("row %d is not aligned with the header: %q", i, row)
		}
	}

	// --json: one object per line.
	out = f.mustRun(append([]string{"put", "--table", "docs", "--json"}, paths...)...)
	sc := bufio.NewScanner(strings.NewReader(out))
	n := 0
	for sc.Scan() {
		var got struct {
			Path, Table, Key, SHA256 string
			ContentType              string `json:"content_type"`
			Size, Version            int64
		}
		if err := json.Unmarshal(sc.Bytes(), &got); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if got.Path != paths[n] || got.Table != "docs" || got.Size != int64(len(contents[n])) ||
			got.SHA256 != sha([]byte(contents[n])) || got.Version != 2 || !strings.HasPrefix(got.ContentType, "text/plain") {
			t.Errorf("line %d: %+v", n, got)
		}
		n++
	}
	if n != 3 {
		t.Errorf("%d JSON lines, want 3:\n%s", n, out)
	}

	// Standard input needs --name.
	if _, err := f.run("from stdin", "put", "-", "--table", "docs"); !errors.Is(err, errUsage) {
		t.Errorf("- without --name: %v", err)
	}
	out, err := f.run("from stdin", "put", "-", "--table", "docs", "--name", "in.txt", "--json")
	if err != nil || !strings.Contains(out, `"size":10`) || !strings.Contains(out, `in.txt"`) {
		t.Errorf("put -: %v\n%s", err, out)
	}
	if got := f.objectCount(); got != 7 {
		t.Errorf("%d objects in the stage, want 7", got)
	}
}

func TestCLIPutBadSetUploadsNothing(t *testing.T) {
	f := newCLIFixture(t)
	f.mustRun("table", "create", "docs", "--schema", "name utf8, file file, pages int64")
	paths := []string{writeTemp(t, "a.txt", "a"), writeTemp(t, "b.txt", "b")}
	for _, set := range []string{"pages=many", "nope=1", "pages"} {
		_, err := f.run("", append([]string{"put", "--table", "docs", "--set", set}, paths...)...)
		if err == nil {
			t.Errorf("--set %s accepted", set)
		}
	}
	_, err := f.run("", "put", "--table", "docs", "--set", "pages=x", paths[0])
	var ve *client.ValueError
	if !errors.As(err, &ve) || ve.Column != "pages" || !errors.Is(err, client.ErrInvalidValue) {
		t.Errorf("bad value: %v", err)
	}
	if _, err := f.run("", "put", "--table", "docs", filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing file was accepted")
	}
	if n := f.objectCount(); n != 0 {
		t.Errorf("%d objects uploaded by refused puts", n)
	}
	if desc := f.mustRun("table", "describe", "docs"); !strings.Contains(desc, "version     0") {
		t.Errorf("the table moved:\n%s", desc)
	}
}

func TestCLIGet(t *testing.T) {
	f := newCLIFixture(t)
	f.mustRun("table", "create", "blobs")
	content := bytes.Repeat([]byte("lake\x00\xff"), 100_000)
	src := filepath.Join(t.TempDir(), "blob.bin")
	if err := os.WriteFile(src, content, 0o644); err != nil {
		t.Fatal(err)
	}
	var put struct{ Key string }
	if err := json.Unmarshal([]byte(f.mustRun("put", src, "--table", "blobs", "--json")), &put); err != nil {
		t.Fatal(err)
	}

	dst := filepath.Join(t.TempDir(), "out.bin")
	if out := f.mustRun("get", "--table", "blobs", "--key", put.Key, "-o", dst); out != "" {
		t.Errorf("get -o FILE printed %q", out)
	}
	got, err := os.ReadFile(dst)
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("get wrote %d bytes (%v), want the %d put", len(got), err, len(content))
	}
	if stdout := f.mustRun("get", "--table", "blobs", "--key", put.Key, "-o", "-"); stdout != string(content) {
		t.Errorf("get -o - wrote %d bytes", len(stdout))
	}
	if _, err := f.run("", "get", "--table", "blobs", "--key", "objects/none", "-o", dst); !errors.Is(err, client.ErrFileNotFound) {
		t.Errorf("unknown key: %v", err)
	}

	// A damaged object never replaces OUT.
	obj := filepath.Join(f.stageDir, filepath.FromSlash(put.Key))
	if err := os.WriteFile(obj, append(bytes.Clone(content[:len(content)-1]), 'X'), 0o644); err != nil {
		t.Fatal(err)
	}
	dst2 := filepath.Join(filepath.Dir(dst), "damaged.bin")
	if _, err := f.run("", "get", "--table", "blobs", "--key", put.Key, "-o", dst2); !errors.Is(err, client.ErrIntegrity) {
		t.Errorf("damaged object: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Dir(dst))
	if len(entries) != 1 {
		t.Errorf("after a failed get the directory holds %d entries, want only out.bin", len(entries))
	}
}

func TestParseSchema(t *testing.T) {
	s, err := parseSchema("a utf8, b FILE not null,c timestamp , d date NOT NULL")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name, typ string
		nullable  bool
	}{{"a", "utf8", true}, {"b", "file", false}, {"c", "timestamp", true}, {"d", "date", false}}
	for i, w := range want {
		f := s.Field(i)
		if f.Name != w.name || typeName(f) != w.typ || f.Nullable != w.nullable {
			t.Errorf("column %d: %s %s nullable=%v, want %+v", i, f.Name, typeName(f), f.Nullable, w)
		}
	}
	for _, bad := range []string{"", "a", "a utf8 extra", "a utf8, a int64", "a varchar", "a utf8,"} {
		if _, err := parseSchema(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestSQLFormats renders a result with a FILE column, a timestamp and
// nulls in each --format (the query itself needs the query role).
func TestSQLFormats(t *testing.T) {
	schema := wire.DefaultSchema()
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	at := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	b.Field(0).(*array.StringBuilder).Append("a\tb.txt")
	wire.AppendFileValue(b.Field(1).(*array.StructBuilder), wire.FileValue{
		Key: "objects/k/a.txt", Size: 3, SHA256: sha([]byte("abc")), ContentType: "text/plain", UploadedAt: at,
	})
	b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(at.UnixMicro()))
	b.Field(0).(*array.StringBuilder).AppendNull()
	b.Field(1).AppendNull()
	b.Field(2).AppendNull()
	rec := b.NewRecordBatch()
	defer rec.Release()

	render := func(format string) string {
		rdr, err := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
		if err != nil {
			t.Fatal(err)
		}
		defer rdr.Release()
		var out bytes.Buffer
		if err := writeResult(rdr, format, &out); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	file := `{objects/k/a.txt,3,` + sha([]byte("abc")) + `,text/plain,,2024-05-01T10:00:00Z}`

	wantJSON := `{"name":"a\tb.txt","file":{"key":"objects/k/a.txt","size":3,"sha256":"` + sha([]byte("abc")) +
		`","content_type":"text/plain","etag":null,"uploaded_at":"2024-05-01T10:00:00Z"},"created_at":"2024-05-01T10:00:00Z"}` + "\n" +
		`{"name":null,"file":null,"created_at":null}` + "\n"
	if got := render("json"); got != wantJSON {
		t.Errorf("json:\n%s\nwant:\n%s", got, wantJSON)
	}
	wantCSV := "name,file,created_at\n" +
		"a\tb.txt,\"" + file + "\",2024-05-01T10:00:00Z\n" +
		",,\n"
	if got := render("csv"); got != wantCSV {
		t.Errorf("csv:\n%s\nwant:\n%s", got, wantCSV)
	}
	table := lines(render("table"))
	if len(table) != 3 || strings.Join(strings.Fields(table[0]), " ") != "name file created_at" ||
		strings.Join(strings.Fields(table[1]), " ") != `a\tb.txt `+file+" 2024-05-01T10:00:00Z" ||
		strings.Join(strings.Fields(table[2]), " ") != "NULL NULL NULL" {
		t.Errorf("table:\n%s", strings.Join(table, "\n"))
	}
	if strings.Index(table[1], file) != strings.Index(table[0], "file") {
		t.Errorf("table columns are not aligned:\n%s", strings.Join(table, "\n"))
	}
}

// lake status on a lone node: it leads, accepts writes, and its numbers
// follow the tables it holds.
func TestCLIStatus(t *testing.T) {
	f := newCLIFixture(t)
	f.mustRun("table", "create", "clips")
	f.mustRun("put", writeTemp(t, "a.bin", "aaa"), "--table", "clips", "--no-progress")
	out := f.mustRun("status")
	addr := strings.TrimPrefix(f.endpoint, "grpc://")
	if !strings.Contains(out, "leader: "+addr) || !strings.Contains(out, "accepting writes") {
		t.Fatalf("status:\n%s", out)
	}
	var row []string
	for _, l := range lines(out) {
		if strings.HasPrefix(l, addr) {
			row = strings.Fields(l)
		}
	}
	// MEMBER ROLE TABLES VERSIONS LAG UP
	if len(row) != 6 || row[1] != "leader" || row[2] != "1" || row[3] != "1" || row[4] != "0" {
		t.Fatalf("member row %q in:\n%s", row, out)
	}
	var st struct {
		Leader          string
		AcceptingWrites bool
		Clustered       bool
		Members         []struct{ Addr, Versions string }
	}
	if err := json.Unmarshal([]byte(f.mustRun("status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if st.Leader != addr || !st.AcceptingWrites || st.Clustered || len(st.Members) != 1 || st.Members[0].Versions != "1" {
		t.Fatalf("status --json: %+v", st)
	}
}
