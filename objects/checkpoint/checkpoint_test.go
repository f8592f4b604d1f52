package checkpoint_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lakedata/lake/objects/checkpoint"
)

const mib = 1 << 20

// digest returns the hex and base64 forms of the SHA-256 of s.
func digest(s string) (hexSum, b64 string) {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:]), base64.StdEncoding.EncodeToString(sum[:])
}

func part(n int32, length int64) checkpoint.Part {
	h, b := digest(fmt.Sprint("part ", n))
	return checkpoint.Part{Number: n, Length: length, ETag: fmt.Sprintf("%q", h[:32]), ChecksumSHA256: b, SHA256: h}
}

// valid returns a valid checkpoint of a 12 MiB + 7 byte file in three
// parts of 5 MiB, of which 1 and 3 are finished: parts finish out of order.
func valid() *checkpoint.Checkpoint {
	whole, _ := digest("whole file")
	return &checkpoint.Checkpoint{
		Version: checkpoint.Version,
		Source: checkpoint.Source{
			Path:    "/home/ann/data/big.parquet",
			Size:    12*mib + 7,
			ModTime: time.Date(2026, 3, 1, 10, 0, 0, 123456789, time.UTC),
		},
		Binding: checkpoint.Binding{
			Bucket:   "lake-stage",
			Prefix:   "prod",
			Key:      "prod/objects/2026/03/0195a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b/big.parquet",
			UploadID: "VXBsb2FkIElEIGZvciBlbHZpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA",
		},
		PartSize:    5 * mib,
		SHA256:      whole,
		ContentType: "application/vnd.apache.parquet",
		Parts:       []checkpoint.Part{part(1, 5*mib), part(3, 2*mib+7)},
		Table:       "files",
		UpdatedAt:   time.Date(2026, 3, 1, 10, 0, 5, 0, time.UTC),
	}
}

// completed returns valid() with every part finished and Complete done.
func completed() *checkpoint.Checkpoint {
	cp := valid()
	cp.Parts = []checkpoint.Part{part(1, 5*mib), part(2, 5*mib), part(3, 2*mib+7)}
	cp.Completed = true
	cp.ETag = `"3858f62230ac3c915f300c664312c11f-3"`
	cp.CommitID = "0195a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	return cp
}

// single is a KindSingle checkpoint: an object uploaded in one request,
// recorded before its append.
func single() *checkpoint.Checkpoint {
	whole, _ := digest("whole file")
	return &checkpoint.Checkpoint{
		Version: checkpoint.Version,
		Kind:    checkpoint.KindSingle,
		Source: checkpoint.Source{
			Path:    "/home/ann/data/small.jpg",
			Size:    64 << 10,
			ModTime: time.Date(2026, 3, 1, 10, 0, 0, 123456789, time.UTC),
		},
		Binding:     checkpoint.Binding{Key: "objects/2026/03/0195a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b/small.jpg"},
		SHA256:      whole,
		ContentType: "image/jpeg",
		Completed:   true,
		ETag:        "18a9c3e1d2b4f000-10000",
		CommitID:    "0195a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
		Table:       "files",
		UpdatedAt:   time.Date(2026, 3, 1, 10, 0, 5, 0, time.UTC),
	}
}

// emptySingle is single() of an empty file on a stage without ETags.
func emptySingle() *checkpoint.Checkpoint {
	cp := single()
	cp.Source.Size = 0
	cp.SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	cp.ETag = ""
	return cp
}

func TestValidateSingle(t *testing.T) {
	for name, cp := range map[string]*checkpoint.Checkpoint{"single": single(), "empty": emptySingle()} {
		if err := cp.Validate(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	tests := []struct {
		name  string
		edit  func(cp *checkpoint.Checkpoint)
		field string // must appear in the message
	}{
		{"bucket", func(cp *checkpoint.Checkpoint) { cp.Binding.Bucket = "lake-stage" }, "binding"},
		{"prefix", func(cp *checkpoint.Checkpoint) { cp.Binding.Prefix = "prod" }, "binding"},
		{"upload id", func(cp *checkpoint.Checkpoint) { cp.Binding.UploadID = "u" }, "binding"},
		{"key empty", func(cp *checkpoint.Checkpoint) { cp.Binding.Key = "" }, "binding.key"},
		{"key unclean", func(cp *checkpoint.Checkpoint) { cp.Binding.Key = "objects/../x" }, "binding.key"},
		{"part size", func(cp *checkpoint.Checkpoint) { cp.PartSize = 5 * mib }, "part_size"},
		{"parts", func(cp *checkpoint.Checkpoint) { cp.Parts = []checkpoint.Part{part(1, 64<<10)} }, "parts"},
		{"not completed", func(cp *checkpoint.Checkpoint) { cp.Completed = false }, "completed"},
		{"size negative", func(cp *checkpoint.Checkpoint) { cp.Source.Size = -1 }, "source.size"},
		{"no mtime", func(cp *checkpoint.Checkpoint) { cp.Source.ModTime = time.Time{} }, "source.mod_time"},
		{"sha256 empty", func(cp *checkpoint.Checkpoint) { cp.SHA256 = "" }, "sha256"},
		{"etag control", func(cp *checkpoint.Checkpoint) { cp.ETag = "a\nb" }, "etag"},
		{"commit id empty", func(cp *checkpoint.Checkpoint) { cp.CommitID = "" }, "commit_id"},
		{"table empty", func(cp *checkpoint.Checkpoint) { cp.Table = "" }, "table"},
		{"table invalid", func(cp *checkpoint.Checkpoint) { cp.Table = "Bad-Name" }, "table"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp := single()
			tt.edit(cp)
			err := cp.Validate()
			if !errors.Is(err, checkpoint.ErrInvalid) {
				t.Fatalf("Validate = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("Validate = %v, want it to name %s", err, tt.field)
			}
		})
	}
}

func mustEncode(t testing.TB, cp *checkpoint.Checkpoint) []byte {
	t.Helper()
	b, err := checkpoint.Encode(cp)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	return b
}

// sameCheckpoint compares through the encoding, which normalizes time zones.
func sameCheckpoint(t *testing.T, got, want *checkpoint.Checkpoint) {
	t.Helper()
	g, w := mustEncode(t, got), mustEncode(t, want)
	if !bytes.Equal(g, w) {
		t.Fatalf("checkpoints differ:\ngot  %s\nwant %s", g, w)
	}
}

// sameSaved is sameCheckpoint but for UpdatedAt, which Save stamps.
func sameSaved(t *testing.T, got, want *checkpoint.Checkpoint) {
	t.Helper()
	if got == nil {
		t.Fatal("no checkpoint")
	}
	g := *got
	g.UpdatedAt = want.UpdatedAt
	sameCheckpoint(t, &g, want)
}

func TestEncodeDecodeRoundtrip(t *testing.T) {
	local := valid()
	local.Source.ModTime = local.Source.ModTime.In(time.FixedZone("CET", 3600))
	noParts := valid()
	noParts.Parts = nil
	noChecksum := valid()
	noChecksum.Parts[0].ChecksumSHA256 = ""
	noPrefix := valid()
	noPrefix.Binding.Prefix = ""
	noPrefix.Binding.Key = "objects/a/b"
	onePart := valid()
	onePart.Source.Size = 1
	onePart.Parts = []checkpoint.Part{part(1, 1)}
	onePart.Completed, onePart.ETag = true, `"e"`
	for name, cp := range map[string]*checkpoint.Checkpoint{
		"valid": valid(), "completed": completed(), "local time": local, "no parts": noParts,
		"no checksum": noChecksum, "no prefix": noPrefix, "one byte": onePart,
	} {
		t.Run(name, func(t *testing.T) {
			b := mustEncode(t, cp)
			got, err := checkpoint.Decode(b)
			if err != nil {
				t.Fatalf("Decode: %v\n%s", err, b)
			}
			sameCheckpoint(t, got, cp)
			if !got.Source.ModTime.Equal(cp.Source.ModTime) || got.Source.ModTime.Location() != time.UTC {
				t.Errorf("mod_time %v, want %v in UTC", got.Source.ModTime, cp.Source.ModTime)
			}
			if !bytes.HasPrefix(b, []byte("{\n  \"version\": 2,\n  \"kind\": \"multipart\",\n")) {
				t.Errorf("encoding does not start with the version and kind:\n%s", b)
			}
		})
	}
}

func TestEncodeDoesNotModify(t *testing.T) {
	cp := valid()
	cp.Parts = nil
	zone := time.FixedZone("X", -7200)
	cp.Source.ModTime = cp.Source.ModTime.In(zone)
	mustEncode(t, cp)
	if cp.Parts != nil || cp.Source.ModTime.Location() != zone {
		t.Fatal("Encode modified its argument")
	}
}

func TestEncodeHoldsNoSecrets(t *testing.T) {
	b := mustEncode(t, completed())
	lower := strings.ToLower(string(b))
	for _, w := range []string{"secret", "token", "password", "passwd", "credential", "x-amz-signature", "x-amz-credential", "signature", "authorization", "access_key", "session"} {
		if strings.Contains(lower, w) {
			t.Errorf("encoded checkpoint contains %q:\n%s", w, b)
		}
	}
}

func TestValidate(t *testing.T) {
	if err := valid().Validate(); err != nil {
		t.Fatalf("valid: %v", err)
	}
	if err := completed().Validate(); err != nil {
		t.Fatalf("completed: %v", err)
	}
	_, otherB64 := digest("other")
	b64of16 := base64.StdEncoding.EncodeToString(make([]byte, 16))
	tests := []struct {
		name  string
		edit  func(cp *checkpoint.Checkpoint)
		field string // must appear in the message
		want  error
	}{
		{"version 0", func(cp *checkpoint.Checkpoint) { cp.Version = 0 }, "version", checkpoint.ErrInvalid},
		{"version 1", func(cp *checkpoint.Checkpoint) { cp.Version = 1 }, "version 1", checkpoint.ErrUnknownVersion},
		{"version 3", func(cp *checkpoint.Checkpoint) { cp.Version = 3 }, "version 3", checkpoint.ErrUnknownVersion},
		{"kind unknown", func(cp *checkpoint.Checkpoint) { cp.Kind = "resumable" }, "kind", nil},
		{"path empty", func(cp *checkpoint.Checkpoint) { cp.Source.Path = "" }, "source.path", nil},
		{"path relative", func(cp *checkpoint.Checkpoint) { cp.Source.Path = "data/big.parquet" }, "source.path", nil},
		{"path unclean", func(cp *checkpoint.Checkpoint) { cp.Source.Path = "/home/ann/../ann/x" }, "source.path", nil},
		{"path trailing slash", func(cp *checkpoint.Checkpoint) { cp.Source.Path = "/home/ann/" }, "source.path", nil},
		{"path not UTF-8", func(cp *checkpoint.Checkpoint) { cp.Source.Path = "/home/\xff" }, "source.path", nil},
		{"path NUL", func(cp *checkpoint.Checkpoint) { cp.Source.Path = "/home/a\x00b" }, "source.path", nil},
		{"path too long", func(cp *checkpoint.Checkpoint) { cp.Source.Path = "/" + strings.Repeat("a", 5000) }, "source.path", nil},
		{"size 0", func(cp *checkpoint.Checkpoint) { cp.Source.Size, cp.Parts = 0, nil }, "source.size", nil},
		{"size negative", func(cp *checkpoint.Checkpoint) { cp.Source.Size, cp.Parts = -1, nil }, "source.size", nil},
		{"mod_time zero", func(cp *checkpoint.Checkpoint) { cp.Source.ModTime = time.Time{} }, "source.mod_time", nil},
		{"mod_time year 10000", func(cp *checkpoint.Checkpoint) { cp.Source.ModTime = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, "source.mod_time", nil},
		{"bucket empty", func(cp *checkpoint.Checkpoint) { cp.Binding.Bucket = "" }, "binding.bucket", nil},
		{"bucket slash", func(cp *checkpoint.Checkpoint) { cp.Binding.Bucket = "a/b" }, "binding.bucket", nil},
		{"bucket control", func(cp *checkpoint.Checkpoint) { cp.Binding.Bucket = "a\nb" }, "binding.bucket", nil},
		{"prefix control", func(cp *checkpoint.Checkpoint) { cp.Binding.Prefix = "a\tb" }, "binding.prefix", nil},
		{"prefix not UTF-8", func(cp *checkpoint.Checkpoint) { cp.Binding.Prefix = "\xfe" }, "binding.prefix", nil},
		{"key empty", func(cp *checkpoint.Checkpoint) { cp.Binding.Key = "" }, "binding.key", nil},
		{"key dotdot", func(cp *checkpoint.Checkpoint) { cp.Binding.Key = "objects/../x" }, "binding.key", nil},
		{"key absolute", func(cp *checkpoint.Checkpoint) { cp.Binding.Key = "/objects/x" }, "binding.key", nil},
		{"upload id empty", func(cp *checkpoint.Checkpoint) { cp.Binding.UploadID = "" }, "binding.upload_id", nil},
		{"upload id control", func(cp *checkpoint.Checkpoint) { cp.Binding.UploadID = "a\x7f" }, "binding.upload_id", nil},
		{"upload id too long", func(cp *checkpoint.Checkpoint) { cp.Binding.UploadID = strings.Repeat("u", 1025) }, "binding.upload_id", nil},
		{"part size below 5 MiB", func(cp *checkpoint.Checkpoint) { cp.PartSize = 5*mib - 1 }, "part_size", nil},
		{"part size above 5 GiB", func(cp *checkpoint.Checkpoint) { cp.PartSize = 5<<30 + 1; cp.Parts = nil }, "part_size", nil},
		{"more than 10000 parts", func(cp *checkpoint.Checkpoint) { cp.Source.Size = 10000*5*mib + 1 }, "10001 parts", nil},
		{"sha256 empty", func(cp *checkpoint.Checkpoint) { cp.SHA256 = "" }, "sha256", nil},
		{"sha256 upper case", func(cp *checkpoint.Checkpoint) { cp.SHA256 = strings.ToUpper(cp.SHA256) }, "sha256", nil},
		{"sha256 short", func(cp *checkpoint.Checkpoint) { cp.SHA256 = cp.SHA256[:63] }, "sha256", nil},
		{"content type control", func(cp *checkpoint.Checkpoint) { cp.ContentType = "text/plain\r\nX: y" }, "content_type", nil},
		{"part number 0", func(cp *checkpoint.Checkpoint) { cp.Parts[0].Number = 0 }, "parts[0].number", nil},
		{"part number 10001", func(cp *checkpoint.Checkpoint) { cp.Parts[1].Number = 10001 }, "parts[1].number", nil},
		{"part number negative", func(cp *checkpoint.Checkpoint) { cp.Parts[0].Number = -1 }, "parts[0].number", nil},
		{"part duplicate", func(cp *checkpoint.Checkpoint) { cp.Parts[1] = cp.Parts[0] }, "parts[1].number", nil},
		{"parts unsorted", func(cp *checkpoint.Checkpoint) { cp.Parts[0], cp.Parts[1] = cp.Parts[1], cp.Parts[0] }, "parts[1].number", nil},
		{"part beyond the last", func(cp *checkpoint.Checkpoint) { cp.Parts = append(cp.Parts, part(4, 5*mib)) }, "parts[2].number", nil},
		{"part length 0", func(cp *checkpoint.Checkpoint) { cp.Parts[0].Length = 0 }, "parts[0].length", nil},
		{"part length negative", func(cp *checkpoint.Checkpoint) { cp.Parts[0].Length = -5 }, "parts[0].length", nil},
		{"part shorter than part size", func(cp *checkpoint.Checkpoint) { cp.Parts[0].Length = 5*mib - 1 }, "parts[0].length", nil},
		{"part longer than part size", func(cp *checkpoint.Checkpoint) { cp.Parts[0].Length = 5*mib + 1 }, "parts[0].length", nil},
		{"last part wrong remainder", func(cp *checkpoint.Checkpoint) { cp.Parts[1].Length = 2 * mib }, "parts[1].length", nil},
		{"last part full size", func(cp *checkpoint.Checkpoint) { cp.Parts[1].Length = 5 * mib }, "parts[1].length", nil},
		{"part etag empty", func(cp *checkpoint.Checkpoint) { cp.Parts[1].ETag = "" }, "parts[1].etag", nil},
		{"part etag too long", func(cp *checkpoint.Checkpoint) { cp.Parts[1].ETag = strings.Repeat("e", 300) }, "parts[1].etag", nil},
		{"part sha256 bad", func(cp *checkpoint.Checkpoint) { cp.Parts[0].SHA256 = "xyz" }, "parts[0].sha256", nil},
		{"part sha256 empty", func(cp *checkpoint.Checkpoint) { cp.Parts[0].SHA256 = "" }, "parts[0].sha256", nil},
		{"checksum not base64", func(cp *checkpoint.Checkpoint) { cp.Parts[0].ChecksumSHA256 = "not base64!" }, "parts[0].checksum_sha256", nil},
		{"checksum unpadded", func(cp *checkpoint.Checkpoint) {
			cp.Parts[0].ChecksumSHA256 = strings.TrimRight(cp.Parts[0].ChecksumSHA256, "=")
		}, "parts[0].checksum_sha256", nil},
		{"checksum of 16 bytes", func(cp *checkpoint.Checkpoint) { cp.Parts[0].ChecksumSHA256 = b64of16 }, "parts[0].checksum_sha256", nil},
		{"checksum disagrees with sha256", func(cp *checkpoint.Checkpoint) { cp.Parts[0].ChecksumSHA256 = otherB64 }, "parts[0].checksum_sha256", nil},
		{"completed with a part missing", func(cp *checkpoint.Checkpoint) { cp.Completed, cp.ETag = true, `"e"` }, "completed with 2 of 3 parts", nil},
		{"completed without etag", func(cp *checkpoint.Checkpoint) { *cp = *completed(); cp.ETag = "" }, "etag", nil},
		{"etag without completed", func(cp *checkpoint.Checkpoint) { cp.ETag = `"e"` }, "etag", nil},
		{"commit id too long", func(cp *checkpoint.Checkpoint) { cp.CommitID = strings.Repeat("c", 129) }, "commit_id", nil},
		{"commit id control", func(cp *checkpoint.Checkpoint) { cp.CommitID = "a\x00" }, "commit_id", nil},
		{"table invalid", func(cp *checkpoint.Checkpoint) { cp.Table = "Bad-Name" }, "table", nil},
		{"updated_at year -1", func(cp *checkpoint.Checkpoint) { cp.UpdatedAt = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC) }, "updated_at", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp := valid()
			tt.edit(cp)
			err := cp.Validate()
			want := tt.want
			if want == nil {
				want = checkpoint.ErrInvalid
			}
			if !errors.Is(err, want) {
				t.Fatalf("Validate = %v, want %v", err, want)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("message %q does not name %q", err, tt.field)
			}
			// Encode refuses what Validate refuses.
			if _, err := checkpoint.Encode(cp); !errors.Is(err, want) {
				t.Errorf("Encode = %v, want %v", err, want)
			}
		})
	}
	var nilCP *checkpoint.Checkpoint
	if err := nilCP.Validate(); !errors.Is(err, checkpoint.ErrInvalid) {
		t.Errorf("nil.Validate = %v", err)
	}
}

func TestValidateNeverQuotes(t *testing.T) {
	const marker = "s3kr1t"
	for _, edit := range []func(cp *checkpoint.Checkpoint){
		func(cp *checkpoint.Checkpoint) { cp.Binding.UploadID = marker + "\n" },
		func(cp *checkpoint.Checkpoint) { cp.Binding.Key = "../" + marker },
		func(cp *checkpoint.Checkpoint) { cp.Source.Path = marker },
		func(cp *checkpoint.Checkpoint) { cp.SHA256 = marker },
		func(cp *checkpoint.Checkpoint) { cp.Table = marker + "!" },
		func(cp *checkpoint.Checkpoint) { cp.Parts[0].ETag = marker + "\x01" },
		func(cp *checkpoint.Checkpoint) { cp.Parts[0].ChecksumSHA256 = marker },
	} {
		cp := valid()
		edit(cp)
		err := cp.Validate()
		if err == nil || strings.Contains(err.Error(), marker) {
			t.Errorf("Validate = %v", err)
		}
	}
}

func TestCheckSource(t *testing.T) {
	cp := valid()
	same := cp.Source
	same.ModTime = same.ModTime.In(time.FixedZone("CET", 3600)) // the same instant
	if err := cp.CheckSource(same); err != nil {
		t.Fatalf("same source: %v", err)
	}
	tests := []struct {
		name string
		edit func(s *checkpoint.Source)
		want []string
	}{
		{"path", func(s *checkpoint.Source) { s.Path = "/home/ann/other" }, []string{`path changed: "/home/ann/data/big.parquet" → "/home/ann/other"`}},
		{"size", func(s *checkpoint.Source) { s.Size = 1200 }, []string{fmt.Sprintf("size changed: %d → 1200", 12*mib+7)}},
		{"mod_time", func(s *checkpoint.Source) { s.ModTime = s.ModTime.Add(time.Nanosecond) }, []string{
			"mod_time changed: 2026-03-01T10:00:00.123456789Z → 2026-03-01T10:00:00.12345679Z"}},
		{"size and mod_time", func(s *checkpoint.Source) { s.Size++; s.ModTime = s.ModTime.Add(time.Hour) }, []string{"size changed", "mod_time changed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := cp.Source
			tt.edit(&s)
			err := cp.CheckSource(s)
			if !errors.Is(err, checkpoint.ErrSourceChanged) {
				t.Fatalf("CheckSource = %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestCheckBinding(t *testing.T) {
	cp := valid()
	if err := cp.CheckBinding(cp.Binding); err != nil {
		t.Fatalf("same binding: %v", err)
	}
	noID := cp.Binding
	noID.UploadID = ""
	if err := cp.CheckBinding(noID); err != nil {
		t.Fatalf("binding without upload id: %v", err)
	}
	tests := []struct {
		name string
		edit func(b *checkpoint.Binding)
		want string
	}{
		{"bucket", func(b *checkpoint.Binding) { b.Bucket = "other" }, `bucket changed: "lake-stage" → "other"`},
		{"prefix", func(b *checkpoint.Binding) { b.Prefix = "" }, `prefix changed: "prod" → ""`},
		{"key", func(b *checkpoint.Binding) { b.Key = "prod/objects/x" }, `key changed:`},
		{"upload id", func(b *checkpoint.Binding) { b.UploadID = "other-upload" }, "upload_id changed"},
		{"key, no upload id", func(b *checkpoint.Binding) { b.Key = "k"; b.UploadID = "" }, "key changed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := cp.Binding
			tt.edit(&b)
			err := cp.CheckBinding(b)
			if !errors.Is(err, checkpoint.ErrBindingMismatch) {
				t.Fatalf("CheckBinding = %v", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("message %q lacks %q", err, tt.want)
			}
			if strings.Contains(err.Error(), cp.Binding.UploadID) {
				t.Errorf("message %q quotes the upload id", err)
			}
		})
	}
}

func TestPartSize(t *testing.T) {
	const (
		tib = 1 << 40
		gib = 1 << 30
	)
	tests := []struct {
		name          string
		size, minPart int64
		want          int64
	}{
		{"empty file", 0, 0, 5 * mib},
		{"negative size", -1, 0, 5 * mib},
		{"small file", 1, 8 * mib, 8 * mib},
		{"min part below S3 minimum is raised", 100 * mib, 1, 5 * mib},
		{"min part rounded up to a MiB", 100 * mib, 5*mib + 1, 6 * mib},
		{"min part above S3 maximum is lowered", 100 * mib, 6 * gib, 5 * gib},
		{"exactly 10000 parts of 5 MiB", 10000 * 5 * mib, 0, 5 * mib},
		{"one byte more needs bigger parts", 10000*5*mib + 1, 0, 6 * mib},
		{"exactly 10000 parts of 6 MiB", 10000 * 6 * mib, 0, 6 * mib},
		{"one byte more than that", 10000*6*mib + 1, 0, 7 * mib},
		{"1 TiB", tib, 0, 105 * mib},
		{"5 TiB", 5 * tib, 0, 525 * mib},
		{"10000 parts of 5 GiB", 10000 * 5 * gib, 0, 5 * gib},
		{"too big for S3", 10000*5*gib + 1, 0, 5*gib + mib},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkpoint.PartSize(tt.size, tt.minPart)
			if got != tt.want {
				t.Fatalf("PartSize(%d, %d) = %d (%d MiB), want %d (%d MiB)", tt.size, tt.minPart, got, got/mib, tt.want, tt.want/mib)
			}
			if got%mib != 0 {
				t.Errorf("%d is not a whole MiB", got)
			}
			if tt.size > 0 && got <= checkpoint.MaxPartSize {
				if n := (tt.size + got - 1) / got; n > checkpoint.MaxParts {
					t.Errorf("%d parts", n)
				}
				// The result is a valid part size for a checkpoint.
				cp := valid()
				cp.Source.Size, cp.PartSize, cp.Parts = tt.size, got, nil
				if err := cp.Validate(); err != nil {
					t.Errorf("Validate with this part size: %v", err)
				}
			}
		})
	}
	cp := valid()
	cp.Source.Size, cp.Parts = 10000*5*gib+1, nil
	cp.PartSize = checkpoint.PartSize(cp.Source.Size, 0)
	if err := cp.Validate(); !errors.Is(err, checkpoint.ErrInvalid) {
		t.Errorf("Validate of a file too big for S3 = %v", err)
	}
}
