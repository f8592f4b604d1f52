package query

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	flightgen "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"google.golang.org/grpc"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/layout"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// Service is a query node.
type Service struct {
	cfg     Config
	log     *slog.Logger
	meta    *flightrpc.Pool
	stage   *lakepb.StageDescriptor
	eng     *engine
	cat     *catalog
	relay   relay // the append relay's memory budget and schema cache (relay_guard.go)
	metrics *metrics
	ready   readyCache // whether meta answers, for /readyz (http.go)
	// consoleStage is the stage store the web console reads local
	// objects through (http.go), closed with the service.
	consoleStage objects.Store

	lis  net.Listener
	grpc *grpc.Server
}

// Open connects to the metadata service, learns the stage from it, starts
// the locked-down engine and serves Flight SQL on cfg.Listen.
func Open(ctx context.Context, cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if errNoArrow != nil {
		return nil, fmt.Errorf("query: %w", errNoArrow)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Service{cfg: cfg, log: logger}
	s.metrics = newMetrics(s)
	var err error
	if s.meta, err = flightrpc.DialPool(cfg.Meta, cfg.MetaDial); err != nil {
		return nil, fmt.Errorf("query: connect to meta %s: %w", cfg.Meta, err)
	}
	if s.stage, err = s.discover(ctx); err != nil {
		s.meta.Close()
		return nil, err
	}
	s.warnIfMetaOpen(ctx)
	emptyDir := filepath.Join(cfg.CacheDir, "empty")
	if err := os.MkdirAll(emptyDir, 0o755); err != nil {
		s.meta.Close()
		return nil, fmt.Errorf("query: cache dir: %w", err)
	}
	allowed := []string{cfg.CacheDir}
	if s.stage.GetKind() == "file" {
		// Table data only: SQL can never read the file objects themselves.
		allowed = append(allowed, filepath.Join(s.stage.GetLocalPath(), filepath.FromSlash(layout.TablesPrefix)))
	}
	for i, d := range allowed {
		if allowed[i], err = filepath.Abs(d); err != nil {
			s.meta.Close()
			return nil, err
		}
	}
	s.eng, err = openEngine(ctx, engineConfig{
		allowedDirs: allowed, memoryLimit: cfg.MemoryLimit, threads: cfg.Threads, timeout: cfg.StatementTimeout,
	})
	if err != nil {
		s.meta.Close()
		return nil, err
	}
	s.cat = &catalog{meta: s.meta, eng: s.eng, stage: s.stage, emptyDir: emptyDir, versions: map[string]tableView{}, acked: map[string]int64{}, old: map[string]*versionView{}, maxOld: maxVersionViews}
	if s.stage.GetKind() != "file" {
		if s.cat.cache, err = s.openCache(ctx); err != nil {
			s.Close(context.Background())
			return nil, err
		}
	}
	if err := s.serve(); err != nil {
		s.Close(context.Background())
		return nil, err
	}
	return s, nil
}

// openCache opens the remote stage with the role's own credentials and the
// local cache of its data files.
func (s *Service) openCache(ctx context.Context) (*fileCache, error) {
	if s.cfg.OpenStage == nil {
		return nil, fmt.Errorf("query: the stage is %s and this build cannot open it", s.stage.GetRootUri())
	}
	store, err := s.cfg.OpenStage(ctx, s.stage)
	if err != nil {
		return nil, fmt.Errorf("query: open stage %s: %w", s.stage.GetRootUri(), err)
	}
	c, err := openFileCache(filepath.Join(s.cfg.CacheDir, "data"), s.cfg.CacheLimit, store, s.log)
	if err != nil {
		return nil, err
	}
	c.metrics = s.metrics
	return c, nil
}

// discover asks meta for the stage, retrying while meta is not up yet so
// the roles can start in any order.
func (s *Service) discover(ctx context.Context) (*lakepb.StageDescriptor, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		var d lakepb.StageDescriptor
		err := s.meta.Action(ctx, wire.ActionDiscover, &lakepb.DiscoverRequest{}, &d)
		if err == nil {
			return &d, nil
		}
		s.log.Warn("waiting for the metadata service", "meta", s.cfg.Meta, "err", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("query: metadata service %s did not answer: %w", s.cfg.Meta, err)
		case <-time.After(delay):
		}
	}
}

func (s *Service) serve() error {
	lis, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("query: listen on %s: %w", s.cfg.Listen, err)
	}
	sqlSrv, err := newSQLServer(s, s.cfg.Version)
	if err != nil {
		lis.Close()
		return err
	}
	opts := append([]grpc.ServerOption{
		grpc.MaxRecvMsgSize(flightrpc.MaxMessageBytes), grpc.MaxSendMsgSize(flightrpc.MaxMessageBytes),
	}, s.cfg.ServerOptions...)
	s.lis, s.grpc = lis, grpc.NewServer(opts...)
	flightgen.RegisterFlightServiceServer(s.grpc, &endpoint{FlightServer: flightsql.NewFlightServer(sqlSrv), svc: s})
	go func() {
		if err := s.grpc.Serve(lis); err != nil {
			s.log.Error("flight server stopped", "err", err)
		}
	}()
	s.log.Info("query service listening", "addr", lis.Addr().String(), "meta", s.cfg.Meta, "stage", s.stage.GetRootUri())
	return nil
}

// Addr is the address the Flight SQL server listens on.
func (s *Service) Addr() net.Addr { return s.lis.Addr() }

// Close stops serving and releases the engine.
func (s *Service) Close(ctx context.Context) error {
	if s.grpc != nil {
		flightrpc.StopServer(ctx, s.grpc)
	}
	var errs []error
	if s.eng != nil {
		errs = append(errs, s.eng.close())
	}
	if s.consoleStage != nil {
		errs = append(errs, s.consoleStage.Close())
	}
	errs = append(errs, s.meta.Close())
	return errors.Join(errs...)
}

// validate checks q after bringing the views up to date (the statement
// must bind against the current tables).
func (s *Service) validate(ctx context.Context, q string) error {
	_, err := s.columns(ctx, q)
	return err
}

// columns is validate returning the names of q's result columns.
func (s *Service) columns(ctx context.Context, q string) ([]string, error) {
	if err := checkQueryText(q); err != nil {
		return nil, err
	}
	if _, err := s.cat.refresh(ctx); err != nil {
		return nil, err
	}
	return s.eng.check(ctx, q, s.cat)
}

// resultSchema returns the schema q would produce, without running it.
func (s *Service) resultSchema(ctx context.Context, q string) (*arrow.Schema, error) {
	names, err := s.columns(ctx, q)
	if err != nil {
		return nil, err
	}
	schema, err := s.eng.schema(ctx, q, names, s.cat)
	if err != nil {
		return nil, err
	}
	schema, _ = fileSchema(schema)
	return schema, nil
}

// run executes q on fresh views and streams its result.
func (s *Service) run(ctx context.Context, q string) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	began := time.Now()
	schema, ch, err := s.runStatement(ctx, q, began)
	if err != nil {
		s.metrics.queried(began, 0, err)
	}
	return schema, ch, err
}

// runStatement is run; the stream it starts records the statement's
// metrics when it ends.
func (s *Service) runStatement(ctx context.Context, q string, began time.Time) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	if err := checkQueryText(q); err != nil {
		return nil, nil, err
	}
	if _, err := s.cat.refresh(ctx); err != nil {
		return nil, nil, err
	}
	res, err := s.eng.query(ctx, q, s.cat)
	if err != nil {
		return nil, nil, err
	}
	schema, changed := fileSchema(res.Schema())
	ch := make(chan flight.StreamChunk, 2)
	go func() {
		var rows int64
		var streamErr error
		defer close(ch)
		defer res.Close()
		// Recorded before the stream ends, so a client that read it all
		// finds the statement counted.
		defer func() { s.metrics.queried(began, rows, streamErr) }()
		for res.Next() {
			rec := res.RecordBatch()
			rows += rec.NumRows()
			if changed != nil {
				rec = fileRecord(schema, changed, rec)
			} else {
				rec.Retain() // the stream releases what it sends
			}
			select {
			case ch <- flight.StreamChunk{Data: rec}:
			case <-ctx.Done():
				rec.Release()
				streamErr = ctx.Err()
				return
			}
		}
		if err := res.Err(); err != nil {
			streamErr = err
			select {
			case ch <- flight.StreamChunk{Err: statusErr(err)}:
			case <-ctx.Done():
			}
		}
	}()
	return schema, ch, nil
}
