package query

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakedata/lake/internal/auth"
	"github.com/lakedata/lake/internal/httpserve"
	"github.com/lakedata/lake/roles/query/console"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// HTTPConfig is what the query role's HTTP mux serves beside its own
// metrics and readiness: in the embedded default the same listener
// serves the metadata service too.
type HTTPConfig struct {
	// Gatherers are more registries for /metrics: the process's runtime
	// (httpserve.Runtime) and, in one process with meta, meta's.
	Gatherers []prometheus.Gatherer
	// Ready are more checks for /readyz (meta's, in one process).
	Ready []httpserve.Check
	// Tokens and OpenMetrics decide who may read /metrics and /readyz
	// (httpserve.Endpoints).
	Tokens      []auth.Token
	OpenMetrics bool
	// Console is the web console, served at "/" of this mux; nil: nothing
	// is served there but the operational endpoints.
	Console http.Handler
}

// HTTPHandler is the query role's HTTP mux: /metrics, /healthz, /readyz
// and the web console at "/".
func (s *Service) HTTPHandler(c HTTPConfig) http.Handler {
	mux := http.NewServeMux()
	httpserve.Endpoints{
		Gatherers:   append(append(prometheus.Gatherers{}, c.Gatherers...), s.Gatherer()),
		Ready:       append(append([]httpserve.Check{}, c.Ready...), httpserve.Check{Name: "query", Ready: s.Ready}),
		Tokens:      c.Tokens,
		OpenMetrics: c.OpenMetrics,
	}.Register(mux)
	// The web console mounts here, at "/": the more specific patterns
	// above keep the operational endpoints.
	if c.Console != nil {
		mux.Handle("/", c.Console)
	}
	return mux
}

// Console builds this node's web console (roles/query/console) for
// HTTPConfig.Console: its SQL takes the node's own statement path (run:
// the allow-list guard, time travel), its catalog questions and object
// checks go to meta, and local objects are read through a store of the
// stage opened here, which Close closes. Call it once.
func (s *Service) Console(ctx context.Context, tokens []auth.Token) (http.Handler, error) {
	if s.cfg.OpenStage == nil {
		return nil, fmt.Errorf("query: console: this build cannot open the stage %s", s.stage.GetRootUri())
	}
	store, err := s.cfg.OpenStage(ctx, s.stage)
	if err != nil {
		return nil, fmt.Errorf("query: console: open the stage: %w", err)
	}
	c, err := console.New(console.Config{Tokens: tokens, SQL: s.run, Meta: s.meta, Stage: store, Logger: s.log.With("part", "console")})
	if err != nil {
		store.Close()
		return nil, err
	}
	s.consoleStage = store
	return c, nil
}

// readyTTL is how long the answer of a readiness call to meta is reused,
// so probes from many places cost meta one cheap call a second.
const readyTTL = time.Second

// readyProbeTimeout bounds the call to meta a readiness check makes.
const readyProbeTimeout = time.Second

// readyCache is the last answer of meta to a readiness call.
type readyCache struct {
	mu  sync.Mutex
	at  time.Time
	err error
}

// Ready is nil while meta answers lake.discover (the cheapest call it
// has), checked at most once per readyTTL; else why not.
func (s *Service) Ready(ctx context.Context) error {
	c := &s.ready
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < readyTTL {
		return c.err
	}
	ctx, cancel := context.WithTimeout(ctx, readyProbeTimeout)
	defer cancel()
	var d lakepb.StageDescriptor
	c.err = nil
	if err := s.meta.Action(ctx, wire.ActionDiscover, &lakepb.DiscoverRequest{}, &d); err != nil {
		c.err = fmt.Errorf("the metadata service does not answer: %w", err)
	}
	c.at = time.Now()
	return c.err
}
