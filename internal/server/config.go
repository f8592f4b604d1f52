package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/lakedata/lake/internal/auth"
	"github.com/lakedata/lake/objects/stageopen"
	"github.com/lakedata/lake/roles/meta"
	"github.com/lakedata/lake/roles/meta/cluster"
	"github.com/lakedata/lake/roles/query"
	"github.com/lakedata/lake/wire/lakepb"
)

// Role is what a server runs.
type Role string

// The roles of `lake serve --role` (DESIGN §1).
const (
	RoleAll   Role = "all"   // meta and query in one process: the embedded default
	RoleMeta  Role = "meta"  // the metadata service alone
	RoleQuery Role = "query" // a stateless Flight SQL endpoint in front of meta
)

// Default addresses (DESIGN §6, §13).
const (
	DefaultQueryListen = "127.0.0.1:50051"
	DefaultMetaListen  = "127.0.0.1:50052"
	DefaultHTTPListen  = "127.0.0.1:8080"
)

// Config is what `lake serve` was asked to run: one field per flag. The
// errors of Validate name the flag of the field, because that is where
// every Config comes from.
type Config struct {
	// Role selects the services: RoleAll, RoleMeta or RoleQuery.
	Role Role
	// Listen is the Flight address of the role; for RoleAll the query
	// address. Empty: DefaultQueryListen, or DefaultMetaListen for RoleMeta.
	Listen string
	// MetaListen is the embedded metadata service's address (RoleAll only).
	MetaListen string
	// DataDir holds the role's local state: meta's index and lock, the
	// query role's cache unless CacheDir says otherwise.
	DataDir string
	// Stage is the managed stage, file:///abs/dir, a path or
	// s3://bucket/prefix; empty: DataDir/stage. Meta opens it; the query
	// role learns it from meta.
	Stage string
	// S3Endpoint, S3Region and S3PathStyle complete an s3:// Stage. A
	// custom endpoint implies path-style addressing.
	S3Endpoint  string
	S3Region    string
	S3PathStyle bool

	// TokenFile lists the bearer tokens every listener of this server
	// accepts, each with its scope (auth.LoadTokens); empty: no
	// authentication.
	TokenFile string
	// MetaTokenFile holds the token presented to meta (by the query role,
	// and by a meta follower to its leader); empty: the widest-scoped of
	// TokenFile.
	MetaTokenFile string
	// TLSCert and TLSKey, both or neither, serve TLS on the role's
	// address. The embedded meta of RoleAll is reached by this process
	// only and stays plain gRPC.
	TLSCert, TLSKey string
	// MetaTLSCA verifies grpc+tls:// meta endpoints.
	MetaTLSCA string
	// InsecureNoAuth allows a non-loopback listener without TokenFile.
	InsecureNoAuth bool

	// HTTPListen is the address of the process's one HTTP listener
	// (/metrics, /healthz, /readyz of every role it runs, DESIGN §13);
	// empty: none.
	HTTPListen string
	// HTTPBestEffort says HTTPListen is a default nobody asked for: when
	// its address is taken the server warns and runs without HTTP rather
	// than not at all (several embedded servers on one machine).
	HTTPBestEffort bool
	// HTTPOpenMetrics serves /metrics and /readyz without a token even
	// with TokenFile, for a scraper that cannot present one.
	HTTPOpenMetrics bool

	// Meta are the metadata service's endpoints (RoleQuery), comma
	// separated; the query role fails over between them.
	Meta string
	// CacheDir is the query role's cache; empty: DataDir/query-cache.
	CacheDir string
	// CacheLimit bounds the cached data files of an S3 stage.
	CacheLimit int64
	// MemoryLimit and Threads tune DuckDB ("" and 0: DuckDB's defaults).
	MemoryLimit string
	Threads     int
	// StatementTimeout cancels a statement running longer.
	StatementTimeout time.Duration
	// RelayBuffer bounds the append frames the query role holds at once.
	RelayBuffer int64

	// Etcd are the etcd endpoints of a clustered metadata node; none: a
	// lone node that always leads.
	Etcd []string
	// EtcdPrefix is the root of lake's keys in etcd.
	EtcdPrefix string
	// Advertise is the address peers and query nodes reach this meta node
	// at (with Etcd); empty: the meta listen address, if peers can dial it.
	Advertise string
	// SessionTTL is the leadership lease, whole seconds.
	SessionTTL time.Duration
	// VerifyRate is the bytes per second meta's background verifier reads;
	// 0 turns it off.
	VerifyRate int64
	// CompactMinFiles and CompactTargetSize are meta's compaction
	// trigger and file size (meta.Config); 0 files turns the background
	// compaction off.
	CompactMinFiles   int
	CompactTargetSize int64
	// CheckpointInterval and CommitRetention are meta's log checkpoint
	// interval (0: none written) and how long checkpoints remember
	// commit ids (meta.Config).
	CheckpointInterval int64
	CommitRetention    time.Duration
	// Retention: meta expires versions older than this on a schedule
	// (0: keeps every version).
	Retention time.Duration
	// URLMaxExpiry is the longest a read URL meta hands out may work
	// (meta.Config).
	URLMaxExpiry time.Duration
	// UploadURLExpiry is how long meta's upload grant part URLs work;
	// DirectUploads tells clients (lake.discover) that they may upload
	// to an S3 stage with their own credentials instead of through
	// grants.
	UploadURLExpiry time.Duration
	DirectUploads   bool

	// Version is reported through GetSqlInfo.
	Version string
	// Logger receives every role's logs, each scoped with its role; nil
	// discards them. The caller builds the handler.
	Logger *slog.Logger
}

// DefaultConfig returns the Config of a plain `lake serve`: the flags'
// defaults.
func DefaultConfig() Config {
	m, q, e := meta.DefaultConfig(), query.DefaultConfig(), cluster.DefaultEtcdConfig()
	return Config{
		Role:             RoleAll,
		MetaListen:       DefaultMetaListen,
		HTTPListen:       DefaultHTTPListen,
		HTTPBestEffort:   true,
		DataDir:          "./lake-data",
		Meta:             DefaultMetaListen,
		CacheLimit:       q.CacheLimit,
		StatementTimeout: q.StatementTimeout,
		RelayBuffer:      q.RelayBuffer,
		EtcdPrefix:       e.Prefix,
		SessionTTL:       e.TTL,
		VerifyRate:       m.VerifyRate,
		Version:          q.Version,

		CompactMinFiles:   m.CompactMinFiles,
		CompactTargetSize: m.CompactTargetSize,

		CheckpointInterval: m.CheckpointInterval,
		CommitRetention:    m.CommitRetention,
		URLMaxExpiry:       m.URLMaxExpiry,
		UploadURLExpiry:    m.UploadURLExpiry,
	}
}

// runsMeta and runsQuery say which services the role opens.
func (c Config) runsMeta() bool  { return c.Role == RoleAll || c.Role == RoleMeta }
func (c Config) runsQuery() bool { return c.Role == RoleAll || c.Role == RoleQuery }

// listen is the role's own address, its default filled in.
func (c Config) listen() string {
	switch {
	case c.Listen != "":
		return c.Listen
	case c.Role == RoleMeta:
		return DefaultMetaListen
	}
	return DefaultQueryListen
}

// metaListen is where the metadata service listens.
func (c Config) metaListen() string {
	if c.Role == RoleAll {
		return c.MetaListen
	}
	return c.listen()
}

// stageURI is the stage the metadata service opens.
func (c Config) stageURI() string {
	if c.Stage == "" {
		return filepath.Join(c.DataDir, "stage")
	}
	return c.Stage
}

// describe names the stage the way lake.discover tells clients.
func (c Config) describe() (*lakepb.StageDescriptor, error) {
	return stageopen.Describe(c.stageURI(), stageopen.S3Options{
		Region: c.S3Region, Endpoint: c.S3Endpoint, PathStyle: c.S3PathStyle || c.S3Endpoint != "",
	})
}

// etcdConfig is the coordinator's configuration (with Etcd set).
func (c Config) etcdConfig(logger *slog.Logger) (cluster.EtcdConfig, error) {
	listen := c.metaListen()
	advertise := c.Advertise
	if advertise == "" {
		host, port, err := net.SplitHostPort(listen)
		if err != nil || port == "0" || host == "" || net.ParseIP(host).IsUnspecified() {
			return cluster.EtcdConfig{}, fmt.Errorf("--advertise is required with --etcd when the meta address %q is not one that peers can dial", listen)
		}
		advertise = listen
	}
	// Peers dial what is advertised; a TLS listener must say so.
	if c.TLSCert != "" && !strings.Contains(advertise, "://") {
		advertise = "grpc+tls://" + advertise
	}
	cfg := cluster.DefaultEtcdConfig()
	cfg.Endpoints = c.Etcd
	cfg.Advertise, cfg.TTL, cfg.Prefix = advertise, c.SessionTTL, c.EtcdPrefix
	cfg.Logger = logger
	return cfg, cfg.Validate()
}

// queryConfig is the query role's configuration but for what Open
// supplies (the meta endpoint of RoleAll, dialling, the stage opener).
func (c Config) queryConfig() query.Config {
	cfg := query.DefaultConfig()
	cfg.Listen, cfg.Meta = c.listen(), c.Meta
	if c.Role == RoleAll {
		// Replaced by the embedded meta's actual address in Open; set
		// here so Validate does not ask for --meta.
		cfg.Meta = c.MetaListen
	}
	cfg.CacheDir = c.CacheDir
	if cfg.CacheDir == "" {
		cfg.CacheDir = filepath.Join(c.DataDir, "query-cache")
	}
	cfg.MemoryLimit, cfg.Threads, cfg.StatementTimeout = c.MemoryLimit, c.Threads, c.StatementTimeout
	cfg.CacheLimit, cfg.RelayBuffer = c.CacheLimit, c.RelayBuffer
	cfg.Version = c.Version
	return cfg
}

// Validate returns every field error at once, without touching the
// network or the disk: a bad role, flags of another role, TLS halves, a
// listener the listen policy refuses, a stage URI that does not parse, an
// etcd setup peers could not use, and the roles' own bounds.
func (c Config) Validate() error {
	var errs []error
	switch c.Role {
	case RoleAll, RoleMeta, RoleQuery:
	default:
		// Nothing else can be checked without knowing the role.
		return fmt.Errorf("--role %q: want all, meta or query", c.Role)
	}
	if c.Role == RoleQuery && (len(c.Etcd) > 0 || c.Advertise != "") {
		errs = append(errs, errors.New("--etcd and --advertise are for meta nodes; a query node finds them through --meta"))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("--tls-cert and --tls-key go together"))
	}
	// A token file that loads holds at least one token (auth.LoadTokens),
	// so the policy can be decided before reading it.
	haveTokens := c.TokenFile != ""
	if err := auth.CheckListen(c.listen(), haveTokens, c.InsecureNoAuth); err != nil {
		errs = append(errs, err)
	}
	if c.Role == RoleAll {
		if err := auth.CheckListen(c.MetaListen, haveTokens, c.InsecureNoAuth); err != nil {
			errs = append(errs, err)
		}
	}
	if c.HTTPListen != "" {
		if err := auth.CheckListen(c.HTTPListen, haveTokens, c.InsecureNoAuth); err != nil {
			errs = append(errs, fmt.Errorf("--http-listen: %w", err))
		}
	}
	if c.runsMeta() {
		if c.DataDir == "" {
			errs = append(errs, errors.New("--data-dir is required for the metadata service"))
		}
		// The parser's errors name the stage already ("stage: …").
		if _, err := c.describe(); err != nil {
			errs = append(errs, err)
		}
		if c.VerifyRate < 0 {
			errs = append(errs, fmt.Errorf("--verify-rate must not be negative, got %d", c.VerifyRate))
		}
		if c.CompactMinFiles < 0 {
			errs = append(errs, fmt.Errorf("--compact-min-files must not be negative, got %d", c.CompactMinFiles))
		}
		if c.CompactTargetSize <= 0 {
			errs = append(errs, fmt.Errorf("--compact-target-size must be positive, got %d", c.CompactTargetSize))
		}
		if c.CheckpointInterval < 0 {
			errs = append(errs, fmt.Errorf("--checkpoint-interval must not be negative, got %d", c.CheckpointInterval))
		}
		if c.Retention < 0 {
			errs = append(errs, fmt.Errorf("--retention must not be negative, got %v", c.Retention))
		}
		if c.CommitRetention < 0 {
			errs = append(errs, fmt.Errorf("--commit-retention must not be negative, got %v", c.CommitRetention))
		}
		if c.URLMaxExpiry < time.Second || c.URLMaxExpiry > meta.DefaultURLMaxExpiry {
			errs = append(errs, fmt.Errorf("--url-max-expiry must be between 1s and %v, got %v", meta.DefaultURLMaxExpiry, c.URLMaxExpiry))
		}
		if c.UploadURLExpiry < time.Second || c.UploadURLExpiry > meta.DefaultURLMaxExpiry {
			errs = append(errs, fmt.Errorf("--upload-url-expiry must be between 1s and %v, got %v", meta.DefaultURLMaxExpiry, c.UploadURLExpiry))
		}
		if len(c.Etcd) > 0 {
			if _, err := c.etcdConfig(nil); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if c.runsQuery() {
		qc := c.queryConfig()
		if qc.Meta == "" {
			errs = append(errs, errors.New("--meta is required for --role=query"))
			qc.Meta = "unset" // reported above, not again by query
		}
		if err := qc.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
