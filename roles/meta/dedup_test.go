package meta

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// grant asks the service for an upload grant.
func (f *fixture) grant(req *lakepb.UploadGrantRequest) *lakepb.UploadGrant {
	f.t.Helper()
	var g lakepb.UploadGrant
	if err := flightrpc.Action(context.Background(), f.fc, wire.ActionUploadGrant, req, &g); err != nil {
		f.t.Fatalf("grant: %v", err)
	}
	return &g
}

// uploadLocal uploads content the way a client of the local stage does:
// a grant, the file written at its key, a completion.
func (f *fixture) uploadLocal(table, name string, content []byte) *lakepb.UploadedFile {
	f.t.Helper()
	file, err := f.tryUploadLocal(table, name, content)
	if err != nil {
		f.t.Fatal(err)
	}
	return file
}

// tryUploadLocal is uploadLocal returning its error, for goroutines.
func (f *fixture) tryUploadLocal(table, name string, content []byte) (*lakepb.UploadedFile, error) {
	ctx := context.Background()
	var g lakepb.UploadGrant
	req := &lakepb.UploadGrantRequest{Table: table, FileName: name, Size: int64(len(content)), Sha256: sumHex(content), NoDedup: true, ContentType: "application/x-test"}
	if err := flightrpc.Action(ctx, f.fc, wire.ActionUploadGrant, req, &g); err != nil {
		return nil, fmt.Errorf("grant: %w", err)
	}
	if g.GetKey() == "" {
		return nil, fmt.Errorf("grant with no_dedup: no key: %v", &g)
	}
	if _, err := f.stage.Put(ctx, g.GetKey(), bytes.NewReader(content), objects.PutOptions{}); err != nil {
		return nil, err
	}
	var file lakepb.UploadedFile
	done := &lakepb.UploadCompleteRequest{Table: table, Key: g.GetKey(), Size: ptr(int64(len(content))), Sha256: sumHex(content), ContentType: "application/x-test"}
	if err := flightrpc.Action(ctx, f.fc, wire.ActionUploadComplete, done, &file); err != nil {
		return nil, fmt.Errorf("complete: %w", wire.FromStatus(err))
	}
	return &file, nil
}

// fileValue is the FILE value of an upload's answer, to append.
func fileValue(f *lakepb.UploadedFile) wire.FileValue {
	return wire.FileValue{Key: f.GetKey(), Size: f.GetSize(), SHA256: f.GetSha256(), ETag: f.GetEtag(),
		ContentType: f.GetContentType(), UploadedAt: time.UnixMicro(f.GetUploadedAtUnixMicros())}
}

// isFreshGrant tells whether g is an ordinary grant: a key, no dedup.
func isFreshGrant(g *lakepb.UploadGrant) bool {
	return g.GetKey() != "" && g.GetExisting() == nil && !g.GetHashFirst()
}

// On a local stage the completion's own read is dedup evidence: a second
// grant of the same sha256 and size answers the first object's FILE value
// and names no key; another size, a sha256 never read, no_dedup or an
// object gc is freeing get an ordinary grant; a grant without sha256 is
// told to hash first only when an object of its size is known; an entry
// whose object went away is dropped at the next lookup.
func TestDedupLocal(t *testing.T) {
	f := newFixture(t)
	logs := &lockedBuffer{}
	f.restartWith(func(c *Config) {
		noBackground(c)
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	f.createTable("clips")
	content := randomBytes(t, 3<<20)
	first := f.uploadLocal("clips", "a.bin", content)
	if first.GetSha256() != sumHex(content) {
		t.Fatalf("completed: %v", first)
	}

	same := &lakepb.UploadGrantRequest{Table: "clips", FileName: "b.bin", Size: int64(len(content)), Sha256: sumHex(content), ContentType: "text/plain"}
	g := f.grant(same)
	if !proto.Equal(g.GetExisting(), first) || g.GetKey() != "" || g.GetUploadId() != "" || len(g.GetUrls()) != 0 {
		t.Fatalf("a grant of the same content: %v, want existing %v", g, first)
	}
	if out := logs.String(); !strings.Contains(out, "upload deduplicated") || !strings.Contains(out, first.GetKey()) {
		t.Errorf("no dedup line naming the key in the log:\n%s", out)
	}
	// The answer makes a row.
	f.appendRows("clips", []string{"b"}, []wire.FileValue{fileValue(g.GetExisting())})

	for name, req := range map[string]*lakepb.UploadGrantRequest{
		"another size":            {Table: "clips", FileName: "c.bin", Size: int64(len(content)) + 1, Sha256: sumHex(content)},
		"another sha256":          {Table: "clips", FileName: "c.bin", Size: int64(len(content)), Sha256: sumHex([]byte("other"))},
		"no_dedup":                {Table: "clips", FileName: "c.bin", Size: int64(len(content)), Sha256: sumHex(content), NoDedup: true},
		"no sha256, another size": {Table: "clips", FileName: "c.bin", Size: 17},
	} {
		if g := f.grant(req); !isFreshGrant(g) || g.GetMode() != UploadLocal {
			t.Errorf("%s: %v, want an ordinary grant", name, g)
		}
	}
	if g := f.grant(&lakepb.UploadGrantRequest{Table: "clips", FileName: "c.bin", Size: int64(len(content))}); !g.GetHashFirst() || g.GetKey() != "" || g.GetExisting() != nil {
		t.Errorf("no sha256 for a known size: %v, want hash_first", g)
	}

	// An object gc is freeing is never answered.
	f.svc.gc.mu.Lock()
	f.svc.gc.doomed = map[string]bool{first.GetKey(): true}
	f.svc.gc.mu.Unlock()
	if g := f.grant(same); !isFreshGrant(g) {
		t.Errorf("while gc frees the object: %v, want an ordinary grant", g)
	}
	f.svc.gc.mu.Lock()
	f.svc.gc.doomed = nil
	f.svc.gc.mu.Unlock()
	if g := f.grant(same); g.GetExisting() == nil {
		t.Fatalf("after gc let go of it: %v, want existing again", g)
	}

	// The object vanishes: no hit, and the entry goes.
	if err := os.Remove(f.stagePath(first.GetKey())); err != nil {
		t.Fatal(err)
	}
	if g := f.grant(same); !isFreshGrant(g) {
		t.Errorf("with the object gone: %v, want an ordinary grant", g)
	}
	if has, err := f.svc.ix.dedupHasSize(int64(len(content))); err != nil || has {
		t.Errorf("the stale entry is still there (%t, %v)", has, err)
	}
}

func mustReadEvidence(t testing.TB, size int64, sum string) dedupEvidence {
	t.Helper()
	e, err := readEvidence(size, sum)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func mustPartsEvidence(t testing.TB, size int64, sum string, partSize int64, digest string) dedupEvidence {
	t.Helper()
	e, err := partsEvidence(size, sum, partSize, digest)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// The index finds entries by exactly their evidence, probes by size, and
// drops every entry of an object and only those; it is rebuilt empty with
// the rest of the index (derived state).
func TestDedupIndex(t *testing.T) {
	f := newFixture(t)
	f.restartWith(noBackground)
	ix := f.svc.ix
	sumA, sumB := sumHex([]byte("a")), sumHex([]byte("b"))
	dA, dB := sumHex([]byte("parts of a")), sumHex([]byte("parts of b"))
	a := dedupValue{Key: "objects/a", Size: 10, SHA256: sumA, ETag: "e1", ContentType: "x/y", UploadedAt: 7}
	a2 := dedupValue{Key: "objects/a2", Size: 10, SHA256: sumA}
	b := dedupValue{Key: "objects/b", Size: 10, SHA256: sumB}
	for _, put := range []struct {
		e dedupEvidence
		v dedupValue
	}{
		{mustPartsEvidence(t, 10, sumA, 5, dA), a},
		{mustReadEvidence(t, 10, sumA), a},
		{mustReadEvidence(t, 10, sumA), a2},
		{mustPartsEvidence(t, 10, sumB, 5, dB), b},
	} {
		if err := ix.putDedup(put.e, put.v); err != nil {
			t.Fatal(err)
		}
	}
	keys := func(e dedupEvidence) []string {
		t.Helper()
		cs, err := ix.dedupCandidates(e)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range cs {
			out = append(out, c.value.Key)
		}
		return out
	}
	for name, c := range map[string]struct {
		e    dedupEvidence
		want string
	}{
		"parts of a":             {mustPartsEvidence(t, 10, sumA, 5, dA), "objects/a"},
		"read a":                 {mustReadEvidence(t, 10, sumA), "objects/a objects/a2"},
		"a with b's parts":       {mustPartsEvidence(t, 10, sumA, 5, dB), ""},
		"a at another part size": {mustPartsEvidence(t, 10, sumA, 6, dA), ""},
		"a of another size":      {mustReadEvidence(t, 11, sumA), ""},
		"read b (parts only)":    {mustReadEvidence(t, 10, sumB), ""},
	} {
		if got := strings.Join(keys(c.e), " "); got != c.want {
			t.Errorf("%s: %q, want %q", name, got, c.want)
		}
	}
	if v, ok := ix.dedupOf("objects/a"); !ok || v != a {
		t.Errorf("dedupOf: %+v, %t", v, ok)
	}
	for size, want := range map[int64]bool{10: true, 9: false, 11: false, 0: false} {
		if has, err := ix.dedupHasSize(size); err != nil || has != want {
			t.Errorf("size %d: %t, %v", size, has, err)
		}
	}
	if err := ix.dropDedup("objects/a", "objects/never"); err != nil {
		t.Fatal(err)
	}
	if got := keys(mustPartsEvidence(t, 10, sumA, 5, dA)); len(got) != 0 {
		t.Errorf("after dropping a: %v", got)
	}
	if got := strings.Join(keys(mustReadEvidence(t, 10, sumA)), " "); got != "objects/a2" {
		t.Errorf("after dropping a, read evidence finds %q", got)
	}
	if got := keys(mustPartsEvidence(t, 10, sumB, 5, dB)); len(got) != 1 {
		t.Errorf("dropping a took b: %v", got)
	}
	if _, ok := ix.dedupOf("objects/a"); ok {
		t.Error("a back reference outlived its object's entries")
	}
	// A value that does not fit its key is never answered.
	if err := ix.putDedup(mustReadEvidence(t, 10, sumB), dedupValue{Key: "objects/c", Size: 11, SHA256: sumB}); err != nil {
		t.Fatal(err)
	}
	if got := keys(mustReadEvidence(t, 10, sumB)); len(got) != 0 {
		t.Errorf("a value of another size was answered: %v", got)
	}

	f.rebuild()
	if has, err := f.svc.ix.dedupHasSize(10); err != nil || has {
		t.Errorf("after a rebuild of the index: %t, %v", has, err)
	}
}

// partDigest is SHA-256 over the raw part sums in part order, whatever
// order the parts come in.
func TestPartDigest(t *testing.T) {
	p1, p2 := []byte("one"), []byte("two")
	s1, s2 := sha256.Sum256(p1), sha256.Sum256(p2)
	want := sumHex(append(s1[:], s2[:]...))
	for _, parts := range [][]objects.GrantPart{
		{{Number: 1, SHA256: sumHex(p1)}, {Number: 2, SHA256: sumHex(p2)}},
		{{Number: 2, SHA256: sumHex(p2)}, {Number: 1, SHA256: sumHex(p1)}},
	} {
		if got, err := partDigest(parts); err != nil || got != want {
			t.Errorf("%v: %s, %v, want %s", parts, got, err, want)
		}
	}
	if _, err := partDigest([]objects.GrantPart{{Number: 1, SHA256: "nope"}}); err == nil {
		t.Error("a part without a sum made a digest")
	}
}

// FuzzDecodeDedupValue: whatever the bytes in the index, decoding never
// panics, and what it accepts is a FILE value an append would take (a
// clean object key, a size, a sha256) that encodes back to itself.
func FuzzDecodeDedupValue(f *testing.F) {
	seed := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed(dedupValue{Key: "objects/2026/a.bin", Size: 3, SHA256: sumHex([]byte("abc")), ETag: "x", ContentType: "a/b", UploadedAt: 1})
	seed(dedupValue{Key: "objects/../x", Size: 3, SHA256: sumHex(nil)})
	seed(dedupValue{Key: "data/x", Size: 3, SHA256: sumHex(nil)})
	seed(dedupValue{Key: "objects/x", Size: -1, SHA256: sumHex(nil)})
	seed(dedupValue{Key: "objects/x", Size: 1, SHA256: strings.ToUpper(sumHex(nil))})
	seed(map[string]any{"key": "objects/x", "size": "1"})
	f.Add([]byte("{"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		v, err := decodeDedupValue(raw)
		if err != nil {
			return
		}
		if (wire.FileValue{Key: v.Key, Size: v.Size, SHA256: v.SHA256}).Validate() != nil {
			t.Fatalf("accepted %+v, which is no FILE value", v)
		}
		again, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodeDedupValue(again)
		if err != nil || back != v {
			t.Fatalf("%+v encodes to %s, which decodes to %+v, %v", v, again, back, err)
		}
	})
}
