package meta

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/roles/meta/cluster"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// Config configures a metadata service.
type Config struct {
	// Listen is the Flight address to serve on ("127.0.0.1:0" picks a
	// port). Empty: no Flight server, the Go API only.
	Listen string
	// DataDir holds the bbolt index and the lock file.
	DataDir string
	// Stage is the managed stage; StageURI names it, so an index built for
	// another stage is detected and rebuilt.
	Stage    objects.Store
	StageURI string
	// Discover is what lake.discover answers; derived from StageURI when
	// nil. It never holds credentials.
	Discover *lakepb.StageDescriptor
	// MaxAppendBytes bounds the Arrow data of one append stream, so a
	// single client cannot exhaust the leader's memory.
	MaxAppendBytes int64
	// MaxGroupRequests bounds how many appends one group commit merges.
	MaxGroupRequests int
	// ServerOptions are extra gRPC server options (TLS, interceptors).
	ServerOptions []grpc.ServerOption
	// TokensRequired says that ServerOptions make every call carry a
	// bearer token (auth.ServerOptions). Without it the node warns at
	// start that it is open to anyone who can reach it.
	TokensRequired bool
	// Cluster decides who leads. nil: this node alone, always the leader
	// (the embedded default). With several nodes, followers forward every
	// mutation to the leader and keep their index current from its
	// announcements.
	Cluster cluster.Coordinator
	// PeerDial holds the token and CA a follower uses towards the leader.
	PeerDial flightrpc.DialOptions
	// ForwardTimeout bounds one mutation forwarded to the leader, so a
	// frozen leader cannot hold a follower's callers forever.
	ForwardTimeout time.Duration
	// VerifyRate is how many bytes per second the leader reads in the
	// background to check the tables' objects against their rows' size
	// and sha256 (verify_background.go); 0 turns that off.
	VerifyRate int64
	// CompactMinFiles: the leader merges a table's small data files in
	// the background once its current version has more than this many
	// (0 turns that off; lake.table.compact still works). It bounds how
	// many small files a table carries between compactions.
	CompactMinFiles int
	// CompactTargetSize is the size of data file compaction aims at; a
	// file at least this large is not small and is never merged again.
	CompactTargetSize int64
	// CheckpointInterval: the leader writes a log checkpoint of a table
	// every this many versions (checkpoint.go), so a node learning the
	// table from the stage reads O(1) objects plus at most about this many
	// log records. 0 writes none (existing ones are still read).
	CheckpointInterval int64
	// CommitRetention is how long a commit_id is remembered through
	// checkpoints: a retry within it is answered duplicate = true even by
	// a node that learned the table from a checkpoint. A node that read
	// the log record itself remembers it for as long as its index lives.
	CommitRetention time.Duration
	// GCLeftoverMinAge is the least age of a temp file or unfinished
	// multipart upload that gc removes, whatever the grace it is given,
	// so a write in flight is not cut off (default a minute).
	GCLeftoverMinAge time.Duration
	// Retention, when positive, makes the leader expire the versions of
	// every table that stopped being current longer ago than this, every
	// tenth of it (at most hourly). 0 keeps every version.
	Retention time.Duration
	// URLMaxExpiry is the longest a read URL (lake.table.url) may work;
	// a request for longer is refused. At most DefaultURLMaxExpiry, the
	// longest an S3 presigned URL can work.
	URLMaxExpiry time.Duration
	// UploadURLExpiry is how long the part URLs of an upload grant work,
	// and the most a client may ask for (lake.upload.grant, renew).
	UploadURLExpiry time.Duration
	// NoMetrics leaves out the service's Prometheus metrics (Gatherer
	// answers an empty registry): what the benchmark of their cost
	// compares against.
	NoMetrics bool
	Logger    *slog.Logger
}

// Compaction defaults: a query over a table opens at most about 64 small
// files beside its large ones, and a large file holds 128 MiB of rows.
const (
	DefaultCompactMinFiles   = 64
	DefaultCompactTargetSize = 128 << 20
)

// DefaultConfig returns a Config with every tunable at its default.
func DefaultConfig() Config {
	return Config{
		Listen:           "127.0.0.1:50052",
		DataDir:          "./lake-data",
		MaxAppendBytes:   wire.MaxAppendBytes,
		MaxGroupRequests: 512,
		ForwardTimeout:   10 * time.Second,
		VerifyRate:       DefaultVerifyRate,

		CompactMinFiles:   DefaultCompactMinFiles,
		CompactTargetSize: DefaultCompactTargetSize,

		CheckpointInterval: DefaultCheckpointInterval,
		CommitRetention:    DefaultCommitRetention,
		GCLeftoverMinAge:   time.Minute,
		URLMaxExpiry:       DefaultURLMaxExpiry,
		UploadURLExpiry:    DefaultUploadURLExpiry,
	}
}

// Validate returns every field error at once.
func (c Config) Validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("meta: DataDir is required"))
	}
	if c.Stage == nil {
		errs = append(errs, errors.New("meta: Stage is required"))
	}
	if c.StageURI == "" {
		errs = append(errs, errors.New("meta: StageURI is required"))
	}
	if c.MaxAppendBytes <= 0 {
		errs = append(errs, fmt.Errorf("meta: MaxAppendBytes must be positive, got %d", c.MaxAppendBytes))
	}
	if c.MaxGroupRequests <= 0 {
		errs = append(errs, fmt.Errorf("meta: MaxGroupRequests must be positive, got %d", c.MaxGroupRequests))
	}
	if c.ForwardTimeout <= 0 {
		errs = append(errs, fmt.Errorf("meta: ForwardTimeout must be positive, got %v", c.ForwardTimeout))
	}
	if c.VerifyRate < 0 {
		errs = append(errs, fmt.Errorf("meta: VerifyRate must not be negative, got %d", c.VerifyRate))
	}
	if c.CompactMinFiles < 0 {
		errs = append(errs, fmt.Errorf("meta: CompactMinFiles must not be negative, got %d", c.CompactMinFiles))
	}
	if c.CheckpointInterval < 0 {
		errs = append(errs, fmt.Errorf("meta: CheckpointInterval must not be negative, got %d", c.CheckpointInterval))
	}
	if c.Retention < 0 {
		errs = append(errs, fmt.Errorf("meta: Retention must not be negative, got %v", c.Retention))
	}
	if c.CommitRetention < 0 {
		errs = append(errs, fmt.Errorf("meta: CommitRetention must not be negative, got %v", c.CommitRetention))
	}
	if c.CompactTargetSize <= 0 {
		errs = append(errs, fmt.Errorf("meta: CompactTargetSize must be positive, got %d", c.CompactTargetSize))
	}
	if c.URLMaxExpiry < time.Second || c.URLMaxExpiry > DefaultURLMaxExpiry {
		errs = append(errs, fmt.Errorf("meta: URLMaxExpiry must be between 1s and %v, got %v", DefaultURLMaxExpiry, c.URLMaxExpiry))
	}
	if c.UploadURLExpiry < time.Second || c.UploadURLExpiry > DefaultURLMaxExpiry {
		errs = append(errs, fmt.Errorf("meta: UploadURLExpiry must be between 1s and %v, got %v", DefaultURLMaxExpiry, c.UploadURLExpiry))
	}
	return errors.Join(errs...)
}
