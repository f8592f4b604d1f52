package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lakedata/lake/internal/server"
)

// serveOptions are the flags of `lake serve` (DESIGN §6), bound straight
// into the server's Config but for the two that need parsing.
type serveOptions struct {
	cfg           server.Config
	etcd          string
	verifyRate    byteRate
	compactTarget byteRate // a size; parsed as a rate is, "128MiB"
	// httpListenSet reports whether --http-listen was given: a role run
	// alone serves HTTP only then.
	httpListenSet func() bool
}

func (o *serveOptions) addFlags(cmd *cobra.Command) {
	o.cfg = server.DefaultConfig()
	c := &o.cfg
	f := cmd.Flags()
	f.StringVar((*string)(&c.Role), "role", string(c.Role), "which role to run: all (meta and query in one process), meta or query")
	f.StringVar(&c.Listen, "listen", "", "Flight address of the role; for all, the query address (default 127.0.0.1:50051; meta: 127.0.0.1:50052)")
	f.StringVar(&c.MetaListen, "meta-listen", c.MetaListen, "all only: the metadata service's Flight address")
	f.StringVar(&c.DataDir, "data-dir", c.DataDir, "directory for the role's local state (meta: index and lock; query: cache)")
	f.StringVar(&c.Stage, "stage", "", "managed stage: file:///abs/dir or s3://bucket/prefix (default <data-dir>/stage)")
	f.StringVar(&c.S3Endpoint, "s3-endpoint", "", "S3 endpoint URL for an S3-compatible store (default: AWS)")
	f.StringVar(&c.S3Region, "s3-region", "", "S3 region (default: from the AWS configuration)")
	f.BoolVar(&c.S3PathStyle, "s3-path-style", false, "path-style S3 addressing (implied by --s3-endpoint)")
	f.Int64Var(&c.CacheLimit, "cache-limit", c.CacheLimit, "query: bytes of an S3 stage's data files kept in the local cache")
	f.StringVar(&c.Meta, "meta", c.Meta, "query only: the metadata service's endpoints, comma-separated (host:port, grpc://, grpc+tls://); the query role fails over between them")
	f.StringVar(&c.CacheDir, "cache-dir", "", "query: directory for the role's cache (default <data-dir>/query-cache)")
	f.StringVar(&c.TokenFile, "token-file", "", "file of bearer tokens this server accepts, one per line: TOKEN or TOKEN read|write|admin (mode 0600)")
	f.StringVar(&c.MetaTokenFile, "meta-token-file", "", "file holding the token presented to meta: by the query role, and by a meta follower to its leader (default: the widest-scoped of --token-file)")
	f.StringVar(&c.TLSCert, "tls-cert", "", "serve TLS with this certificate (PEM)")
	f.StringVar(&c.TLSKey, "tls-key", "", "the private key of --tls-cert (PEM)")
	f.StringVar(&c.MetaTLSCA, "meta-tls-ca", "", "CA bundle to verify grpc+tls:// meta endpoints (query role; meta followers towards the leader)")
	f.BoolVar(&c.InsecureNoAuth, "insecure-no-auth", false, "allow listening on a non-loopback address without --token-file")
	f.StringVar(&c.HTTPListen, "http-listen", c.HTTPListen, `HTTP address of /metrics, /healthz and /readyz (for all: one listener for both roles; the default is skipped with a warning when taken); --role=meta or query: none unless given; "" turns it off`)
	f.BoolVar(&c.HTTPOpenMetrics, "http-open-metrics", false, "serve /metrics and /readyz without a token even with --token-file (/healthz is always open)")
	o.httpListenSet = func() bool { return f.Changed("http-listen") }
	f.StringVar(&c.MemoryLimit, "memory-limit", "", "query: DuckDB memory limit, e.g. 4GB (default: DuckDB's, 80% of RAM)")
	f.IntVar(&c.Threads, "threads", 0, "query: DuckDB worker threads (default: one per core)")
	f.DurationVar(&c.StatementTimeout, "statement-timeout", c.StatementTimeout, "query: cancel a statement running longer than this")
	f.Int64Var(&c.RelayBuffer, "relay-buffer", c.RelayBuffer, "query: bytes of append frames held at once across all appends being relayed to meta; an append that would exceed it is refused (ResourceExhausted)")
	f.StringVar(&o.etcd, "etcd", "", "meta: etcd endpoints, comma-separated (http://host:2379); several meta nodes then elect a leader and followers forward to it")
	f.StringVar(&c.EtcdPrefix, "etcd-prefix", c.EtcdPrefix, "meta: root of lake's keys in etcd (one per lake cluster)")
	f.StringVar(&c.Advertise, "advertise", "", "meta with --etcd: the address other meta and query nodes reach this node at (default: --listen)")
	f.DurationVar(&c.SessionTTL, "session-ttl", c.SessionTTL, "meta with --etcd: leadership lease TTL, whole seconds; a dead leader is replaced after at most this long")
	o.verifyRate = byteRate(c.VerifyRate)
	f.Var(&o.verifyRate, "verify-rate", "meta: bytes per second the leader reads to check the tables' objects against their rows' size and sha256 in the background, e.g. 64MiB; 0 turns it off")
	f.IntVar(&c.CompactMinFiles, "compact-min-files", c.CompactMinFiles, "meta: the leader merges a table's small data files once it has more than this many; 0 turns background compaction off (lake table compact still works)")
	o.compactTarget = byteRate(c.CompactTargetSize)
	f.Var(&o.compactTarget, "compact-target-size", "meta: size of the data files compaction writes, e.g. 128MiB; smaller files count as small")
	f.Int64Var(&c.CheckpointInterval, "checkpoint-interval", c.CheckpointInterval, "meta: the leader writes a log checkpoint of a table every this many versions, so a node without an index reads a checkpoint and the log after it, not every version; 0 writes none")
	f.DurationVar(&c.Retention, "retention", 0, "meta: expire table versions that stopped being current longer ago than this (e.g. 720h), so lake gc can free what only they use; 0 keeps every version")
	f.DurationVar(&c.CommitRetention, "commit-retention", c.CommitRetention, "meta: checkpoints remember commit ids this long, so a retried append is still answered duplicate after a rebuild from a checkpoint")
	f.DurationVar(&c.UploadURLExpiry, "upload-url-expiry", c.UploadURLExpiry, "meta: how long the part URLs of an upload grant work (renewed on request); also the most a client may ask for")
	f.BoolVar(&c.DirectUploads, "direct-uploads", false, "meta on S3: tell clients (lake.discover) they may upload with their own AWS credentials instead of through upload grants")
	f.DurationVar(&c.URLMaxExpiry, "url-max-expiry", c.URLMaxExpiry, "meta: the longest a read URL (lake url) may work; a longer --expires is refused. At most 168h, what S3 can sign")
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

// config is the server's Config with the parsed flags and what main
// supplies filled in.
func (o *serveOptions) config(logger *slog.Logger) server.Config {
	cfg := o.cfg
	if o.etcd != "" {
		cfg.Etcd = strings.Split(o.etcd, ",")
	}
	cfg.VerifyRate = int64(o.verifyRate)
	cfg.CompactTargetSize = int64(o.compactTarget)
	if o.httpListenSet != nil && o.httpListenSet() {
		cfg.HTTPBestEffort = false // asked for: a taken address is an error
	} else if cfg.Role != server.RoleAll {
		cfg.HTTPListen = ""
	}
	cfg.Version = version
	cfg.Logger = logger
	return cfg
}

// runServe runs the server until ctx ends (a signal). A Config that does
// not validate is a usage error; anything failing later is not.
func runServe(ctx context.Context, o *serveOptions, logger *slog.Logger) error {
	cfg := o.config(logger)
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	srv, err := server.Open(ctx, cfg)
	if err != nil {
		return err
	}
	<-ctx.Done()
	logger.Info("shutting down")
	closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Close logs each role's failure itself.
	_ = srv.Close(closeCtx)
	return nil
}
