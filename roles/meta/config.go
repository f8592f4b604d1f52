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
	Logger     *slog.Logger
}

// DefaultConfig returns a Config with every tunable at its default.
func DefaultConfig() Config {
	return Config{
		Listen:           "127.0.0.1:50052",
		DataDir:          "./lake-data",
		MaxAppendBytes:   wire.MaxAppendBytes,
		MaxGroupRequests: 512,
		ForwardTimeout:   10 * time.Second,
		VerifyRate:       DefaultVerifyRate,
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
	return errors.Join(errs...)
}
