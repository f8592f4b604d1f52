package local_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/local"
)

// benchKey has the depth of a minted object key: a metadata node stats one
// per appended FILE value, a reader opens one per download.
const benchKey = "objects/2026/01/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b/clip.mp4"

func BenchmarkStat(b *testing.B) {
	for _, m := range resolveModes(b) {
		b.Run(m.name, func(b *testing.B) {
			s := benchStore(b, m)
			for b.Loop() {
				if _, err := s.Stat(b.Context(), benchKey); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkOpen(b *testing.B) {
	for _, m := range resolveModes(b) {
		b.Run(m.name, func(b *testing.B) {
			s := benchStore(b, m)
			buf := make([]byte, 64)
			for b.Loop() {
				rc, err := s.Open(b.Context(), benchKey, 0, -1)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(rc, buf); err != nil {
					b.Fatal(err)
				}
				rc.Close()
			}
		})
	}
}

func benchStore(b *testing.B, m resolveMode) objects.Store {
	b.Helper()
	s := open(b, b.TempDir())
	m.set(s)
	if _, err := s.Put(b.Context(), benchKey, bytes.NewReader(make([]byte, 4096)), objects.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkPutSmall puts 64 KiB objects from 8 goroutines, as `lake put
// -r --jobs 8` does, under keys of two layouts: one new directory per
// object (objects/<yyyy>/<mm>/<uuid>/<name>) and objects side by side in
// a shared directory (objects/<yyyy>/<mm>/<dd>/<uuid>-<name>), and a
// durable writer of the same files beside them. It reports the fsyncs of
// each put.
func BenchmarkPutSmall(b *testing.B) {
	data := make([]byte, 64<<10)
	for _, layout := range []struct {
		name string
		key  func(i int64) string
	}{
		{"dir-per-object", func(i int64) string { return fmt.Sprintf("objects/2026/03/%016x/img.jpg", i) }},
		{"shared-dir", func(i int64) string { return fmt.Sprintf("objects/2026/03/09/%016x-img.jpg", i) }},
	} {
		b.Run(layout.name, func(b *testing.B) {
			s := open(b, b.TempDir())
			var next atomic.Int64
			b.SetBytes(int64(len(data)))
			b.SetParallelism(8 / runtime.GOMAXPROCS(0))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.Put(b.Context(), layout.key(next.Add(1)), bytes.NewReader(data), objects.PutOptions{}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(local.Syncs(s))/float64(b.N), "fsyncs/op")
		})
	}
	// What the puts are held against: the same writes, each created in a
	// shared directory, written and fsync'd, with no temp file or rename.
	b.Run("durable-writer", func(b *testing.B) {
		dir := b.TempDir()
		var next atomic.Int64
		b.SetBytes(int64(len(data)))
		b.SetParallelism(8 / runtime.GOMAXPROCS(0))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%016x-img.jpg", next.Add(1))), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
				if err == nil {
					_, err = f.Write(data)
				}
				if err == nil {
					err = f.Sync()
				}
				if err == nil {
					err = f.Close()
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(1, "fsyncs/op")
	})
}
