package checkpoint_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/lakedata/lake/objects/checkpoint"
)

// marker stands for content that must never reach an error message.
const marker = "s3kr1t"

func TestDecodeRejects(t *testing.T) {
	good := string(mustEncode(t, valid()))
	replace := func(old, new string) string {
		t.Helper()
		if !strings.Contains(good, old) {
			t.Fatalf("%q not in the encoding", old)
		}
		return strings.Replace(good, old, new, 1)
	}
	const v1 = `"version": 2,` // the current version, then
	done := completed()
	done.Parts = done.Parts[:2] // invalid, so encode by hand
	tests := []struct {
		name string
		doc  string
		want error
	}{
		{"empty", "", checkpoint.ErrCorrupt},
		{"null", "null", checkpoint.ErrCorrupt},
		{"array", "[]", checkpoint.ErrCorrupt},
		{"string", `"` + marker + `"`, checkpoint.ErrCorrupt},
		{"empty object", "{}", checkpoint.ErrCorrupt},
		{"garbage", marker, checkpoint.ErrCorrupt},
		{"truncated", good[:len(good)/2], checkpoint.ErrCorrupt},
		{"unknown field", replace(v1, v1+` "extra": "`+marker+`",`), checkpoint.ErrCorrupt},
		{"unknown nested field", replace(`"path": `, `"extra": "`+marker+`", "path": `), checkpoint.ErrCorrupt},
		{"unknown field in a part", replace(`"number": 3,`, `"number": 3, "x": "`+marker+`",`), checkpoint.ErrCorrupt},
		{"known field at the wrong level", replace(v1, v1+` "path": "`+marker+`",`), checkpoint.ErrCorrupt},
		{"field name in another case", replace(`"source"`, `"Source"`), checkpoint.ErrCorrupt},
		{"version in another case", replace(`"version"`, `"Version"`), checkpoint.ErrCorrupt},
		{"duplicate field", replace(v1, v1+` "table": "`+marker+`",`), checkpoint.ErrCorrupt},
		{"duplicate version", replace(v1, v1+v1), checkpoint.ErrCorrupt},
		{"trailing garbage", good + marker, checkpoint.ErrCorrupt},
		{"second object", good + "{}", checkpoint.ErrCorrupt},
		{"trailing NUL", good + "\x00", checkpoint.ErrCorrupt},
		{"invalid UTF-8", replace("/home/ann", "/home/\xff"+marker), checkpoint.ErrCorrupt},
		{"too large", good + strings.Repeat(" ", checkpoint.MaxSize), checkpoint.ErrCorrupt},
		{"no version", replace(v1, ""), checkpoint.ErrCorrupt},
		{"version string", replace(v1, `"version": "1",`), checkpoint.ErrCorrupt},
		{"version float", replace(v1, `"version": 1.0,`), checkpoint.ErrCorrupt},
		{"version exponent", replace(v1, `"version": 1e0,`), checkpoint.ErrCorrupt},
		{"version 0", replace(v1, `"version": 0,`), checkpoint.ErrCorrupt},
		{"version negative", replace(v1, `"version": -1,`), checkpoint.ErrCorrupt},
		{"version huge", replace(v1, `"version": 99999999999999999999,`), checkpoint.ErrCorrupt},
		{"version object", replace(v1, `"version": {"a": "`+marker+`"},`), checkpoint.ErrCorrupt},
		{"version 3", replace(v1, `"version": 3,`), checkpoint.ErrUnknownVersion},
		{"version 3 with new fields", replace(v1, `"version": 3, "novelty": "`+marker+`",`), checkpoint.ErrUnknownVersion},
		{"no kind", replace(`"kind": "multipart",`, ""), checkpoint.ErrCorrupt},
		{"empty kind", replace(`"kind": "multipart",`, `"kind": "",`), checkpoint.ErrCorrupt},
		{"unknown kind", replace(`"kind": "multipart",`, `"kind": "`+marker+`",`), checkpoint.ErrCorrupt},
		{"kind in another case", replace(`"kind": "multipart",`, `"kind": "Multipart",`), checkpoint.ErrCorrupt},
		{"version 1 with a kind", replace(v1, `"version": 1,`), checkpoint.ErrCorrupt},
		{"wrong type", replace(`"size": 12582919`, `"size": "`+marker+`"`), checkpoint.ErrCorrupt},
		{"int32 overflow", replace(`"number": 3,`, `"number": 4294967299,`), checkpoint.ErrCorrupt},
		{"bad time", replace(`"mod_time": "2026-03-01T10:00:00.123456789Z"`, `"mod_time": "`+marker+`"`), checkpoint.ErrCorrupt},
		{"nested too deeply", replace(v1, v1+` "x": [[[[[[["`+marker+`"]]]]]]],`), checkpoint.ErrCorrupt},
		{"fails Validate", replace(`"number": 3,`, `"number": 2,`), checkpoint.ErrInvalid},
		{"fails Validate: upload id", replace(`"upload_id": "`, `"upload_id": "`+marker+`\n`), checkpoint.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp, err := checkpoint.Decode([]byte(tt.doc))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Decode = %v, %v; want %v", cp, err, tt.want)
			}
			if tt.want == checkpoint.ErrInvalid && !errors.Is(err, checkpoint.ErrCorrupt) {
				t.Errorf("%v is not ErrCorrupt", err)
			}
			if tt.want == checkpoint.ErrUnknownVersion && errors.Is(err, checkpoint.ErrCorrupt) {
				t.Errorf("%v: a newer version is not corrupt", err)
			}
			if strings.Contains(err.Error(), marker) {
				t.Errorf("message quotes the file: %v", err)
			}
		})
	}
}

func TestDecodeAccepts(t *testing.T) {
	good := mustEncode(t, valid())
	compact := new(bytes.Buffer)
	if err := json.Compact(compact, good); err != nil {
		t.Fatal(err)
	}
	for name, doc := range map[string][]byte{
		"as encoded":           good,
		"compact":              compact.Bytes(),
		"trailing whitespace":  append(append([]byte{}, good...), " \n\t\r\n"...),
		"leading whitespace":   append([]byte("\n  "), good...),
		"other time zone":      bytes.Replace(good, []byte(`"2026-03-01T10:00:00.123456789Z"`), []byte(`"2026-03-01T11:00:00.123456789+01:00"`), 1),
		"escaped slash in key": bytes.Replace(good, []byte(`"prod/objects/`), []byte(`"prod\/objects/`), 1),
	} {
		t.Run(name, func(t *testing.T) {
			cp, err := checkpoint.Decode(doc)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			sameCheckpoint(t, cp, valid())
		})
	}
}

// FuzzDecode: Decode never panics, fails only with its sentinels, and
// whatever it accepts encodes and decodes back to the same value.
func FuzzDecode(f *testing.F) {
	f.Add(mustEncode(f, valid()))
	f.Add(mustEncode(f, completed()))
	f.Add(mustEncode(f, single()))
	f.Add(mustEncode(f, granted()))
	f.Add(mustEncode(f, emptyGranted()))
	f.Add([]byte(`{"version": 3, "whatever": true}`))
	f.Add([]byte(`{"version": 1, "parts": [{"number": 1}], "x": [[[]]]}`))
	f.Add([]byte("\x00garbage{"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cp, err := checkpoint.Decode(b)
		if err != nil {
			if !errors.Is(err, checkpoint.ErrCorrupt) && !errors.Is(err, checkpoint.ErrUnknownVersion) {
				t.Fatalf("Decode error %v is neither ErrCorrupt nor ErrUnknownVersion", err)
			}
			return
		}
		enc, err := checkpoint.Encode(cp)
		if err != nil {
			t.Fatalf("Encode of a decoded checkpoint: %v", err)
		}
		again, err := checkpoint.Decode(enc)
		if err != nil {
			t.Fatalf("Decode of its encoding: %v\n%s", err, enc)
		}
		if !reflect.DeepEqual(cp, again) {
			t.Fatalf("roundtrip changed the checkpoint:\n%#v\n%#v", cp, again)
		}
		if enc2, _ := checkpoint.Encode(again); !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable:\n%s\n%s", enc, enc2)
		}
	})
}

// TestDecodeVersion1 decodes a checkpoint as the release before Kind wrote
// it: it is a multipart one, returned as Version 2, and the next Save
// writes it in the new format.
func TestDecodeVersion1(t *testing.T) {
	old, err := os.ReadFile(filepath.Join("testdata", "v1_completed.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(old, []byte(`"version": 1,`)) || bytes.Contains(old, []byte(`"kind"`)) {
		t.Fatal("testdata/v1_completed.json is not a version 1 checkpoint")
	}
	cp, err := checkpoint.Decode(old)
	if err != nil {
		t.Fatalf("Decode of a version 1 checkpoint: %v", err)
	}
	if cp.Version != checkpoint.Version || cp.Kind != checkpoint.KindMultipart {
		t.Fatalf("decoded as version %d kind %q, want %d %q", cp.Version, cp.Kind, checkpoint.Version, checkpoint.KindMultipart)
	}
	sameCheckpoint(t, cp, completed())

	// Saved again, it is a version 2 file naming its kind.
	enc := mustEncode(t, cp)
	if !bytes.Contains(enc, []byte(`"version": 2,`)) || !bytes.Contains(enc, []byte(`"kind": "multipart",`)) {
		t.Fatalf("re-encoded without version 2 and kind:\n%s", enc)
	}
	again, err := checkpoint.Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, cp) {
		t.Fatalf("version 1 → 2 → decode changed it:\n%#v\n%#v", cp, again)
	}

	// A version 1 file is still held to version 1's rules.
	bad := bytes.Replace(old, []byte(`"part_size": 5242880`), []byte(`"part_size": 5`), 1)
	if _, err := checkpoint.Decode(bad); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("Decode of a bad version 1 file = %v, want ErrCorrupt", err)
	}
}

// TestSingleRoundTrip: a KindSingle checkpoint encodes with its kind and
// decodes back unchanged, an empty file's included.
func TestSingleRoundTrip(t *testing.T) {
	for name, cp := range map[string]*checkpoint.Checkpoint{"small": single(), "empty": emptySingle()} {
		t.Run(name, func(t *testing.T) {
			enc := mustEncode(t, cp)
			if !bytes.Contains(enc, []byte(`"kind": "single",`)) {
				t.Fatalf("no kind in:\n%s", enc)
			}
			got, err := checkpoint.Decode(enc)
			if err != nil {
				t.Fatalf("Decode: %v\n%s", err, enc)
			}
			if !reflect.DeepEqual(got, cp) {
				t.Fatalf("roundtrip changed it:\n%#v\n%#v", cp, got)
			}
		})
	}
	// The single kind's rules hold in the file too.
	enc := mustEncode(t, single())
	for name, doc := range map[string][]byte{
		"with a bucket":     bytes.Replace(enc, []byte(`"bucket": ""`), []byte(`"bucket": "b"`), 1),
		"not completed":     bytes.Replace(enc, []byte(`"completed": true`), []byte(`"completed": false`), 1),
		"without commit id": bytes.Replace(enc, []byte(`"commit_id": "0195a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"`), []byte(`"commit_id": ""`), 1),
	} {
		if bytes.Equal(doc, enc) {
			t.Fatalf("%s: the replacement did not apply", name)
		}
		if _, err := checkpoint.Decode(doc); !errors.Is(err, checkpoint.ErrCorrupt) {
			t.Errorf("%s: Decode = %v, want ErrCorrupt", name, err)
		}
	}
}

// granted is a KindGranted checkpoint in flight: the whole file's SHA-256
// not known yet, a part found held by the stage (no ETag, no checksum).
func granted() *checkpoint.Checkpoint {
	cp := valid()
	cp.Kind = checkpoint.KindGranted
	cp.SHA256 = ""
	held := part(3, 2*mib+7)
	held.ETag, held.ChecksumSHA256 = "", ""
	cp.Parts[1] = held
	cp.CommitID = "0195a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	return cp
}

// emptyGranted is a completed KindGranted checkpoint of an empty file:
// one empty part, an object without an ETag.
func emptyGranted() *checkpoint.Checkpoint {
	cp := granted()
	cp.Source.Size = 0
	cp.SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	cp.Parts = []checkpoint.Part{{Number: 1, Length: 0, SHA256: cp.SHA256}}
	cp.Completed = true
	return cp
}

// TestGrantedRoundTrip: a KindGranted checkpoint encodes with its kind
// and decodes back unchanged; its own rules hold in the file.
func TestGrantedRoundTrip(t *testing.T) {
	for name, cp := range map[string]*checkpoint.Checkpoint{"in flight": granted(), "empty": emptyGranted()} {
		t.Run(name, func(t *testing.T) {
			enc := mustEncode(t, cp)
			if !bytes.Contains(enc, []byte(`"kind": "granted",`)) {
				t.Fatalf("no kind in:\n%s", enc)
			}
			got, err := checkpoint.Decode(enc)
			if err != nil {
				t.Fatalf("Decode: %v\n%s", err, enc)
			}
			if !reflect.DeepEqual(got, cp) {
				t.Fatalf("roundtrip changed it:\n%#v\n%#v", cp, got)
			}
		})
	}
	enc := mustEncode(t, granted())
	for name, doc := range map[string][]byte{
		"without an upload id": bytes.Replace(enc, []byte(`"upload_id": "VXBsb2FkIElEIGZvciBlbHZpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA"`), []byte(`"upload_id": ""`), 1),
		"without a bucket":     bytes.Replace(enc, []byte(`"bucket": "lake-stage"`), []byte(`"bucket": ""`), 1),
		"a bad sha256":         bytes.Replace(enc, []byte(`"sha256": "",`), []byte(`"sha256": "abc",`), 1),
		"another kind":         bytes.Replace(enc, []byte(`"kind": "granted"`), []byte(`"kind": "granted2"`), 1),
	} {
		if bytes.Equal(doc, enc) {
			t.Fatalf("%s: the replacement did not apply", name)
		}
		if _, err := checkpoint.Decode(doc); !errors.Is(err, checkpoint.ErrCorrupt) {
			t.Errorf("%s: Decode = %v, want ErrCorrupt", name, err)
		}
	}
	// Completed needs the whole file's SHA-256 and every part.
	cp := granted()
	cp.Completed = true
	if err := cp.Validate(); !errors.Is(err, checkpoint.ErrInvalid) {
		t.Errorf("completed without sha256: %v, want ErrInvalid", err)
	}
	cp.SHA256, _ = digest("whole file")
	if err := cp.Validate(); !errors.Is(err, checkpoint.ErrInvalid) {
		t.Errorf("completed with 2 of 3 parts: %v, want ErrInvalid", err)
	}
	// An empty part is only a granted upload's.
	e := emptyGranted()
	e.Kind = checkpoint.KindMultipart
	if err := e.Validate(); !errors.Is(err, checkpoint.ErrInvalid) {
		t.Errorf("an empty multipart upload: %v, want ErrInvalid", err)
	}
}
