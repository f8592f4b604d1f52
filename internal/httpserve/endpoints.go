package httpserve

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lakedata/lake/internal/auth"
	"github.com/lakedata/lake/wire"
)

// Check is one condition of /readyz: Ready returns nil when the part
// named Name can do its work, else an error whose text is the one-line
// reason the probe shows. It should answer quickly (a probe has a
// deadline), from state the part keeps, not from a new round trip.
type Check struct {
	Name  string
	Ready func(ctx context.Context) error
}

// readyTimeout bounds how long /readyz waits for its checks.
const readyTimeout = 2 * time.Second

// Endpoints are the operational endpoints of one listener: the metrics of
// every role it serves, their readiness checks, and who may read them.
type Endpoints struct {
	// Gatherers are the registries /metrics serves, merged: Runtime's
	// and each role's own.
	Gatherers prometheus.Gatherers
	// Ready are the checks /readyz runs; all must pass.
	Ready []Check
	// Tokens are the bearer tokens of the role (its token file); none:
	// everything is open, as Flight is without tokens.
	Tokens []auth.Token
	// OpenMetrics serves /metrics and /readyz without a token even when
	// there are tokens (--http-open-metrics), for a scraper that cannot
	// present one.
	OpenMetrics bool
}

// Register adds /metrics, /healthz and /readyz to mux.
func (e Endpoints) Register(mux *http.ServeMux) {
	g := newGuard(e.Tokens)
	if e.OpenMetrics {
		g = newGuard(nil)
	}
	mux.Handle("GET /metrics", g.require(wire.ScopeRead, Metrics(e.Gatherers)))
	mux.Handle("GET /readyz", g.require(wire.ScopeRead, Readyz(e.Ready...)))
	mux.Handle("GET /healthz", Healthz())
}

// Metrics serves g in the Prometheus text format (or what the scraper
// negotiates). A collector that fails is logged by the scraper through
// the answer, and the rest are still served.
func Metrics(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Healthz answers 200 while the process runs: a liveness probe that only
// a hung or dead process fails.
func Healthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
}

// Readyz answers 200 "ready" when every check passes, else 503 and one
// line naming the first check that failed and why.
func Readyz(checks ...Check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		for _, c := range checks {
			if err := c.Ready(ctx); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, "%s: not ready: %s\n", c.Name, oneLine(err.Error()))
				return
			}
		}
		fmt.Fprintln(w, "ready")
	})
}

// oneLine keeps a reason to one line, whatever an error's text holds.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Runtime is a registry with the Go runtime and process collectors: one
// per listener, gathered beside the roles' registries, so a process that
// runs two roles reports its runtime once.
func Runtime() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}
