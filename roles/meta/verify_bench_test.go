package meta

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/lakedata/lake/wire"
)

// BenchmarkVerify compares a whole lake.table.verify run over Flight
// (metadata service on a local stage, the real calls of `lake verify`
// without the query relay) with plain SHA-256 of the same files read with
// the same buffer size: 16 objects of 64 MiB, one row each. Both read the
// files from the page cache (they were just written), so this measures
// what verification adds to hashing, not the disk.
func BenchmarkVerify(b *testing.B) {
	const objects, size = 16, 64 << 20
	f := newFixture(b)
	f.restartWith(noBackground)
	f.createTable("big")
	names := make([]string, objects)
	values := make([]wire.FileValue, objects)
	for i := range objects {
		names[i] = fmt.Sprintf("big-%02d.bin", i)
		values[i] = f.putObject(names[i], randomBytes(b, size))
	}
	f.appendRows("big", names, values)

	b.Run("sha256", func(b *testing.B) {
		b.SetBytes(objects * size)
		buf := make([]byte, verifyChunk)
		for b.Loop() {
			for _, v := range values {
				fh, err := os.Open(f.stagePath(v.Key))
				if err != nil {
					b.Fatal(err)
				}
				h := sha256.New()
				if _, err := io.CopyBuffer(h, fh, buf); err != nil {
					b.Fatal(err)
				}
				fh.Close()
				if hex.EncodeToString(h.Sum(nil)) != v.SHA256 {
					b.Fatal("sum differs")
				}
			}
		}
	})
	b.Run("lake-verify", func(b *testing.B) {
		b.SetBytes(objects * size)
		for b.Loop() {
			ms, prog, _ := verifyRun(b, f.fc, "big", false)
			if len(ms) != 0 || prog.GetBytesRead() != objects*size {
				b.Fatalf("mismatches %v, progress %v", ms, prog)
			}
		}
	})
}
