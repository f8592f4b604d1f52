package query

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the query role's Prometheus metrics (docs/operations.md lists
// them), on a registry the service owns. The cache's size is read from the
// cache when scraped.
type metrics struct {
	reg *prometheus.Registry

	querySeconds prometheus.Histogram
	queryErrors  prometheus.Counter
	rows         prometheus.Counter
	cacheHits    prometheus.Counter
	cacheMisses  prometheus.Counter
	relayed      prometheus.Counter
	relayedOK    prometheus.Counter
}

func newMetrics(s *Service) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		querySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "lake_query_seconds", Help: "Time a SQL statement takes from its start to the last row sent.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		queryErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lake_query_errors_total", Help: "SQL statements that failed (refused, or failed while running).",
		}),
		rows: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lake_query_rows_total", Help: "Rows SQL statements returned.",
		}),
		cacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lake_query_cache_hits_total", Help: "Data files of an S3 stage found in the local cache.",
		}),
		cacheMisses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lake_query_cache_misses_total", Help: "Data files of an S3 stage fetched into the local cache.",
		}),
		relayed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lake_query_relayed_bytes_total", Help: "Bytes of append frames relayed to meta (metadata rows only; file bytes never pass the role).",
		}),
		relayedOK: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lake_query_relayed_appends_total", Help: "Appends relayed to meta and acknowledged.",
		}),
	}
	m.reg.MustRegister(m.querySeconds, m.queryErrors, m.rows, m.cacheHits, m.cacheMisses, m.relayed, m.relayedOK,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "lake_query_cache_bytes", Help: "Bytes of data files held in the local cache (0 on a local stage, read in place).",
		}, func() float64 {
			if s.cat == nil || s.cat.cache == nil {
				return 0
			}
			return float64(s.cat.cache.size())
		}))
	return m
}

// Gatherer is the service's metrics registry, for the role's /metrics.
func (s *Service) Gatherer() prometheus.Gatherer { return s.metrics.reg }

func (m *metrics) queried(began time.Time, rows int64, err error) {
	m.querySeconds.Observe(time.Since(began).Seconds())
	m.rows.Add(float64(rows))
	if err != nil {
		m.queryErrors.Inc()
	}
}

func (m *metrics) cacheLookup(hit bool) {
	if m == nil {
		return
	}
	if hit {
		m.cacheHits.Inc()
	} else {
		m.cacheMisses.Inc()
	}
}

func (m *metrics) relayedAppend(bytes int64) {
	m.relayed.Add(float64(bytes))
	m.relayedOK.Inc()
}
