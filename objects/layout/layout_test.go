package layout_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/lakedata/lake/objects/layout"
)

const id = "0195f3c1-7a2b-7c3d-8e4f-5a6b7c8d9e0f"

// TestKeys pins the key shapes other programs read (DESIGN §2): a
// listing of log/ must return versions in order, so the width is fixed.
func TestKeys(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{layout.CatalogKey("clips"), "_lake/catalog/clips.json"},
		{layout.TablePrefix(id), "_lake/tables/" + id + "/"},
		{layout.LogPrefix(id), "_lake/tables/" + id + "/log/"},
		{layout.LogKey(id, 0), "_lake/tables/" + id + "/log/00000000000000000000.json"},
		{layout.LogKey(id, 42), "_lake/tables/" + id + "/log/00000000000000000042.json"},
		{layout.LogKey(id, math.MaxInt64), "_lake/tables/" + id + "/log/09223372036854775807.json"},
		{layout.DataPrefix(id), "_lake/tables/" + id + "/data/"},
		{layout.DataKey(id, "f"), "_lake/tables/" + id + "/data/f.parquet"},
		{layout.CheckpointPrefix(id), "_lake/tables/" + id + "/checkpoints/"},
		{layout.CheckpointKey(id, 7), "_lake/tables/" + id + "/checkpoints/00000000000000000007.json"},
		{layout.LastCheckpointKey(id), "_lake/tables/" + id + "/checkpoints/_last.json"},
		{layout.MetadataPrefix(id), "_lake/tables/" + id + "/metadata/"},
		{layout.MetadataKey(id, "v3.metadata.json"), "_lake/tables/" + id + "/metadata/v3.metadata.json"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	if a, b := layout.LogKey(id, 9), layout.LogKey(id, 10); a >= b {
		t.Errorf("log keys sort out of version order: %q >= %q", a, b)
	}
}

func TestNewDataKey(t *testing.T) {
	a, b := layout.NewDataKey(id), layout.NewDataKey(id)
	if a == b {
		t.Fatalf("two data keys are both %q", a)
	}
	for _, k := range []string{a, b} {
		p, err := layout.Parse(k)
		if err != nil || p.Kind != layout.KindData || p.TableID != id || len(p.File) != 36 {
			t.Errorf("Parse(%q) = %+v, %v", k, p, err)
		}
		if !strings.HasPrefix(k, layout.DataPrefix(id)) {
			t.Errorf("%q is not under %q", k, layout.DataPrefix(id))
		}
	}
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		key  string
		want layout.Key
	}{
		{"_lake/catalog/clips.json", layout.Key{Kind: layout.KindCatalog, Name: "clips"}},
		{"_lake/catalog/_a1.json", layout.Key{Kind: layout.KindCatalog, Name: "_a1"}},
		{"_lake/tables/t/log/00000000000000000001.json", layout.Key{Kind: layout.KindLog, TableID: "t", Version: 1}},
		{"_lake/tables/" + id + "/log/09223372036854775807.json", layout.Key{Kind: layout.KindLog, TableID: id, Version: math.MaxInt64}},
		{"_lake/tables/t/data/a.parquet", layout.Key{Kind: layout.KindData, TableID: "t", File: "a"}},
		{"_lake/tables/t/checkpoints/00000000000000000100.json", layout.Key{Kind: layout.KindCheckpoint, TableID: "t", Version: 100}},
		{"_lake/tables/t/checkpoints/_last.json", layout.Key{Kind: layout.KindLastCheckpoint, TableID: "t"}},
		{"_lake/tables/t/metadata/v1.metadata.json", layout.Key{Kind: layout.KindMetadata, TableID: "t", File: "v1.metadata.json"}},
	} {
		got, err := layout.Parse(c.key)
		if err != nil || got != c.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", c.key, got, err, c.want)
			continue
		}
		if s := got.String(); s != c.key {
			t.Errorf("Parse(%q).String() = %q", c.key, s)
		}
	}
}

// TestParseRefuses: a near miss is not lake's, so a stray file in the
// stage never passes for a log record or a catalog entry.
func TestParseRefuses(t *testing.T) {
	for _, key := range []string{
		"", "_lake", "_lake/", "objects/a", "_lakex/catalog/a.json",
		"_lake/catalog/", "_lake/catalog/.json", "_lake/catalog/Clips.json", "_lake/catalog/1a.json",
		"_lake/catalog/a.JSON", "_lake/catalog/a", "_lake/catalog/sub/a.json",
		"_lake/tables/t", "_lake/tables/t/", "_lake/tables/t/log", "_lake/tables/t/log/",
		"_lake/tables/t/log/1.json", "_lake/tables/t/log/0000000000000000001.json",
		"_lake/tables/t/log/000000000000000000001.json", "_lake/tables/t/log/00000000000000000001",
		"_lake/tables/t/log/+0000000000000000001.json", "_lake/tables/t/log/-0000000000000000001.json",
		"_lake/tables/t/log/0000000000000000000a.json", "_lake/tables/t/log/99999999999999999999.json",
		"_lake/tables/t/log/09223372036854775808.json", "_lake/tables/t/log/_last.json", "_lake/tables/t/checkpoints/last.json",
		"_lake/tables/t/data/a.csv", "_lake/tables/t/data/.parquet", "_lake/tables/t/data/x/a.parquet",
		"_lake/tables/t/other/a", "_lake/tables//log/00000000000000000001.json",
		"_lake/tables/../log/00000000000000000001.json", "/_lake/catalog/a.json",
		"_lake/tables/t/metadata/", "_lake/tables/t/metadata/a/b", "_lake/tables/t/log/00000000000000000001.json/",
		"_lake/tables/t\x00/log/00000000000000000001.json", "_lake/tables/t\\u/data/a.parquet",
	} {
		if k, err := layout.Parse(key); !errors.Is(err, layout.ErrNotLayout) {
			t.Errorf("Parse(%q) = %+v, %v; want ErrNotLayout", key, k, err)
		}
	}
}

// FuzzParse: whatever Parse accepts, String gives back byte for byte, so
// two keys never parse to the same table and version.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"_lake/catalog/clips.json",
		"_lake/tables/t/log/00000000000000000001.json",
		"_lake/tables/" + id + "/data/" + id + ".parquet",
		"_lake/tables/t/checkpoints/00000000000000000100.json",
		"_lake/tables/t/metadata/v1.metadata.json",
		"_lake/tables/t/log/09223372036854775808.json", "_lake/tables/t/log/_last.json", "_lake/tables/t/checkpoints/last.json",
		"objects/2026/01/x/a.mp4",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		k, err := layout.Parse(key)
		if err != nil {
			if !errors.Is(err, layout.ErrNotLayout) {
				t.Fatalf("Parse(%q): %v is not ErrNotLayout", key, err)
			}
			return
		}
		if s := k.String(); s != key {
			t.Fatalf("Parse(%q).String() = %q", key, s)
		}
		if k.Version < 0 {
			t.Fatalf("Parse(%q): version %d", key, k.Version)
		}
	})
}

// FuzzLogKey: every log and checkpoint key built from a table id and a
// version parses back to them.
func FuzzLogKey(f *testing.F) {
	f.Add(id, int64(0))
	f.Add("t", int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, tableID string, version int64) {
		if version < 0 {
			return // LogKey's contract: never negative
		}
		if _, err := layout.Parse(layout.DataKey(tableID, "x")); err != nil {
			return // not a usable table id (a slash, a control character, ..)
		}
		for _, c := range []struct {
			key  string
			kind layout.Kind
		}{{layout.LogKey(tableID, version), layout.KindLog}, {layout.CheckpointKey(tableID, version), layout.KindCheckpoint}} {
			k, err := layout.Parse(c.key)
			if err != nil || k != (layout.Key{Kind: c.kind, TableID: tableID, Version: version}) {
				t.Fatalf("Parse(%q) = %+v, %v", c.key, k, err)
			}
		}
	})
}
