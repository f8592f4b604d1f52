package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakedata/lake/internal/auth"
	"github.com/lakedata/lake/internal/httpserve"
	"github.com/lakedata/lake/roles/query"
)

// openHTTP binds the process's HTTP listener before the roles open, so
// /healthz answers and /readyz says "starting" while meta loads its
// index; the tokens apply from the first request on. A default address
// that is taken is given up with a warning (HTTPBestEffort); an address
// the operator asked for is an error.
func (s *Server) openHTTP(cfg Config, tokens []auth.Token) error {
	if cfg.HTTPListen == "" {
		return nil
	}
	s.runtime = httpserve.Runtime()
	starting := http.NewServeMux()
	httpserve.Endpoints{
		Gatherers: prometheus.Gatherers{s.runtime}, Ready: []httpserve.Check{httpserve.Starting},
		Tokens: tokens, OpenMetrics: cfg.HTTPOpenMetrics,
	}.Register(starting)
	var tlsConfig *tls.Config
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return fmt.Errorf("http: load --tls-cert and --tls-key: %w", err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	h, err := httpserve.Listen(cfg.HTTPListen, starting, tlsConfig, s.log)
	if err != nil && cfg.HTTPBestEffort && errors.Is(err, syscall.EADDRINUSE) {
		s.log.Warn("the default HTTP address is taken; running without /metrics, /healthz and /readyz (give --http-listen)", "http_addr", cfg.HTTPListen)
		return nil
	}
	if err != nil {
		return err
	}
	s.http = h
	return nil
}

// serveHTTP gives the listener the roles' mux once they are open: the
// query role's (which the web console shares) when it runs, else the
// metadata service's. Both registries and both readiness checks are
// served when one process runs both roles.
func (s *Server) serveHTTP(cfg Config, tokens []auth.Token) {
	if s.http == nil {
		return
	}
	gatherers := []prometheus.Gatherer{s.runtime}
	var ready []httpserve.Check
	if m := s.meta; m != nil {
		gatherers = append(gatherers, m.Gatherer())
		ready = append(ready, httpserve.Check{Name: "meta", Ready: func(context.Context) error { return m.Ready() }})
	}
	if s.query != nil {
		con, err := s.query.Console(context.Background(), tokens)
		if err != nil {
			s.log.Error("the web console is off", "err", err)
		} else {
			scheme := "http"
			if cfg.TLSCert != "" {
				scheme = "https"
			}
			s.log.Info("web console ready", "url", scheme+"://"+s.http.Addr().String()+"/")
		}
		s.http.SetHandler(guardOpen(tokens, s.query.HTTPHandler(query.HTTPConfig{
			Gatherers: gatherers, Ready: ready, Tokens: tokens, OpenMetrics: cfg.HTTPOpenMetrics, Console: con,
		})))
		return
	}
	// The metadata role's mux: the Iceberg REST catalog (DESIGN §13)
	// mounts here beside the operational endpoints.
	mux := http.NewServeMux()
	httpserve.Endpoints{Gatherers: gatherers, Ready: ready, Tokens: tokens, OpenMetrics: cfg.HTTPOpenMetrics}.Register(mux)
	s.http.SetHandler(guardOpen(tokens, mux))
}

// guardOpen puts a role without tokens behind httpserve.TrustedHosts.
func guardOpen(tokens []auth.Token, h http.Handler) http.Handler {
	if len(tokens) == 0 {
		return httpserve.TrustedHosts(h)
	}
	return h
}

// HTTPAddr is the bound address of the HTTP listener; nil without one.
func (s *Server) HTTPAddr() net.Addr {
	if s.http == nil {
		return nil
	}
	return s.http.Addr()
}
