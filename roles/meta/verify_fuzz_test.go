package meta

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

func hashState(t testing.TB, data []byte) []byte {
	h := sha256.New()
	h.Write(data)
	b, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzDecodeVerifyCursor: a cursor comes from the client. Whatever the
// bytes, decoding never panics, refuses with ErrInvalidRequest, and what
// it accepts is a cursor verify can resume from: object keys, a partial
// read after the last key, and a hash state that loads.
func FuzzDecodeVerifyCursor(f *testing.F) {
	seed := func(c *lakepb.VerifyCursor) {
		b, err := proto.Marshal(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed(&lakepb.VerifyCursor{TableId: "t", Version: 3})
	seed(&lakepb.VerifyCursor{TableId: "t", Version: 3, AllVersions: true, After: "objects/a"})
	seed(&lakepb.VerifyCursor{TableId: "t", Version: 3, After: "objects/a", PartialKey: "objects/b", PartialOffset: 5, PartialState: hashState(f, []byte("hello"))})
	seed(&lakepb.VerifyCursor{TableId: "t", Version: 3, PartialKey: "objects/b", PartialOffset: 5, PartialState: []byte("sha\x03 too short")})
	seed(&lakepb.VerifyCursor{TableId: "t", Version: -1})
	seed(&lakepb.VerifyCursor{TableId: "t", After: "../etc/passwd"})
	seed(&lakepb.VerifyCursor{TableId: "t", After: "objects/b", PartialKey: "objects/a", PartialOffset: 1, PartialState: hashState(f, []byte("x"))})
	f.Add([]byte("\xff\xfe not protobuf"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := decodeVerifyCursor(raw)
		if err != nil {
			if !errors.Is(err, wire.ErrInvalidRequest) {
				t.Fatalf("error %v does not wrap ErrInvalidRequest", err)
			}
			return
		}
		if c == nil {
			if len(raw) != 0 {
				t.Fatal("a non-empty cursor decoded to none")
			}
			return
		}
		if c.GetTableId() == "" || c.GetVersion() < 0 {
			t.Fatalf("accepted %v", c)
		}
		if a := c.GetAfter(); a != "" && wire.ValidateObjectKey(a) != nil {
			t.Fatalf("accepted last key %q", a)
		}
		if k := c.GetPartialKey(); k != "" {
			if wire.ValidateObjectKey(k) != nil || k <= c.GetAfter() || c.GetPartialOffset() <= 0 {
				t.Fatalf("accepted partial read %q at %d after %q", k, c.GetPartialOffset(), c.GetAfter())
			}
			if err := sha256.New().(encoding.BinaryUnmarshaler).UnmarshalBinary(c.GetPartialState()); err != nil {
				t.Fatalf("accepted a hash state that does not load: %v", err)
			}
		}
		// What was accepted survives a round trip.
		again, err := proto.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := decodeVerifyCursor(again)
		if err != nil || !proto.Equal(c, c2) {
			t.Fatalf("round trip: %v, %v", c2, err)
		}
	})
}

// FuzzDecodeVerifyRecord: a record of the index decodes only if it is one
// the verifier could have written, so Verified never hands deduplication a
// match without a sum.
func FuzzDecodeVerifyRecord(f *testing.F) {
	at := time.Unix(1_700_000_000, 0).UTC()
	sum := strings.Repeat("ab", 32)
	for _, r := range []verifyRecord{
		{Size: 10, SHA256: sum, VerifiedAt: at, Match: true},
		{Size: 10, SHA256: sum, VerifiedAt: at, Problem: lakepb.VerifyProblem_VERIFY_PROBLEM_SHA256_DIFFERS.String()},
		{VerifiedAt: at, Problem: lakepb.VerifyProblem_VERIFY_PROBLEM_OBJECT_MISSING.String()},
		{Size: 10, VerifiedAt: at, Match: true},
		{Size: -1, SHA256: sum, VerifiedAt: at, Match: true},
		{Size: 10, SHA256: strings.ToUpper(sum), VerifiedAt: at, Match: true},
		{Size: 10, SHA256: sum, VerifiedAt: at, Problem: "VERIFY_PROBLEM_UNSPECIFIED"},
	} {
		b, err := json.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"size":1e400}`))
	f.Add([]byte(`null`))
	f.Add([]byte("\x00"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := decodeVerifyRecord(raw)
		if err != nil {
			return
		}
		if r.Size < 0 || r.VerifiedAt.IsZero() {
			t.Fatalf("accepted %+v", r)
		}
		if r.SHA256 != "" && !wire.IsSHA256Hex(r.SHA256) {
			t.Fatalf("accepted sum %q", r.SHA256)
		}
		if r.Match != (r.Problem == "") || (r.Match && r.SHA256 == "") {
			t.Fatalf("accepted an inconsistent record %+v", r)
		}
		// A record that decodes is one putVerified writes the same way.
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := decodeVerifyRecord(b)
		if err != nil || !bytes.Equal(b, mustJSON(t, r2)) {
			t.Fatalf("round trip: %+v, %v", r2, err)
		}
	})
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
