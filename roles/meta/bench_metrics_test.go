package meta

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// BenchmarkAppendMetricsCost runs one append workload (single-row FILE
// appends over Flight on a local stage, 16 clients) against two services
// side by side, one with its metrics and one without (Config.NoMetrics),
// in alternating rounds so that drift of the machine hits both alike. It
// reports each side's appends/s, the ratio of the totals (with/without)
// and the median of the rounds' ratios, which a burst of load from
// elsewhere on the machine moves less: the target is at least 0.97.
func BenchmarkAppendMetricsCost(b *testing.B) {
	const clients, round = 16, 128
	with := newFixture(b)
	without := newFixture(b)
	without.tune = func(c *Config) { c.NoMetrics = true }
	without.restart()
	if without.svc.metrics != nil || with.svc.metrics == nil {
		b.Fatal("the two services do not differ in their metrics")
	}
	sides := []*metricsSide{{f: with}, {f: without}}
	for _, s := range sides {
		s.prepare(b, clients)
	}
	// One warm-up round each, untimed: first commits open files.
	for _, s := range sides {
		s.run(b, clients, round)
		s.took, s.appends = 0, 0
	}
	var ratios []float64
	b.ResetTimer()
	for i := 0; i < max(1, b.N/round); i++ {
		// Alternate which side goes first, so neither always runs on
		// a warmer machine.
		var on, off time.Duration
		if i%2 == 0 {
			on = sides[0].run(b, clients, round)
			off = sides[1].run(b, clients, round)
		} else {
			off = sides[1].run(b, clients, round)
			on = sides[0].run(b, clients, round)
		}
		ratios = append(ratios, off.Seconds()/on.Seconds()) // rates: n/on over n/off
	}
	b.StopTimer()
	on, off := sides[0].rate(), sides[1].rate()
	slices.Sort(ratios)
	b.ReportMetric(on, "with-appends/s")
	b.ReportMetric(off, "without-appends/s")
	b.ReportMetric(on/off, "ratio")
	b.ReportMetric(ratios[len(ratios)/2], "median-round-ratio")
}

// metricsSide is one service of BenchmarkAppendMetricsCost and what it did.
type metricsSide struct {
	f       *fixture
	recs    []arrow.RecordBatch
	took    time.Duration
	appends int
}

func (s *metricsSide) prepare(b *testing.B, clients int) {
	s.f.createTable("clips")
	v := s.f.putObject("bench.mp4", []byte("benchmark object"))
	for range clients {
		rec := wiretest.FileRows([]string{"bench.mp4"}, []wire.FileValue{v})
		b.Cleanup(rec.Release)
		s.recs = append(s.recs, rec)
	}
}

// run makes n appends from clients goroutines, adds their time and
// returns it.
func (s *metricsSide) run(b *testing.B, clients, n int) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for c := range clients {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if _, err := s.f.append("clips", "", s.recs[c]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	s.took += took
	s.appends += n
	return took
}

func (s *metricsSide) rate() float64 { return float64(s.appends) / s.took.Seconds() }

// BenchmarkMetricsRecord is what the metrics add to one append on the
// leader: its latency, outcome, and the commit of a group of one. Against
// an append's hundreds of microseconds it is the cost the side-by-side
// benchmark above cannot resolve from the machine's noise.
func BenchmarkMetricsRecord(b *testing.B) {
	f := newFixture(b)
	m := f.svc.metrics
	res := &lakepb.AppendResult{Version: 1}
	began := time.Now()
	appends := func() float64 { return sample(b, f.svc.Gatherer(), "lake_meta_appends_total", "outcome=ok") }
	before := appends()
	n := 0
	for b.Loop() {
		m.appended(began, res, nil)
		m.committed("append", time.Millisecond, 1)
		n++
	}
	if got := appends() - before; got != float64(n) {
		b.Fatalf("the append counter rose by %v for %d appends: the cost measured is not of recording them", got, n)
	}
}
