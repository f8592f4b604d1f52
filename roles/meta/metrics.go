package meta

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakedata/lake/wire/lakepb"
)

// metrics are the metadata service's Prometheus metrics (docs/operations.md
// lists them), on a registry the service owns. A nil *metrics records
// nothing: Config.NoMetrics leaves them out, which is how the benchmark of
// their cost runs the same appends without them.
//
// Everything on the append path is a pre-resolved counter or histogram
// (a few atomic adds); what can be read from the service's state (heads,
// leadership, lag) is computed when scraped, not kept up to date.
type metrics struct {
	reg *prometheus.Registry

	appendSeconds                            prometheus.Histogram
	appendsOK, appendsDuplicate, appendsFail prometheus.Counter

	commitSeconds prometheus.Histogram
	groupSize     prometheus.Histogram
	commits       *prometheus.CounterVec // by kind: append, compact, delete, expire
	commitsByKind map[string]prometheus.Counter
	logConflicts  prometheus.Counter
	catConflicts  prometheus.Counter

	compactions    prometheus.Counter
	compactedFiles prometheus.Counter

	gcRuns         prometheus.Counter
	gcFreedObjects *prometheus.CounterVec // by kind of what was freed
	gcFreedBytes   *prometheus.CounterVec

	grants *prometheus.CounterVec // by outcome
}

// latencyBuckets span 0.5 ms to about 16 s: a group commit on a local
// stage takes a millisecond, one on S3 tens of them.
var latencyBuckets = prometheus.ExponentialBuckets(0.0005, 2, 16)

func newMetrics(s *Service) *metrics {
	reg := prometheus.NewRegistry()
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	appends := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lake_meta_appends_total", Help: "Appends this node answered as the leader, by outcome (ok, duplicate: the commit_id had committed, error).",
	}, []string{"outcome"})
	m := &metrics{
		reg: reg,
		appendSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "lake_meta_append_seconds", Help: "Time from an append reaching the leader to its answer, every outcome.", Buckets: latencyBuckets,
		}),
		appendsOK: appends.WithLabelValues("ok"), appendsDuplicate: appends.WithLabelValues("duplicate"), appendsFail: appends.WithLabelValues("error"),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "lake_meta_commit_seconds", Help: "Time one group commit takes: build the version, write its data, put its log record if absent, index it.", Buckets: latencyBuckets,
		}),
		groupSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "lake_meta_commit_group_size", Help: "Requests merged into one committed version.", Buckets: prometheus.ExponentialBuckets(1, 2, 10),
		}),
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lake_meta_commits_total", Help: "Table versions this node committed, by kind.",
		}, []string{"kind"}),
		compactions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lake_meta_compactions_total", Help: "Compactions committed (background and lake table compact).",
		}),
		compactedFiles: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lake_meta_compacted_files_total", Help: "Small data files merged away by compactions.",
		}),
		gcRuns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lake_meta_gc_runs_total", Help: "Garbage collections run (lake gc), dry runs left out.",
		}),
		gcFreedObjects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lake_meta_gc_freed_objects_total", Help: "What garbage collection freed, by kind: data_file, object, upload, temp_file.",
		}, []string{"kind"}),
		gcFreedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lake_meta_gc_freed_bytes_total", Help: "Bytes garbage collection freed, by kind: data_file, object, upload, temp_file.",
		}, []string{"kind"}),
		grants: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lake_upload_grants_total", Help: "Upload grants (lake.upload.grant) answered, by outcome: granted, dedup, hash_first, error.",
		}, []string{"outcome"}),
	}
	conflicts := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lake_meta_put_conflicts_total", Help: "Put-if-absent writes another writer had won, by what: log (a version), catalog (a table name).",
	}, []string{"what"})
	m.logConflicts, m.catConflicts = conflicts.WithLabelValues("log"), conflicts.WithLabelValues("catalog")
	// The kinds resolved once: a label look-up per commit costs more
	// than the rest of the commit's metrics together.
	m.commitsByKind = map[string]prometheus.Counter{}
	for _, k := range []*commitKind{appendKind, compactKind, deleteKind, expireKind} {
		m.commitsByKind[k.name] = m.commits.WithLabelValues(k.name)
	}
	for _, c := range []prometheus.Collector{appends, m.appendSeconds, m.commitSeconds, m.groupSize, m.commits, conflicts,
		m.compactions, m.compactedFiles, m.gcRuns, m.gcFreedObjects, m.gcFreedBytes, m.grants} {
		f(c)
	}
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "lake_meta_leader", Help: "1 while this node leads and has caught up (it commits), else 0.",
	}, func() float64 {
		if s.canCommit() {
			return 1
		}
		return 0
	}))
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "lake_meta_follower_lag_versions", Help: "Versions announced by the leader that this node has not applied yet (0 on the leader).",
	}, func() float64 { return float64(s.lag()) }))
	f(&versionsCollector{s: s})
	return m
}

// versionsCollector reports every table's head when scraped. Tables are
// few (a catalog, not a key space), so the label stays bounded.
type versionsCollector struct{ s *Service }

var versionsDesc = prometheus.NewDesc("lake_meta_table_versions", "The current version of each table on this node.", []string{"table"}, nil)

func (c *versionsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- versionsDesc }

func (c *versionsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, t := range c.s.reg.all() {
		ch <- prometheus.MustNewConstMetric(versionsDesc, prometheus.GaugeValue, float64(t.row().Head), t.name)
	}
}

// Gatherer is the service's metrics registry, for the role's /metrics; an
// empty one with Config.NoMetrics.
func (s *Service) Gatherer() prometheus.Gatherer {
	if s.metrics == nil {
		return prometheus.NewRegistry()
	}
	return s.metrics.reg
}

func (m *metrics) appended(start time.Time, res *lakepb.AppendResult, err error) {
	if m == nil {
		return
	}
	m.appendSeconds.Observe(time.Since(start).Seconds())
	switch {
	case err != nil:
		m.appendsFail.Inc()
	case res.GetDuplicate():
		m.appendsDuplicate.Inc()
	default:
		m.appendsOK.Inc()
	}
}

func (m *metrics) committed(kind string, took time.Duration, group int) {
	if m == nil {
		return
	}
	m.commitSeconds.Observe(took.Seconds())
	m.groupSize.Observe(float64(group))
	if c, ok := m.commitsByKind[kind]; ok {
		c.Inc()
	} else {
		m.commits.WithLabelValues(kind).Inc()
	}
}

func (m *metrics) logConflict() {
	if m != nil {
		m.logConflicts.Inc()
	}
}

func (m *metrics) catalogConflict() {
	if m != nil {
		m.catConflicts.Inc()
	}
}

func (m *metrics) compacted(merged int) {
	if m == nil {
		return
	}
	m.compactions.Inc()
	m.compactedFiles.Add(float64(merged))
}

// collected counts a garbage collection from its result message.
func (m *metrics) collected(res *lakepb.GcResult) {
	if m == nil || res == nil || res.GetDryRun() {
		return
	}
	m.gcRuns.Inc()
	for kind, c := range map[string]*lakepb.GcCount{
		"data_file": res.GetDataFiles(), "object": res.GetObjects(), "upload": res.GetUploads(), "temp_file": res.GetTempFiles(),
	} {
		m.gcFreedObjects.WithLabelValues(kind).Add(float64(c.GetCount()))
		m.gcFreedBytes.WithLabelValues(kind).Add(float64(c.GetBytes()))
	}
}

// granted counts an upload grant by what it told the client to do.
func (m *metrics) granted(g *lakepb.UploadGrant, err error) {
	if m == nil {
		return
	}
	outcome := "granted"
	switch {
	case err != nil:
		outcome = "error"
	case g.GetExisting() != nil:
		outcome = "dedup"
	case g.GetHashFirst():
		outcome = "hash_first"
	}
	m.grants.WithLabelValues(outcome).Inc()
}

// countedGC is GC counted in the metrics once its result is known.
func (s *Service) countedGC(ctx context.Context, req *lakepb.GcRequest) (*lakepb.GcResult, error) {
	res, err := s.GC(ctx, req)
	if err == nil {
		s.metrics.collected(res)
	}
	return res, err
}

// countedGrant is UploadGrant counted in the metrics by outcome. A grant
// refused because this node does not lead is the leader's to count.
func (s *Service) countedGrant(ctx context.Context, req *lakepb.UploadGrantRequest) (*lakepb.UploadGrant, error) {
	g, err := s.UploadGrant(ctx, req)
	if !errors.Is(err, errNotLeading) {
		s.metrics.granted(g, err)
	}
	return g, err
}
