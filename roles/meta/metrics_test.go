package meta

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/roles/meta/cluster"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// sample is the value of the metric name whose labels include every
// name=value pair of labels: a counter's or gauge's value, a histogram's
// sample count. A metric that is not there is a test failure.
func sample(t testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range fams {
		if fam.GetName() != name {
			continue
		}
	metric:
		for _, m := range fam.GetMetric() {
			for _, l := range labels {
				k, v, _ := strings.Cut(l, "=")
				if !hasLabel(m, k, v) {
					continue metric
				}
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	t.Fatalf("no metric %s%v", name, labels)
	return 0
}

func hasLabel(m *dto.Metric, k, v string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == k && l.GetValue() == v {
			return true
		}
	}
	return false
}

// TestMetricsMoveWithTheWork: appends, a retried append, a compaction and
// a garbage collection each move exactly their metrics.
func TestMetricsMoveWithTheWork(t *testing.T) {
	f := newFixture(t)
	f.createTable("clips")
	g := f.svc.Gatherer()
	const n = 5
	for i := range n {
		if _, err := f.appendOne("clips", nameN(i), "id-"+nameN(i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := sample(t, g, "lake_meta_appends_total", "outcome=ok"); got != n {
		t.Errorf("appends ok = %v, want %d", got, n)
	}
	if got := sample(t, g, "lake_meta_append_seconds"); got != n {
		t.Errorf("append latency count = %v, want %d", got, n)
	}
	// One client, one append at a time: one version each.
	if got := sample(t, g, "lake_meta_commits_total", "kind=append"); got != n {
		t.Errorf("append commits = %v, want %d", got, n)
	}
	if got := sample(t, g, "lake_meta_commit_group_size"); got != n {
		t.Errorf("group size count = %v, want %d", got, n)
	}
	if _, err := f.appendOne("clips", nameN(0), "id-"+nameN(0)); err != nil {
		t.Fatal(err)
	}
	if got := sample(t, g, "lake_meta_appends_total", "outcome=duplicate"); got != 1 {
		t.Errorf("duplicate appends = %v, want 1", got)
	}
	if got := sample(t, g, "lake_meta_table_versions", "table=clips"); got != n {
		t.Errorf("versions of clips = %v, want %d", got, n)
	}
	if got := sample(t, g, "lake_meta_leader"); got != 1 {
		t.Errorf("leader = %v, want 1 on a lone node", got)
	}
	if got := sample(t, g, "lake_meta_follower_lag_versions"); got != 0 {
		t.Errorf("lag = %v, want 0 on the leader", got)
	}

	if _, err := f.svc.Compact(context.Background(), "clips"); err != nil {
		t.Fatal(err)
	}
	if got := sample(t, g, "lake_meta_compactions_total"); got != 1 {
		t.Errorf("compactions = %v, want 1", got)
	}
	if got := sample(t, g, "lake_meta_compacted_files_total"); got != n {
		t.Errorf("compacted files = %v, want %d", got, n)
	}

	// An object no row names is what a collection with no grace frees.
	orphan := []byte("nobody appended this")
	f.putObject("orphan.bin", orphan)
	zero := int64(0)
	var res lakepb.GcResult
	gcAction := func(dry bool) {
		t.Helper()
		if err := flightrpc.Action(context.Background(), f.fc, wire.ActionGC, &lakepb.GcRequest{GraceMicros: &zero, DryRun: dry}, &res); err != nil {
			t.Fatal(err)
		}
	}
	gcAction(true)
	if got := sample(t, g, "lake_meta_gc_runs_total"); got != 0 {
		t.Errorf("gc runs after a dry run = %v, want 0", got)
	}
	gcAction(false)
	if got := sample(t, g, "lake_meta_gc_runs_total"); got != 1 {
		t.Errorf("gc runs = %v, want 1", got)
	}
	if got, want := sample(t, g, "lake_meta_gc_freed_objects_total", "kind=object"), float64(res.GetObjects().GetCount()); got != want || want < 1 {
		t.Errorf("freed objects = %v, the result says %v (want at least 1)", got, want)
	}
	if got, want := sample(t, g, "lake_meta_gc_freed_bytes_total", "kind=object"), float64(res.GetObjects().GetBytes()); got != want || want < float64(len(orphan)) {
		t.Errorf("freed object bytes = %v, the result says %v (want at least %d)", got, want, len(orphan))
	}
	if err := f.svc.Ready(); err != nil {
		t.Errorf("a lone node that opened is not ready: %v", err)
	}
}

// TestNoMetrics: with Config.NoMetrics the service records nothing and
// serves an empty registry, and appends still work.
func TestNoMetrics(t *testing.T) {
	f := newFixture(t)
	f.tune = func(c *Config) { c.NoMetrics = true }
	f.restart()
	f.createTable("clips")
	if _, err := f.appendOne("clips", "a.bin", ""); err != nil {
		t.Fatal(err)
	}
	fams, err := f.svc.Gatherer().Gather()
	if err != nil || len(fams) != 0 {
		t.Fatalf("gathered %d families (err %v), want none", len(fams), err)
	}
}

// TestHeardHeadsBehind: the lag sums what each announced table is
// missing, counts a table not known yet from its start, and never goes
// negative for a table ahead of the announcement.
func TestHeardHeadsBehind(t *testing.T) {
	var h heardHeads
	if got := h.behind(func(string) int64 { return 0 }); got != 0 {
		t.Fatalf("nothing heard: behind %d", got)
	}
	h.note(headOf("a", 5))
	h.note(headOf("a", 3)) // older: ignored
	h.note(headOf("b", 2))
	h.note(headOf("c", 1))
	applied := map[string]int64{"a": 4, "c": 9}
	got := h.behind(func(name string) int64 {
		if v, ok := applied[name]; ok {
			return v
		}
		return -1
	})
	if want := int64(1 + 3 + 0); got != want {
		t.Fatalf("behind %d, want %d", got, want)
	}
}

func headOf(name string, v int64) cluster.Head {
	return cluster.Head{TableID: "id-" + name, Name: name, Version: v}
}
