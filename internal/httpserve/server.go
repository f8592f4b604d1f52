package httpserve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// Server is one HTTP listener. It answers from the moment it listens, so
// probes work while the roles still load: until SetHandler gives it the
// roles' mux it serves what Listen was given (endpoints with the Starting
// check, say).
type Server struct {
	lis     net.Listener
	srv     *http.Server
	handler atomic.Pointer[http.Handler]
	done    chan struct{}
}

// Listen binds addr and serves first, then whatever SetHandler gives it,
// until Close. It logs "http listening" with the bound address (addr may
// pick a port: 127.0.0.1:0). With tlsConfig it serves HTTPS only, as the
// role's Flight listener does with the same certificate: bearer tokens
// and session cookies never cross the network in the clear.
func Listen(addr string, first http.Handler, tlsConfig *tls.Config, logger *slog.Logger) (*Server, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("http: listen on %s: %w", addr, err)
	}
	if tlsConfig != nil {
		lis = tls.NewListener(lis, tlsConfig)
	}
	s := &Server{lis: lis, done: make(chan struct{})}
	s.SetHandler(first)
	s.srv = &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*s.handler.Load()).ServeHTTP(w, r) }),
		ReadHeaderTimeout: 10 * time.Second,
		// An idle keep-alive connection goes after two minutes, so idle
		// clients cannot pile up connections. No read or write timeout for
		// the whole request: a read deadline would cancel a video's
		// request context mid-stream, and the stream may take long. A
		// handler that reads a body bounds its own read (the console's
		// forms do).
		IdleTimeout: 2 * time.Minute,
		ErrorLog:    slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http server stopped", "err", err)
		}
	}()
	logger.Info("http listening", "http_addr", lis.Addr().String(), "tls", tlsConfig != nil)
	return s, nil
}

// SetHandler makes h answer every request from now on.
func (s *Server) SetHandler(h http.Handler) { s.handler.Store(&h) }

// Addr is the bound address.
func (s *Server) Addr() net.Addr { return s.lis.Addr() }

// Close stops listening and waits, within ctx, for requests in flight;
// past ctx it closes their connections.
func (s *Server) Close(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, s.srv.Close())
	}
	<-s.done
	return err
}

// Starting is the readiness of a process whose roles are still opening:
// never ready.
var Starting = Check{Name: "lake", Ready: func(context.Context) error { return errors.New("starting") }}
