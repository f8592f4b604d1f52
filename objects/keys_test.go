package objects

import (
	"io/fs"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/lakedata/lake/wire"
)

func TestNewObjectKey(t *testing.T) {
	now := time.Date(2026, 3, 9, 23, 30, 0, 0, time.FixedZone("X", -5*3600))
	seen := make(map[string]bool, 1000)
	for range 1000 {
		key := NewObjectKey("../weird dir/report 2026.CSV", now)
		if err := wire.ValidateObjectKey(key); err != nil {
			t.Fatalf("NewObjectKey = %q: %v", key, err)
		}
		if seen[key] {
			t.Fatalf("NewObjectKey repeated %q", key)
		}
		seen[key] = true
		// The date is UTC: 23:30 at -05:00 is already the 10th.
		if !strings.HasPrefix(key, "objects/2026/03/10/") {
			t.Fatalf("NewObjectKey = %q, want objects/2026/03/10/ first", key)
		}
		// One segment per object: the day's directory is shared.
		id, name, ok := strings.Cut(path.Base(key), "-report")
		if path.Dir(key) != "objects/2026/03/10" || !ok || name != "_2026.CSV" {
			t.Fatalf("NewObjectKey = %q, want objects/2026/03/10/<uuid>-report_2026.CSV", key)
		}
		if u, err := uuid.Parse(id); err != nil || u.Version() != 7 {
			t.Fatalf("NewObjectKey = %q: %q is no UUIDv7 (%v)", key, id, err)
		}
	}
}

func TestCleanName(t *testing.T) {
	long := strings.Repeat("x", 1000)
	for _, tc := range []struct{ in, want string }{
		{"report.csv", "report.csv"},
		{"file.tar.gz", "file.tar.gz"},
		{"-rf", "-rf"},
		{"", "file"},
		{".", "file"},
		{"..", "file"},
		{"...", "file"},
		{".bashrc", "bashrc"},
		{"..hidden", "hidden"},
		{"a..b", "a..b"},
		{"trailing.", "trailing."},
		{"a/b/c.txt", "c.txt"},
		{"../../etc/passwd", "passwd"},
		{"dir/", "file"},
		{"a/..", "file"},
		{`C:\Users\x\doc.pdf`, "doc.pdf"},
		{"with space.txt", "with_space.txt"},
		{"héllo wörld.txt", "h_llo_w_rld.txt"},
		{"日本語.txt", "___.txt"},
		{"a\x00b\nc", "a_b_c"},
		{"\xffab", "_ab"},
		{long, long[:maxNameLen]},
		{strings.Repeat("é", 500), strings.Repeat("_", maxNameLen)},
	} {
		if got := CleanName(tc.in); got != tc.want {
			t.Errorf("CleanName(%.40q) = %.40q, want %.40q", tc.in, got, tc.want)
		}
	}
}

func FuzzCleanName(f *testing.F) {
	for _, s := range []string{"", ".", "..", "a/b", `a\b`, "日本", "\xff", "a\x00", strings.Repeat(".", 300)} {
		f.Add(s)
	}
	now := time.Now()
	f.Fuzz(func(t *testing.T, name string) {
		c := CleanName(name)
		if c == "" || c == "." || c == ".." || len(c) > maxNameLen || strings.ContainsAny(c, `/\`) {
			t.Fatalf("CleanName(%q) = %q", name, c)
		}
		if key := NewObjectKey(name, now); wire.ValidateObjectKey(key) != nil {
			t.Fatalf("NewObjectKey(%q) = %q: %v", name, key, wire.ValidateObjectKey(key))
		}
	})
}

// FuzzValidateKey checks the property both backends rely on: an accepted key
// is a clean relative path that stays inside any root it is joined to. It
// lives here, not in wire, because objects is what depends on it.
func FuzzValidateKey(f *testing.F) {
	for _, s := range []string{"a", "a/b", "../a", "a/../b", "/a", "a//b", "a/", "./a", "a/.", `a\b`, "a\x00b", "...", "a/..b", ".lake-tmp/x"} {
		f.Add(s)
	}
	const root = "/stage/root"
	f.Fuzz(func(t *testing.T, key string) {
		if wire.ValidateKey(key) != nil {
			return
		}
		joined := filepath.Join(root, key)
		if !strings.HasPrefix(joined, root+string(filepath.Separator)) {
			t.Fatalf("ValidateKey accepted %q, which joins to %q outside %s", key, joined, root)
		}
		if filepath.Clean(key) != key || !filepath.IsLocal(key) {
			t.Fatalf("ValidateKey accepted %q, which is not a clean local path", key)
		}
		// objects/local walks keys through an fs.FS.
		if !fs.ValidPath(key) {
			t.Fatalf("ValidateKey accepted %q, which fs.ValidPath refuses", key)
		}
		if !utf8.ValidString(key) || len(key) > wire.MaxKeyLen {
			t.Fatalf("ValidateKey accepted %q", key)
		}
		for _, seg := range strings.Split(key, "/") {
			if seg == ".." || seg == "." || seg == "" {
				t.Fatalf("ValidateKey accepted %q with segment %q", key, seg)
			}
		}
	})
}

// Keys minted before objects of a day shared a directory
// (objects/<yyyy>/<mm>/<uuidv7>/<name>) are still object keys: FILE values
// already committed name them.
func TestOldObjectKeysStayValid(t *testing.T) {
	for _, key := range []string{
		"objects/2026/01/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b/clip.mp4",
		"objects/2026/03/10/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b-clip.mp4",
	} {
		if err := wire.ValidateObjectKey(key); err != nil {
			t.Errorf("ValidateObjectKey(%q) = %v", key, err)
		}
	}
}
