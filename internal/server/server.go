package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/lakedata/lake/internal/auth"
	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/internal/httpserve"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/stageopen"
	"github.com/lakedata/lake/roles/meta"
	"github.com/lakedata/lake/roles/meta/cluster"
	"github.com/lakedata/lake/roles/query"
	"github.com/lakedata/lake/wire/lakepb"
)

// closeTimeout bounds how long Open, when it fails half-way, waits for
// what it already started to stop.
const closeTimeout = 10 * time.Second

// Server is a running `lake serve`: the services of its role.
type Server struct {
	log   *slog.Logger
	meta  *meta.Service // nil for RoleQuery
	stage objects.Store // meta's stage, which the server opened and closes
	query *query.Service
	http  *httpserve.Server // nil without HTTPListen
	// runtime holds the Go runtime and process collectors of the HTTP
	// listener, gathered once beside the roles' registries.
	runtime *prometheus.Registry
}

// Open validates cfg, then opens meta before the query service that talks
// to it. When anything fails, what was already started is closed again and
// the error returned: nothing stays bound or locked.
func Open(ctx context.Context, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{log: logger}
	if err := s.open(ctx, cfg); err != nil {
		closeCtx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		s.close(closeCtx)
		return nil, err
	}
	return s, nil
}

func (s *Server) open(ctx context.Context, cfg Config) error {
	var tokens []auth.Token
	if cfg.TokenFile != "" {
		var err error
		if tokens, err = auth.LoadTokens(cfg.TokenFile); err != nil {
			return err
		}
	}
	// The role's own listener: tokens and their scopes, and TLS when asked
	// for. The query role checks its caller's scope before it relays
	// anything, since it reaches meta with a token of its own.
	serverOpts := auth.ScopedServerOptions(tokens)
	if cfg.TLSCert != "" {
		creds, err := auth.ServerTLS(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return err
		}
		serverOpts = append(serverOpts, creds)
	}
	if err := s.openHTTP(cfg, tokens); err != nil {
		return err
	}
	metaEndpoint := cfg.Meta
	if cfg.runsMeta() {
		opts := serverOpts
		if cfg.Role == RoleAll {
			// The embedded meta is reached by this process only: plain
			// gRPC on loopback, with the same tokens and scopes.
			opts = auth.ScopedServerOptions(tokens)
		}
		if err := s.openMeta(ctx, cfg, opts, tokens); err != nil {
			return err
		}
		metaEndpoint = s.meta.Addr().String()
	}
	if cfg.runsQuery() {
		if err := s.openQuery(ctx, cfg, metaEndpoint, serverOpts, tokens); err != nil {
			return err
		}
	}
	s.serveHTTP(cfg, tokens)
	return nil
}

func (s *Server) openMeta(ctx context.Context, cfg Config, opts []grpc.ServerOption, tokens []auth.Token) (err error) {
	logger := s.log.With("role", "meta")
	mc := meta.DefaultConfig()
	var coord *cluster.Etcd
	if len(cfg.Etcd) > 0 {
		var ec cluster.EtcdConfig
		if ec, err = cfg.etcdConfig(logger); err != nil {
			return err
		}
		if coord, err = cluster.NewEtcd(ec); err != nil {
			return err
		}
		// meta.Open owns the coordinator once it succeeds; until then it
		// is ours to close.
		defer func() {
			if err != nil {
				coord.Close(context.Background())
			}
		}()
		mc.Cluster = coord
		if mc.PeerDial, err = metaDial(cfg, tokens); err != nil {
			return err
		}
	}
	desc, err := cfg.describe()
	if err != nil {
		return err
	}
	store, err := stageopen.Open(ctx, desc, logger)
	if err != nil {
		return err
	}
	s.stage = store
	mc.Listen, mc.DataDir = cfg.metaListen(), cfg.DataDir
	mc.Stage, mc.StageURI, mc.Discover = store, desc.GetRootUri(), desc
	mc.ServerOptions, mc.TokensRequired = opts, len(tokens) > 0
	mc.Logger = logger
	mc.VerifyRate = cfg.VerifyRate
	mc.CompactMinFiles, mc.CompactTargetSize = cfg.CompactMinFiles, cfg.CompactTargetSize
	mc.CheckpointInterval, mc.CommitRetention = cfg.CheckpointInterval, cfg.CommitRetention
	mc.Retention = cfg.Retention
	mc.URLMaxExpiry = cfg.URLMaxExpiry
	mc.UploadURLExpiry = cfg.UploadURLExpiry
	desc.UploadMode, desc.PartSize = meta.UploadMode(desc, store, cfg.DirectUploads)
	s.meta, err = meta.Open(ctx, mc)
	return err
}

func (s *Server) openQuery(ctx context.Context, cfg Config, metaEndpoint string, opts []grpc.ServerOption, tokens []auth.Token) error {
	qc := cfg.queryConfig()
	qc.Meta = metaEndpoint
	// A remote stage is opened with the role's own credentials.
	stageLog := s.log
	qc.OpenStage = func(ctx context.Context, d *lakepb.StageDescriptor) (objects.Store, error) {
		return stageopen.Open(ctx, d, stageLog)
	}
	qc.ServerOptions = opts
	qc.Logger = s.log.With("role", "query")
	var err error
	if qc.MetaDial, err = metaDial(cfg, tokens); err != nil {
		return err
	}
	s.query, err = query.Open(ctx, qc)
	return err
}

// metaDial is how this process authenticates to meta nodes: the query role
// to meta, a meta follower to its leader. The token is the first of
// MetaTokenFile, else the widest-scoped of TokenFile: the role has checked
// its caller's scope already, and no caller can need more than the widest
// token of the file allows.
func metaDial(cfg Config, tokens []auth.Token) (flightrpc.DialOptions, error) {
	d := flightrpc.DialOptions{TLSCAFile: cfg.MetaTLSCA}
	if cfg.MetaTokenFile != "" {
		t, err := auth.LoadTokens(cfg.MetaTokenFile)
		if err != nil {
			return d, err
		}
		tokens = t[:1]
	}
	if t, ok := auth.Widest(tokens); ok {
		d.Token = t.Value
	}
	return d, nil
}

// MetaAddr is the metadata service's Flight address; nil for RoleQuery.
func (s *Server) MetaAddr() net.Addr {
	if s.meta == nil {
		return nil
	}
	return s.meta.Addr()
}

// QueryAddr is the query service's Flight SQL address; nil for RoleMeta.
func (s *Server) QueryAddr() net.Addr {
	if s.query == nil {
		return nil
	}
	return s.query.Addr()
}

// Close stops the HTTP listener, then the query service before the meta
// it talks to, then releases the stage. Each service's failure is logged ("close") and all
// of them returned; ctx bounds the wait for calls in flight. Call it once.
func (s *Server) Close(ctx context.Context) error {
	return s.close(ctx)
}

func (s *Server) close(ctx context.Context) error {
	var errs []error
	note := func(err error) {
		if err != nil {
			s.log.Error("close", "err", err)
			errs = append(errs, err)
		}
	}
	if s.http != nil {
		note(s.http.Close(ctx))
		s.http = nil
	}
	if s.query != nil {
		note(s.query.Close(ctx))
		s.query = nil
	}
	if s.meta != nil {
		note(s.meta.Close(ctx))
		s.meta = nil
	}
	// meta does not own its stage; the server opened it, so closes it.
	if s.stage != nil {
		note(s.stage.Close())
		s.stage = nil
	}
	return errors.Join(errs...)
}
