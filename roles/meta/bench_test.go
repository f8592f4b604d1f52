package meta

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/wire"
)

// BenchmarkAppend measures single-row FILE appends over Flight on a local
// stage, with 1 and 16 concurrent clients. Objects are uploaded before the
// timer starts: only the metadata commit is measured. Reported: appends/s,
// p50 and p99 latency, and versions per append (group commit).
//
// overlap=false hides the local stage's Preparer, so the data file and the
// log record are written one after the other: the side-by-side reference
// for overlapping them.
func BenchmarkAppend(b *testing.B) {
	for _, clients := range []int{1, 16} {
		for _, overlap := range []bool{true, false} {
			b.Run(fmt.Sprintf("clients=%d/overlap=%v", clients, overlap), func(b *testing.B) {
				benchmarkAppend(b, clients, overlap)
			})
		}
	}
}

// plainStore hides optional capabilities of the store it wraps.
type plainStore struct{ objects.Store }

func benchmarkAppend(b *testing.B, clients int, overlap bool) {
	var f *fixture
	if overlap {
		f = newFixture(b)
	} else {
		f = newFixtureWith(b, func(s objects.Store) objects.Store { return plainStore{s} })
	}
	f.createTable("clips")
	v := f.putObject("bench.mp4", []byte("benchmark object"))
	recs := make([]arrow.RecordBatch, clients)
	for i := range recs {
		recs[i] = wiretest.FileRows([]string{"bench.mp4"}, []wire.FileValue{v})
		defer recs[i].Release()
	}
	latencies := make([][]time.Duration, clients)
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if _, err := f.append("clips", "", recs[c]); err != nil {
					b.Error(err)
					return
				}
				latencies[c] = append(latencies[c], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	var all []time.Duration
	for _, l := range latencies {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "appends/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(f.svc.reg.lookup("clips").row().Head)/float64(len(all)), "versions/append")
}

// BenchmarkBoltFsyncCommit is the reference: one small fsync'd bbolt
// transaction per op on the same disk, the floor of one commit's cost.
func BenchmarkBoltFsyncCommit(b *testing.B) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "ref.db"), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	start := time.Now()
	for i := 0; b.Loop(); i++ {
		err := db.Update(func(tx *bolt.Tx) error {
			bk, err := tx.CreateBucketIfNotExists([]byte("ref"))
			if err != nil {
				return err
			}
			return bk.Put(be64(int64(i)), []byte("a small log record of about this size"))
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
}

// BenchmarkCommitIDInsertOrder: what setBase does with a checkpoint's
// commit ids, 20,000 UUIDs into one bbolt bucket in one transaction, in
// the order the checkpoint lists them (random keys) and sorted by key
// (what setBase does). The sort is why a cold start from a checkpoint of
// a busy table spends little on its index.
func BenchmarkCommitIDInsertOrder(b *testing.B) {
	ids := make([]string, 20000)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	sorted := slices.Sorted(slices.Values(ids))
	for _, c := range []struct {
		name string
		keys []string
	}{{"checkpoint-order", ids}, {"sorted", sorted}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				ix, err := openIndex(b.TempDir(), slog.New(slog.DiscardHandler))
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				err = ix.db.Update(func(tx *bolt.Tx) error {
					bk, err := tx.Bucket(bucketCommits).CreateBucketIfNotExists([]byte("t"))
					if err != nil {
						return err
					}
					for i, k := range c.keys {
						if err := bk.Put([]byte(k), commitValue(int64(i+1), time.Now(), 1)); err != nil {
							return err
						}
					}
					return nil
				})
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				ix.close()
				b.StartTimer()
			}
		})
	}
}
