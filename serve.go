package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/lakedata/lake/internal/auth"
	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/stageopen"
	"github.com/lakedata/lake/roles/meta"
	"github.com/lakedata/lake/roles/meta/cluster"
	"github.com/lakedata/lake/roles/query"
	"github.com/lakedata/lake/wire/lakepb"
)

// Default addresses (DESIGN §6).
const (
	defaultQueryListen = "127.0.0.1:50051"
	defaultMetaListen  = "127.0.0.1:50052"
)

// serveOptions are the flags of `lake serve` (DESIGN §6).
type serveOptions struct {
	role             string
	listen           string
	metaListen       string
	dataDir          string
	stage            string
	s3Endpoint       string
	s3Region         string
	s3PathStyle      bool
	cacheLimit       int64
	meta             string
	cacheDir         string
	tokenFile        string
	metaTokenFile    string
	tlsCert, tlsKey  string
	metaTLSCA        string
	insecureNoAuth   bool
	memoryLimit      string
	threads          int
	statementTimeout time.Duration
	relayBuffer      int64
	etcd             string
	etcdPrefix       string
	advertise        string
	sessionTTL       time.Duration
	verifyRate       byteRate
}

func (o *serveOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.role, "role", "all", "which role to run: all (meta and query in one process), meta or query")
	f.StringVar(&o.listen, "listen", "", "Flight address of the role; for all, the query address (default 127.0.0.1:50051; meta: 127.0.0.1:50052)")
	f.StringVar(&o.metaListen, "meta-listen", defaultMetaListen, "all only: the metadata service's Flight address")
	f.StringVar(&o.dataDir, "data-dir", "./lake-data", "directory for the role's local state (meta: index and lock; query: cache)")
	f.StringVar(&o.stage, "stage", "", "managed stage: file:///abs/dir or s3://bucket/prefix (default <data-dir>/stage)")
	f.StringVar(&o.s3Endpoint, "s3-endpoint", "", "S3 endpoint URL for an S3-compatible store (default: AWS)")
	f.StringVar(&o.s3Region, "s3-region", "", "S3 region (default: from the AWS configuration)")
	f.BoolVar(&o.s3PathStyle, "s3-path-style", false, "path-style S3 addressing (implied by --s3-endpoint)")
	f.Int64Var(&o.cacheLimit, "cache-limit", 10<<30, "query: bytes of an S3 stage's data files kept in the local cache")
	f.StringVar(&o.meta, "meta", defaultMetaListen, "query only: the metadata service's endpoints, comma-separated (host:port, grpc://, grpc+tls://); the query role fails over between them")
	f.StringVar(&o.cacheDir, "cache-dir", "", "query: directory for the role's cache (default <data-dir>/query-cache)")
	f.StringVar(&o.tokenFile, "token-file", "", "file of bearer tokens this server accepts, one per line (mode 0600)")
	f.StringVar(&o.metaTokenFile, "meta-token-file", "", "file holding the token presented to meta: by the query role, and by a meta follower to its leader (default: the first of --token-file)")
	f.StringVar(&o.tlsCert, "tls-cert", "", "serve TLS with this certificate (PEM)")
	f.StringVar(&o.tlsKey, "tls-key", "", "the private key of --tls-cert (PEM)")
	f.StringVar(&o.metaTLSCA, "meta-tls-ca", "", "CA bundle to verify grpc+tls:// meta endpoints (query role; meta followers towards the leader)")
	f.BoolVar(&o.insecureNoAuth, "insecure-no-auth", false, "allow listening on a non-loopback address without --token-file")
	f.StringVar(&o.memoryLimit, "memory-limit", "", "query: DuckDB memory limit, e.g. 4GB (default: DuckDB's, 80% of RAM)")
	f.IntVar(&o.threads, "threads", 0, "query: DuckDB worker threads (default: one per core)")
	f.DurationVar(&o.statementTimeout, "statement-timeout", 5*time.Minute, "query: cancel a statement running longer than this")
	f.Int64Var(&o.relayBuffer, "relay-buffer", query.DefaultConfig().RelayBuffer, "query: bytes of append frames held at once across all appends being relayed to meta; an append that would exceed it is refused (ResourceExhausted)")
	f.StringVar(&o.etcd, "etcd", "", "meta: etcd endpoints, comma-separated (http://host:2379); several meta nodes then elect a leader and followers forward to it")
	f.StringVar(&o.etcdPrefix, "etcd-prefix", "/lake", "meta: root of lake's keys in etcd (one per lake cluster)")
	f.StringVar(&o.advertise, "advertise", "", "meta with --etcd: the address other meta and query nodes reach this node at (default: --listen)")
	f.DurationVar(&o.sessionTTL, "session-ttl", 5*time.Second, "meta with --etcd: leadership lease TTL, whole seconds; a dead leader is replaced after at most this long")
	o.verifyRate = meta.DefaultVerifyRate
	f.Var(&o.verifyRate, "verify-rate", "meta: bytes per second the leader reads to check the tables' objects against their rows' size and sha256 in the background, e.g. 64MiB; 0 turns it off")
}

func newServeCommand(g *globalOptions) *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run lake: the embedded default, or one role",
		Long: `Run lake's services.

--role=all (the default) runs the metadata service and the query endpoint in
one process, with the managed stage in <data-dir>/stage: the embedded default.
--role=meta runs only the metadata service (schemas, appends, versions).
--role=query runs only a stateless Flight SQL endpoint that reads the stage
and relays FILE appends to --meta.

Several meta nodes share one stage and one etcd (--etcd): one leads and
commits, the others forward mutations to it and serve reads. When the leader
dies another takes over within --session-ttl; on SIGTERM it resigns at once.
Give the query role every meta node (--meta a,b,c) so it fails over too.

A role refuses to listen on a non-loopback address without --token-file,
unless --insecure-no-auth is given.`,
		Example: `  # the embedded default: Flight SQL on 127.0.0.1:50051, data in ./lake-data
  lake serve

  # the roles as separate processes
  lake serve --role=meta --listen 127.0.0.1:50052 --data-dir ./meta-data
  lake serve --role=query --listen 127.0.0.1:50051 --meta 127.0.0.1:50052 --data-dir ./query-data

  # three meta nodes on one S3 stage, led through etcd, and a query node
  lake serve --role=meta --etcd http://127.0.0.1:2379 --stage s3://bucket/lake --listen 127.0.0.1:50052 --data-dir ./m1
  lake serve --role=meta --etcd http://127.0.0.1:2379 --stage s3://bucket/lake --listen 127.0.0.1:50062 --data-dir ./m2
  lake serve --role=meta --etcd http://127.0.0.1:2379 --stage s3://bucket/lake --listen 127.0.0.1:50072 --data-dir ./m3
  lake serve --role=query --meta 127.0.0.1:50052,127.0.0.1:50062,127.0.0.1:50072

  # with bearer tokens and TLS
  lake serve --token-file ./tokens --tls-cert cert.pem --tls-key key.pem --listen 0.0.0.0:50051`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := g.logger()
			if err != nil {
				return err
			}
			return runServe(cmd.Context(), o, logger)
		},
	}
	o.addFlags(cmd)
	return cmd
}

// running is a started role.
type running interface {
	Close(ctx context.Context) error
}

func runServe(ctx context.Context, o *serveOptions, logger *slog.Logger) error {
	listen := o.listen
	switch o.role {
	case "all", "query":
		if listen == "" {
			listen = defaultQueryListen
		}
	case "meta":
		if listen == "" {
			listen = defaultMetaListen
		}
	default:
		return fmt.Errorf("%w: --role %q: want all, meta or query", errUsage, o.role)
	}
	if o.role == "query" && (o.etcd != "" || o.advertise != "") {
		return fmt.Errorf("%w: --etcd and --advertise are for meta nodes; a query node finds them through --meta", errUsage)
	}
	tokens, serverOpts, err := o.security()
	if err != nil {
		return err
	}
	if err := auth.CheckListen(listen, len(tokens) > 0, o.insecureNoAuth); err != nil {
		return err
	}
	var started []running
	defer func() {
		// Close in reverse order: query before the meta it talks to.
		closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for i := len(started) - 1; i >= 0; i-- {
			if err := started[i].Close(closeCtx); err != nil {
				logger.Error("close", "err", err)
			}
		}
	}()
	metaEndpoint := o.meta
	if o.role == "all" || o.role == "meta" {
		metaAddr := listen
		var metaOpts []grpc.ServerOption
		if o.role == "all" {
			// The embedded meta is reached by this process only: plain
			// gRPC on loopback, with the same tokens.
			metaAddr = o.metaListen
			if err := auth.CheckListen(metaAddr, len(tokens) > 0, o.insecureNoAuth); err != nil {
				return err
			}
			metaOpts = auth.ServerOptions(tokens)
		} else {
			metaOpts = serverOpts
		}
		m, err := startMeta(ctx, o, metaAddr, metaOpts, tokens, logger)
		if err != nil {
			return err
		}
		started = append(started, m)
		metaEndpoint = m.Addr().String()
	}
	if o.role == "all" || o.role == "query" {
		q, err := startQuery(ctx, o, listen, metaEndpoint, tokens, serverOpts, logger)
		if err != nil {
			return err
		}
		started = append(started, q)
	}
	<-ctx.Done()
	logger.Info("shutting down")
	return nil
}

// security loads the token file and TLS settings into server options.
func (o *serveOptions) security() ([]string, []grpc.ServerOption, error) {
	var tokens []string
	if o.tokenFile != "" {
		var err error
		if tokens, err = auth.LoadTokens(o.tokenFile); err != nil {
			return nil, nil, err
		}
	}
	opts := auth.ServerOptions(tokens)
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return nil, nil, fmt.Errorf("%w: --tls-cert and --tls-key go together", errUsage)
	}
	if o.tlsCert != "" {
		creds, err := auth.ServerTLS(o.tlsCert, o.tlsKey)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, creds)
	}
	return tokens, opts, nil
}

func startMeta(ctx context.Context, o *serveOptions, addr string, opts []grpc.ServerOption, tokens []string, logger *slog.Logger) (*meta.Service, error) {
	logger = logger.With("role", "meta")
	coord, err := o.coordinator(addr, logger)
	if err != nil {
		return nil, err
	}
	uri := o.stage
	if uri == "" {
		uri = filepath.Join(o.dataDir, "stage")
	}
	desc, err := stageopen.Describe(uri, stageopen.S3Options{
		Region: o.s3Region, Endpoint: o.s3Endpoint, PathStyle: o.s3PathStyle || o.s3Endpoint != "",
	})
	if err != nil {
		return nil, err
	}
	store, err := stageopen.Open(ctx, desc, logger)
	if err != nil {
		return nil, err
	}
	cfg := meta.DefaultConfig()
	cfg.Listen, cfg.DataDir = addr, o.dataDir
	cfg.Stage, cfg.StageURI, cfg.Discover = store, desc.GetRootUri(), desc
	cfg.ServerOptions, cfg.TokensRequired = opts, len(tokens) > 0
	cfg.Logger = logger
	cfg.VerifyRate = int64(o.verifyRate)
	if coord != nil {
		cfg.Cluster = coord
		if cfg.PeerDial, err = o.metaDial(tokens); err != nil {
			return nil, err
		}
	}
	svc, err := meta.Open(ctx, cfg)
	if err != nil && coord != nil {
		coord.Close(context.Background())
	}
	return svc, err
}

// coordinator builds the etcd coordinator of a clustered meta node; nil
// without --etcd (a lone node that always leads).
func (o *serveOptions) coordinator(listen string, logger *slog.Logger) (*cluster.Etcd, error) {
	if o.etcd == "" {
		return nil, nil
	}
	advertise := o.advertise
	if advertise == "" {
		host, port, err := net.SplitHostPort(listen)
		if err != nil || port == "0" || host == "" || net.ParseIP(host).IsUnspecified() {
			return nil, fmt.Errorf("%w: --advertise is required with --etcd when the meta address %q is not one that peers can dial", errUsage, listen)
		}
		advertise = listen
	}
	if o.tlsCert != "" && !strings.Contains(advertise, "://") {
		advertise = "grpc+tls://" + advertise
	}
	cfg := cluster.DefaultEtcdConfig()
	cfg.Endpoints = strings.Split(o.etcd, ",")
	cfg.Advertise, cfg.TTL, cfg.Prefix = advertise, o.sessionTTL, o.etcdPrefix
	cfg.Logger = logger
	coord, err := cluster.NewEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	return coord, nil
}

// metaDial is how this process authenticates to meta nodes: the query role
// to meta, a meta follower to its leader.
func (o *serveOptions) metaDial(tokens []string) (flightrpc.DialOptions, error) {
	d := flightrpc.DialOptions{TLSCAFile: o.metaTLSCA}
	switch {
	case o.metaTokenFile != "":
		t, err := auth.LoadTokens(o.metaTokenFile)
		if err != nil {
			return d, err
		}
		d.Token = t[0]
	case len(tokens) > 0:
		d.Token = tokens[0]
	}
	return d, nil
}

func startQuery(ctx context.Context, o *serveOptions, addr, metaEndpoint string, tokens []string, opts []grpc.ServerOption, logger *slog.Logger) (*query.Service, error) {
	cfg := query.DefaultConfig()
	cfg.Listen, cfg.Meta = addr, metaEndpoint
	cfg.CacheDir = o.cacheDir
	if cfg.CacheDir == "" {
		cfg.CacheDir = filepath.Join(o.dataDir, "query-cache")
	}
	cfg.MemoryLimit, cfg.Threads, cfg.StatementTimeout = o.memoryLimit, o.threads, o.statementTimeout
	cfg.CacheLimit, cfg.RelayBuffer = o.cacheLimit, o.relayBuffer
	cfg.OpenStage = func(ctx context.Context, d *lakepb.StageDescriptor) (objects.Store, error) {
		return stageopen.Open(ctx, d, logger)
	}
	cfg.ServerOptions = opts
	cfg.Version = version
	cfg.Logger = logger.With("role", "query")
	var err error
	if cfg.MetaDial, err = o.metaDial(tokens); err != nil {
		return nil, err
	}
	return query.Open(ctx, cfg)
}
