package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/local"
	"github.com/lakedata/lake/roles/meta"
)

// serveOptions are the flags of `lake serve` (DESIGN §6).
type serveOptions struct {
	role    string
	listen  string
	dataDir string
	stage   string
}

func (o *serveOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.role, "role", "meta", "which role to run: meta")
	f.StringVar(&o.listen, "listen", "127.0.0.1:50052", "Flight address of the role")
	f.StringVar(&o.dataDir, "data-dir", "./lake-data", "directory for the role's local state (index, lock)")
	f.StringVar(&o.stage, "stage", "", "managed stage: file:///abs/dir (default <data-dir>/stage)")
}

func newServeCommand(g *globalOptions) *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a lake service",
		Example: `  # the metadata service on a local stage
  lake serve --role=meta --listen 127.0.0.1:50052 --data-dir ./lake-data`,
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

func runServe(ctx context.Context, o *serveOptions, logger *slog.Logger) error {
	switch o.role {
	case "meta":
	default:
		return fmt.Errorf("%w: --role %q: want meta", errUsage, o.role)
	}
	store, uri, err := openStage(o.stage, o.dataDir, logger)
	if err != nil {
		return err
	}
	cfg := meta.DefaultConfig()
	cfg.Listen, cfg.DataDir = o.listen, o.dataDir
	cfg.Stage, cfg.StageURI = store, uri.String()
	cfg.Logger = logger.With("role", "meta")
	svc, err := meta.Open(ctx, cfg)
	if err != nil {
		return err
	}
	<-ctx.Done()
	logger.Info("shutting down")
	closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return svc.Close(closeCtx)
}

// openStage opens the managed stage a --stage value names.
func openStage(uri, dataDir string, logger *slog.Logger) (objects.Store, objects.StageURI, error) {
	if uri == "" {
		uri = filepath.Join(dataDir, "stage")
	}
	u, err := objects.ParseStageURI(uri)
	if err != nil {
		return nil, objects.StageURI{}, err
	}
	switch u.Kind {
	case objects.KindLocal:
		s, err := local.Open(u.Path, logger)
		return s, u, err
	}
	return nil, u, fmt.Errorf("stage %s: the %s stage is not supported yet", u, u.Kind)
}
