package meta

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/google/uuid"
	"google.golang.org/grpc"

	"github.com/lakedata/lake/internal/failpoint"
	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/layout"
	"github.com/lakedata/lake/roles/meta/cluster"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// Service is a metadata node: the leader commits, a follower forwards
// mutations to the leader and serves reads from its own index.
type Service struct {
	cfg   Config
	log   *slog.Logger
	store objects.Store
	stage stageLog
	ix    *index
	lock  *dirLock
	reg   *registry

	// cluster exists from Open on: a lone node's coordinator is made
	// before the index loads, an etcd one is given in Config.
	cluster cluster.Coordinator
	ready   atomic.Bool // caught up since this node last won an election
	fwd     *forwarder  // a follower's one way to the leader
	sync    syncQueue

	holds dataHolds // data files being written, which gc must not free
	gc    gcFence   // between the collector and the appends

	compactQ    tableQueue // tables the background compactor looks at
	checkpointQ tableQueue // tables due for a log checkpoint

	handlers map[string]actionHandler // the action table's handlers
	metrics  *metrics                 // nil with Config.NoMetrics
	heard    heardHeads               // announced heads, for the lag

	ctx    context.Context // cancelled by Close; stops the committers
	cancel context.CancelFunc
	wg     sync.WaitGroup

	clusterCancel context.CancelFunc // stops the cluster after the committers
	clusterDone   chan struct{}

	lis  net.Listener
	grpc *grpc.Server
}

// Open opens the data dir, rebuilds or catches up the index from the stage,
// and starts serving Flight on cfg.Listen (if set).
func Open(ctx context.Context, cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Discover == nil {
		u, err := objects.ParseStageURI(cfg.StageURI)
		if err != nil {
			return nil, fmt.Errorf("meta: %w", err)
		}
		cfg.Discover = u.Descriptor()
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("meta: data dir: %w", err)
	}
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	ix, err := openIndex(cfg.DataDir, logger)
	if err != nil {
		lock.release()
		return nil, err
	}
	s := &Service{
		cfg: cfg, log: logger, store: cfg.Stage, stage: stageLog{store: cfg.Stage},
		ix: ix, lock: lock, cluster: cfg.Cluster, clusterDone: make(chan struct{}),
	}
	// The coordinator exists before anything is loaded, so every part may
	// use it from the start. A lone node learns its address once it
	// listens, after loading, so no connection hangs on a node that is
	// still loading.
	var single *cluster.Single
	if s.cluster == nil {
		single = cluster.NewSingle("")
		s.cluster = single
	}
	s.fwd = &forwarder{coord: s.cluster, dial: cfg.PeerDial, timeout: cfg.ForwardTimeout}
	s.handlers = s.actionHandlers()
	if !cfg.NoMetrics {
		s.metrics = newMetrics(s)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.sync.init()
	s.compactQ.init()
	s.checkpointQ.init()
	s.reg = newRegistry(s.stage, ix, logger, s.startCommitter, s.cluster.Report)
	s.reg.checkpointEvery, s.reg.checkpointDue = cfg.CheckpointInterval, s.checkpointQ.note
	if err := s.reg.load(ctx, cfg.StageURI); err != nil {
		s.cancel()
		s.wg.Wait()
		ix.close()
		lock.release()
		return nil, err
	}
	if cfg.Listen != "" {
		if err := s.listen(cfg.Listen); err != nil {
			s.cancel()
			s.wg.Wait()
			ix.close()
			lock.release()
			return nil, err
		}
	}
	if single != nil {
		if a := s.Addr(); a != nil {
			single.SetAddr(a.String())
		}
		s.ready.Store(true) // load has caught up: a lone node leads now
	}
	s.runCluster()
	s.startVerifier()
	s.startCompactor()
	s.startCheckpointer()
	s.startExpirer()
	if s.lis != nil {
		s.serve()
	}
	return s, nil
}

// CreateTable creates a table at version 0. A second create of the same
// name fails with wire.ErrTableExists unless ifNotExists is set.
func (s *Service) CreateTable(ctx context.Context, name string, schema *arrow.Schema, ifNotExists bool) (*lakepb.TableInfo, error) {
	if err := wire.ValidateTableName(name); err != nil {
		return nil, err
	}
	if err := wire.ValidateSchema(schema); err != nil {
		return nil, err
	}
	if !s.canCommit() {
		return s.forwardCreate(ctx, name, schema, ifNotExists)
	}
	if err := s.ctx.Err(); err != nil {
		return nil, ErrClosed
	}
	t, found, err := s.reg.create(ctx, name, func() (*table, error) { return s.writeTable(ctx, name, schema) })
	if err != nil {
		return nil, err
	}
	if found {
		return s.existing(t, ifNotExists)
	}
	if !s.canCommit() {
		// Created, but this node stopped leading meanwhile: it does not
		// acknowledge. A retry with if_not_exists finds the table.
		s.log.Warn("created a table but stopped leading meanwhile; not acknowledging", "table", name, "id", t.id)
		return nil, errNotLeading
	}
	s.cluster.PublishHead(cluster.Head{TableID: t.id, Name: name, Version: 0})
	s.log.Info("table created", "table", name, "id", t.id)
	info := t.info()
	info.Created = true
	return info, nil
}

// startCommitter gives t its committer; the registry runs it for every
// table it adds.
func (s *Service) startCommitter(t *table) {
	t.commits = &committer{
		t: t, queue: make(chan *commitReq, 4*s.cfg.MaxGroupRequests), maxGroup: s.cfg.MaxGroupRequests, stop: s.ctx,
		reg: s.reg, stage: s.stage, store: s.store, ix: s.ix, leading: s.canCommit, publish: s.cluster.PublishHead,
		afterCommit: s.afterCommit, log: s.log, holds: &s.holds, metrics: s.metrics,
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t.commits.run()
	}()
}

// writeTable commits a new table to the stage, version 0 and then the
// catalog entry, and indexes it. It returns errCreatedElsewhere when
// another node's catalog entry won. The caller holds the registry's add
// lock.
func (s *Service) writeTable(ctx context.Context, name string, schema *arrow.Schema) (*table, error) {
	if err := s.ctx.Err(); err != nil {
		return nil, ErrClosed // no committer may start after Close
	}
	id := uuid.Must(uuid.NewV7()).String()
	now := time.Now().UTC()
	schemaRaw := wire.EncodeSchema(schema)
	rec0 := &logRecord{Format: recordFormat, TableID: id, Version: 0, CommittedAt: now, Name: name, Schema: schemaRaw}
	raw, err := s.stage.putRecord(ctx, rec0)
	if err != nil {
		return nil, fmt.Errorf("meta: create %q: write creation record: %w", name, err)
	}
	// The catalog entry is the commit point: exactly one creator wins it.
	failpoint.Hit("meta-before-catalog-put")
	err = s.stage.putCatalog(ctx, catalogEntry{Format: recordFormat, Name: name, TableID: id, CreatedAt: now})
	if errors.Is(err, objects.ErrExists) {
		s.metrics.catalogConflict()
		s.log.Info("another node created the table first", "table", name)
		_ = s.store.Delete(ctx, layout.LogKey(id, 0)) // our orphan; harmless if it stays
		return nil, errCreatedElsewhere
	}
	if err != nil {
		return nil, fmt.Errorf("meta: create %q: write catalog entry: %w", name, err)
	}
	t := &table{id: id, name: name, schema: schema, schemaRaw: schemaRaw, fileCols: fileColumns(schema), createdAt: now}
	if err := s.ix.apply(t.row(), [][]byte{raw}, []*logRecord{rec0}); err != nil {
		// Committed in the stage; the next start indexes it from there.
		return nil, fmt.Errorf("meta: create %q: index: %w", name, err)
	}
	return t, nil
}

// table finds a table by name. A node that cannot commit (a follower)
// also looks in the stage catalog: the leader may have created it a
// moment ago.
func (s *Service) table(ctx context.Context, name string) (*table, error) {
	return s.reg.find(ctx, name, !s.canCommit())
}

// leaderTable finds the table a change on the leader is for: errNotLeading
// on any other node (whose caller forwards the change).
func (s *Service) leaderTable(ctx context.Context, name string) (*table, error) {
	if !s.canCommit() {
		return nil, errNotLeading
	}
	return s.table(ctx, name)
}

func (s *Service) existing(t *table, ifNotExists bool) (*lakepb.TableInfo, error) {
	if !ifNotExists {
		return nil, fmt.Errorf("%w: %q", wire.ErrTableExists, t.name)
	}
	return t.info(), nil
}

// ListTables returns every table, by name.
func (s *Service) ListTables(context.Context) []*lakepb.TableInfo {
	ts := s.reg.all()
	out := make([]*lakepb.TableInfo, len(ts))
	for i, t := range ts {
		out[i] = t.info()
	}
	return out
}

// DescribeTable returns a table's schema and current version, at least
// minVersion when it is not nil.
func (s *Service) DescribeTable(ctx context.Context, name string, minVersion *int64) (*lakepb.TableInfo, error) {
	t, err := s.table(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := s.reach(ctx, t, minVersion); err != nil {
		return nil, err
	}
	return t.info(), nil
}

// History returns a table's versions, newest first; limit 0 means all.
func (s *Service) History(ctx context.Context, name string, limit int64) (*lakepb.History, error) {
	t, err := s.table(ctx, name)
	if err != nil {
		return nil, err
	}
	if limit < 0 {
		return nil, fmt.Errorf("%w: negative limit", wire.ErrInvalidRequest)
	}
	h := &lakepb.History{Name: name}
	retained := t.retained()
	err = s.reg.records(ctx, t, 0, t.row().Head, true, func(r *logRecord) bool {
		h.Versions = append(h.Versions, &lakepb.VersionInfo{
			Version: r.Version, CommittedAtUnixMicros: r.CommittedAt.UnixMicro(),
			Rows: r.Rows, CommitIds: r.commitIDs(), Files: r.protoFiles(),
			Kind: r.kindName(), Expired: r.Version < retained, Removes: r.Removes,
		})
		return limit == 0 || int64(len(h.Versions)) < limit
	})
	return h, err
}

// Snapshot returns the data files that make up a table at a version: the
// latest (at least req.MinVersion when that is set), req.Version, or the
// newest version committed at or before req.AtUnixMicros (time travel). A
// version never committed, or a time before the table's creation, is
// wire.ErrVersionNotFound; a time in the future wire.ErrTimestampInFuture;
// an expired version wire.ErrVersionExpired.
func (s *Service) Snapshot(ctx context.Context, req *lakepb.SnapshotRequest) (*lakepb.Snapshot, error) {
	name, version, minVersion := req.GetName(), req.Version, req.MinVersion
	if req.AtUnixMicros != nil && (version != nil || minVersion != nil) {
		return nil, fmt.Errorf("%w: a snapshot at a time takes no version or min_version", wire.ErrInvalidRequest)
	}
	t, err := s.table(ctx, name)
	if err != nil {
		return nil, err
	}
	if req.AtUnixMicros != nil {
		v, err := s.versionAt(ctx, t, *req.AtUnixMicros)
		if err != nil {
			return nil, err
		}
		version = &v
	}
	target := minVersion
	if version != nil {
		target = version // a follower may not have reached it yet
	}
	if err := s.reach(ctx, t, target); err != nil {
		return nil, err
	}
	snap := &lakepb.Snapshot{Name: name, Id: t.id, Schema: t.schemaRaw}
	t.mu.Lock()
	head := t.head
	if version == nil || *version == head {
		snap.Version = head
		snap.Files = append([]*lakepb.DataFile(nil), t.files...)
		snap.CommittedAtUnixMicros = t.headAt
		t.mu.Unlock()
		if snap.CommittedAtUnixMicros != 0 {
			return snap, nil
		}
		// Not known since this node loaded the table: read it once.
		at, err := s.committedAt(ctx, t, head)
		if err != nil {
			return nil, err
		}
		t.mu.Lock()
		if t.head == head {
			t.headAt = at
		}
		t.mu.Unlock()
		snap.CommittedAtUnixMicros = at
		return snap, nil
	}
	t.mu.Unlock()
	if *version < 0 || *version > head {
		return nil, fmt.Errorf("%w: table %q has versions 0..%d, not %d", wire.ErrVersionNotFound, name, head, *version)
	}
	if err := s.checkRetained(t, *version); err != nil {
		return nil, err
	}
	snap.Version = *version
	from := int64(1)
	if base, err := s.ix.base(t.id); err != nil {
		return nil, err
	} else if base != nil && base.Version <= *version {
		snap.Files, from = base.protoFiles(), base.Version+1
		snap.CommittedAtUnixMicros = base.CommittedAt.UnixMicro()
	} else if *version == 0 {
		snap.CommittedAtUnixMicros = t.createdAt.UnixMicro()
	}
	err = s.reg.records(ctx, t, from, *version, false, func(r *logRecord) bool {
		snap.Files = r.applyFiles(snap.Files)
		snap.CommittedAtUnixMicros = r.CommittedAt.UnixMicro()
		return true
	})
	return snap, err
}

// Addr is the address the Flight server listens on, or nil.
func (s *Service) Addr() net.Addr {
	if s.lis == nil {
		return nil
	}
	return s.lis.Addr()
}

// Close stops serving, lets in-flight commits finish, fails queued appends
// with ErrClosed, resigns the leadership, and releases the index and the
// data-dir lock.
func (s *Service) Close(ctx context.Context) error {
	// Calls in flight finish (this node still leads meanwhile), then the
	// committers stop; queued appends get Unavailable.
	if s.grpc != nil {
		flightrpc.StopServer(ctx, s.grpc)
	}
	s.cancel()
	s.wg.Wait()
	s.ready.Store(false)
	// Only now that no commit runs may a follower take over.
	cerr := s.cluster.Close(ctx)
	s.clusterCancel()
	<-s.clusterDone
	s.fwd.close()
	err := s.ix.close()
	return errors.Join(cerr, err, s.lock.release())
}
