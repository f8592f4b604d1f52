package local_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/lakedata/lake/objects"
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
