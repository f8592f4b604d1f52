package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/checkpoint"
	"github.com/lakedata/lake/objects/stageopen"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// Client talks to one lake endpoint (a query service, or a metadata
// service for everything but SQL) and uploads file bytes straight to the
// stage the endpoint advertises. It is safe for concurrent use.
type Client struct {
	fc            flight.Client
	sql           *flightsql.Client
	stage         *lakepb.StageDescriptor
	store         objects.Store
	checkpointDir string
	log           *slog.Logger
}

type config struct {
	token         string
	tlsCA         string
	logger        *slog.Logger
	checkpointDir string
	// wrapStore lets tests in this package watch the stage calls.
	wrapStore func(objects.Store) objects.Store
}

// Option configures Connect.
type Option func(*config)

// WithToken sends token as a bearer token on every call. It never appears
// in errors or logs.
func WithToken(token string) Option { return func(c *config) { c.token = token } }

// WithTLSCA verifies a grpc+tls:// endpoint's certificate against the PEM
// CA bundle at path instead of the system roots.
func WithTLSCA(path string) Option { return func(c *config) { c.tlsCA = path } }

// WithLogger sets the logger; the default discards.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithCheckpointDir sets where uploads keep their checkpoints (DESIGN §7).
// The default is the user's state directory
// ($XDG_STATE_HOME/lake/uploads or ~/.local/state/lake/uploads), the one
// `lake uploads ls` reads; it is created when a put first needs it.
func WithCheckpointDir(dir string) Option { return func(c *config) { c.checkpointDir = dir } }

// Connect dials endpoint (grpc://host:port, grpc+tcp://, grpc+tls:// or a
// bare host:port), asks it where the stage is (lake.discover) and opens
// the stage with this process's own access to it.
func Connect(ctx context.Context, endpoint string, opts ...Option) (*Client, error) {
	cfg := config{logger: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.checkpointDir == "" {
		// No state dir (no $HOME) makes uploads not resumable, nothing
		// worse: an empty checkpoint dir means "no checkpoint".
		if dir, err := checkpoint.DefaultDir(); err == nil {
			cfg.checkpointDir = dir
		}
	}
	fc, err := flightrpc.DialEndpoint(endpoint, flightrpc.DialOptions{Token: cfg.token, TLSCAFile: cfg.tlsCA})
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	c := &Client{
		fc:            fc,
		sql:           &flightsql.Client{Client: fc, Alloc: memory.DefaultAllocator},
		checkpointDir: cfg.checkpointDir,
		log:           cfg.logger.With("endpoint", endpoint),
	}
	c.stage = &lakepb.StageDescriptor{}
	if err := c.action(ctx, wire.ActionDiscover, &lakepb.DiscoverRequest{}, c.stage); err != nil {
		fc.Close()
		return nil, fmt.Errorf("client: discover the stage at %s: %w", endpoint, err)
	}
	if err := c.openStage(ctx, cfg.logger); err != nil {
		fc.Close()
		return nil, err
	}
	if cfg.wrapStore != nil {
		c.store = cfg.wrapStore(c.store)
	}
	return c, nil
}

// openStage builds this client's own adapter for the advertised stage.
func (c *Client) openStage(ctx context.Context, logger *slog.Logger) error {
	d := c.stage
	switch d.GetKind() {
	case objects.KindLocal:
		// Opening would create a missing directory; here that would mean
		// uploading into a directory the service cannot see.
		fi, err := os.Stat(d.GetLocalPath())
		if err != nil || !fi.IsDir() || !filepath.IsAbs(d.GetLocalPath()) {
			return fmt.Errorf("client: the stage %s is not a directory this machine can reach; run the client where the stage is mounted", d.GetRootUri())
		}
	case objects.KindS3: // the client's own credentials: the AWS default chain
	default:
		return fmt.Errorf("client: stage kind %q: %w", d.GetKind(), ErrStageUnsupported)
	}
	s, err := stageopen.Open(ctx, d, logger)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	c.store = s
	return nil
}

// Close releases the connection and the stage adapter (objects.Store.Close).
func (c *Client) Close() error {
	return errors.Join(c.fc.Close(), c.store.Close())
}

// Stage returns what the endpoint said about its stage (never credentials).
func (c *Client) Stage() *lakepb.StageDescriptor { return c.stage }

// action runs a DoAction on the endpoint, mapping its status errors.
func (c *Client) action(ctx context.Context, typ string, req, resp proto.Message) error {
	return remoteError(flightrpc.Action(ctx, c.fc, typ, req, resp))
}
