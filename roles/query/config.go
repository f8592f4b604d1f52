package query

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/wire/lakepb"
)

// Config configures a query service.
type Config struct {
	// Listen is the Flight SQL address ("127.0.0.1:0" picks a port).
	Listen string
	// Meta is the metadata service's endpoint (host:port, grpc://…,
	// grpc+tls://…).
	Meta string
	// MetaDial holds the token and CA the query role uses towards meta.
	MetaDial flightrpc.DialOptions
	// CacheDir holds the role's own files (empty-table Parquet files; later
	// the cache of an S3 stage's data files). DuckDB may read it.
	CacheDir string
	// OpenStage opens a remote stage (S3) from its descriptor with the
	// role's own credentials; a local stage is read in place without it.
	OpenStage func(ctx context.Context, d *lakepb.StageDescriptor) (objects.Store, error)
	// CacheLimit bounds the local copies of a remote stage's data files.
	CacheLimit int64
	// MemoryLimit is DuckDB's memory_limit ("" = DuckDB's default, 80% of RAM).
	MemoryLimit string
	// Threads is DuckDB's thread count (0 = one per core).
	Threads int
	// StatementTimeout bounds one statement's run time.
	StatementTimeout time.Duration
	// RelayBuffer bounds the bytes of append frames the relay holds at
	// once, across all appends (each holds its frames until meta answers,
	// so it can resend them). An append that would go over is refused
	// with ResourceExhausted.
	RelayBuffer int64
	// ServerOptions are extra gRPC server options (TLS, auth).
	ServerOptions []grpc.ServerOption
	// Version is reported through GetSqlInfo.
	Version string
	Logger  *slog.Logger
}

// DefaultConfig returns a Config with every tunable at its default.
func DefaultConfig() Config {
	return Config{
		Listen:           "127.0.0.1:50051",
		Meta:             "127.0.0.1:50052",
		StatementTimeout: 5 * time.Minute,
		CacheLimit:       10 << 30,
		RelayBuffer:      256 << 20,
		Version:          "dev",
	}
}

// Validate returns every field error at once.
func (c Config) Validate() error {
	var errs []error
	if c.Listen == "" {
		errs = append(errs, errors.New("query: Listen is required"))
	}
	if c.Meta == "" {
		errs = append(errs, errors.New("query: Meta is required"))
	}
	if c.CacheDir == "" {
		errs = append(errs, errors.New("query: CacheDir is required"))
	}
	if c.StatementTimeout <= 0 {
		errs = append(errs, fmt.Errorf("query: StatementTimeout must be positive, got %v", c.StatementTimeout))
	}
	if c.CacheLimit <= 0 {
		errs = append(errs, fmt.Errorf("query: CacheLimit must be positive, got %d", c.CacheLimit))
	}
	if c.RelayBuffer <= 0 {
		errs = append(errs, fmt.Errorf("query: RelayBuffer must be positive, got %d", c.RelayBuffer))
	}
	if c.Threads < 0 {
		errs = append(errs, fmt.Errorf("query: Threads must not be negative, got %d", c.Threads))
	}
	return errors.Join(errs...)
}
