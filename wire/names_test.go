package wire

import (
	"errors"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

var tableNameRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

func TestValidateTableName(t *testing.T) {
	ok := []string{"videos", "_", "_private", "a1", "model_weights_v2", "a__b", strings.Repeat("z", MaxTableNameLen)}
	for _, name := range ok {
		if err := ValidateTableName(name); err != nil {
			t.Errorf("ValidateTableName(%q) = %v, want nil", name, err)
		}
	}
	bad := []string{
		"", "Videos", "VIDEOS", "vidEos", "1videos", "0", "9_a",
		strings.Repeat("z", MaxTableNameLen+1),
		"my videos", " videos", "videos ", "a-b", "a.b", "a/b", "a\\b", `"a"`, "a;drop",
		"a\x00", "a\n", "vidéos", "ａ", "\xff",
	}
	for _, name := range bad {
		err := ValidateTableName(name)
		if !errors.Is(err, ErrInvalidTable) {
			t.Errorf("ValidateTableName(%q) = %v, want ErrInvalidTable", name, err)
		}
	}
}

func FuzzValidateTableName(f *testing.F) {
	for _, s := range []string{"videos", "_", "a1", strings.Repeat("a", 63), strings.Repeat("a", 64),
		"", "A", "1a", "a-b", "a b", "é", "a\x00", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidateTableName(name)
		if want := tableNameRE.MatchString(name); (err == nil) != want {
			t.Fatalf("ValidateTableName(%q) = %v, regexp match %v", name, err, want)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidTable) {
				t.Fatalf("error %v is not ErrInvalidTable", err)
			}
			if len(err.Error()) > 600 {
				t.Fatalf("error message of %d bytes", len(err.Error()))
			}
		}
	})
}

func TestValidateObjectKey(t *testing.T) {
	ok := []string{
		"objects/a",
		"objects/ab/cd/0f1e2d3c-video.mp4",
		"objects/with space/ünïcode ✓",
		"objects/..a/b..", // dots inside a segment are fine
		"objects/.hidden",
		"objects/" + strings.Repeat("k", MaxKeyLen-len("objects/")),
	}
	for _, k := range ok {
		if err := ValidateObjectKey(k); err != nil {
			t.Errorf("ValidateObjectKey(%q) = %v, want nil", k, err)
		}
	}
	bad := []string{
		"", "objects", "objects/", "objects//a", "objects/a/", "objects/./a", "objects/a/.",
		"objects/../a", "objects/a/..", "objects/..", "../objects/a", "./objects/a",
		"/objects/a", "//objects/a", "objects\\a", "objects/a\\..\\..\\etc",
		"objects/a\x00b", "objects/a\nb", "objects/a\x7fb", "objects/a\xffb",
		"Objects/a", "objectsx/a", "_lake/tables/t/log/0", "data/a",
		"objects/" + strings.Repeat("k", MaxKeyLen),
	}
	for _, k := range bad {
		if err := ValidateObjectKey(k); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ValidateObjectKey(%q) = %v, want ErrInvalidKey", k, err)
		}
	}
	// ValidateKey alone accepts clean keys outside objects/.
	for _, k := range []string{"_lake/tables/t/log/00000000000000000001.json", "a"} {
		if err := ValidateKey(k); err != nil {
			t.Errorf("ValidateKey(%q) = %v, want nil", k, err)
		}
	}
}

// FuzzValidateObjectKey: an accepted key stays inside the stage root on
// any OS path join and under objects/.
func FuzzValidateObjectKey(f *testing.F) {
	for _, k := range []string{"objects/a", "objects/../a", "/objects/a", "objects\\a", "objects/a\x00", "objects//a", "objects/.", "data/a"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := ValidateObjectKey(key)
		if err != nil {
			if !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("error %v is not ErrInvalidKey", err)
			}
			if len(err.Error()) > 400 {
				t.Fatalf("error message of %d bytes", len(err.Error()))
			}
			return
		}
		switch {
		case !strings.HasPrefix(key, ObjectsPrefix) || len(key) == len(ObjectsPrefix):
			t.Fatalf("%q accepted outside objects/", key)
		case path.Clean(key) != key || !filepath.IsLocal(key) || !filepath.IsLocal(filepath.FromSlash(key)):
			t.Fatalf("%q accepted but not a clean local path", key)
		case !utf8.ValidString(key) || strings.ContainsAny(key, "\x00\\") || len(key) > MaxKeyLen:
			t.Fatalf("%q accepted", key)
		}
		for _, seg := range strings.Split(key, "/") {
			if seg == ".." || seg == "." || seg == "" {
				t.Fatalf("%q accepted with segment %q", key, seg)
			}
		}
	})
}
