package meta

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sort"
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

	mu       sync.RWMutex
	tables   map[string]*table
	createMu sync.Mutex // serializes adding tables within this node

	cluster  cluster.Coordinator
	ready    atomic.Bool  // caught up since this node last won an election
	versions atomic.Int64 // sum of the table heads, for status reports
	peers    peerClients
	sync     syncQueue

	ctx    context.Context // cancelled by Close; stops the committers
	cancel context.CancelFunc
	wg     sync.WaitGroup

	clusterCancel context.CancelFunc // stops the cluster after the committers
	clusterDone   chan struct{}

	lis  net.Listener
	grpc *grpc.Server
}

// table is the in-memory state of one table. The committer goroutine is
// its only writer; readers take mu.
type table struct {
	id        string
	name      string
	schema    *arrow.Schema
	schemaRaw []byte
	createdAt time.Time
	queue     chan *appendReq

	// writeMu is held while the index of this table changes: by the
	// committer for a whole group commit, by a follower's catch-up.
	writeMu sync.Mutex

	mu    sync.Mutex
	head  int64
	files []*lakepb.DataFile // data files of the head version, in order
	rows  int64              // rows of the head version
}

func (t *table) row() tableRow {
	t.mu.Lock()
	defer t.mu.Unlock()
	return tableRow{ID: t.id, Name: t.name, Schema: t.schemaRaw, CreatedAt: t.createdAt, Head: t.head}
}

func (t *table) info() *lakepb.TableInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	return &lakepb.TableInfo{
		Name: t.name, Id: t.id, Schema: t.schemaRaw, Version: t.head,
		CreatedAtUnixMicros: t.createdAt.UnixMicro(), Rows: t.rows, DataFiles: int64(len(t.files)),
	}
}

// advance moves the in-memory head past applied log records and returns
// by how many versions it moved.
func (t *table) advance(recs []*logRecord) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	before := t.head
	for _, r := range recs {
		if r.Version <= t.head {
			continue
		}
		t.files = append(t.files, r.protoFiles()...)
		t.rows += r.Rows
		t.head = r.Version
	}
	return t.head - before
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
		ix: ix, lock: lock, tables: make(map[string]*table), clusterDone: make(chan struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if err := s.load(ctx); err != nil {
		s.cancel()
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
	// The coordinator is in place before the first call can arrive.
	s.startCluster()
	s.startVerifier()
	if s.lis != nil {
		s.serve()
	}
	return s, nil
}

// load fills memory from the index, rebuilding it if it was made for
// another stage, adds tables the index lacks from the stage catalog, and
// applies every log record past each table's head.
func (s *Service) load(ctx context.Context) error {
	start := time.Now()
	bound, err := s.ix.stage()
	if err != nil {
		return err
	}
	if bound != s.cfg.StageURI {
		if bound != "" {
			s.log.Warn("index was built for another stage; rebuilding", "index_stage", bound, "stage", s.cfg.StageURI)
		}
		if err := s.ix.reset(s.cfg.StageURI); err != nil {
			return fmt.Errorf("meta: reset index: %w", err)
		}
	}
	rows, err := s.ix.tables()
	if err != nil {
		return err
	}
	for _, r := range rows {
		t, err := newTable(r.ID, r.Name, r.Schema, r.CreatedAt)
		if err != nil {
			return err
		}
		var recs []*logRecord
		if err := s.ix.records(r.ID, 1, r.Head, false, func(rec *logRecord) bool {
			recs = append(recs, rec)
			return true
		}); err != nil {
			return err
		}
		s.advance(t, recs)
		s.addTable(t)
	}
	names, err := s.stage.catalogNames(ctx)
	if err != nil {
		return fmt.Errorf("meta: list the stage catalog: %w", err)
	}
	for _, name := range names {
		if s.lookup(name) != nil {
			continue
		}
		if _, err := s.loadFromStage(ctx, name); err != nil {
			return err
		}
	}
	for _, t := range s.allTables() {
		if err := s.catchUp(ctx, t); err != nil {
			return err
		}
	}
	s.log.Info("index ready", "tables", len(s.allTables()), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

func newTable(id, name string, schemaRaw []byte, createdAt time.Time) (*table, error) {
	schema, err := wire.DecodeSchema(schemaRaw)
	if err != nil {
		return nil, fmt.Errorf("meta: table %q: %w", name, err)
	}
	return &table{id: id, name: name, schema: schema, schemaRaw: schemaRaw, createdAt: createdAt}, nil
}

// addTable registers t and starts its committer.
func (s *Service) addTable(t *table) {
	t.queue = make(chan *appendReq, 4*s.cfg.MaxGroupRequests)
	s.mu.Lock()
	s.tables[t.name] = t
	s.mu.Unlock()
	s.wg.Add(1)
	go s.runCommitter(t)
}

// loadFromStage reads a table the index does not know from the stage
// catalog and its creation record, and indexes it.
func (s *Service) loadFromStage(ctx context.Context, name string) (*table, error) {
	entry, err := s.stage.readCatalog(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("meta: table %q: %w", name, err)
	}
	raw, rec0, err := s.stage.readRecord(ctx, entry.TableID, 0)
	if err != nil {
		return nil, fmt.Errorf("meta: table %q: creation record: %w", name, err)
	}
	t, err := newTable(entry.TableID, name, rec0.Schema, rec0.CommittedAt)
	if err != nil {
		return nil, err
	}
	if err := s.ix.apply(t.row(), [][]byte{raw}, []*logRecord{rec0}); err != nil {
		return nil, fmt.Errorf("meta: index table %q: %w", name, err)
	}
	s.addTable(t)
	return t, nil
}

// catchUp applies every log record past t's head, reading the stage until
// the log ends. The caller holds t.writeMu (or is load, before the
// committers run).
func (s *Service) catchUp(ctx context.Context, t *table) error {
	return s.catchUpTo(ctx, t, -1)
}

// catchUpTo is catchUp up to version last (-1: the end of the log). A known
// last saves the read that would find the end.
func (s *Service) catchUpTo(ctx context.Context, t *table, last int64) error {
	row := t.row()
	var raws [][]byte
	var recs []*logRecord
	for v := row.Head + 1; last < 0 || v <= last; v++ {
		raw, rec, err := s.stage.readRecord(ctx, t.id, v)
		if errors.Is(err, objects.ErrNotFound) {
			break
		}
		if err != nil {
			return fmt.Errorf("meta: catch up table %q: %w", t.name, err)
		}
		raws, recs = append(raws, raw), append(recs, rec)
		// Apply in chunks so a long log never sits in memory at once.
		if len(recs) == 1024 {
			if err := s.applyRecords(t, raws, recs); err != nil {
				return err
			}
			raws, recs = raws[:0], recs[:0]
		}
	}
	if len(recs) == 0 {
		return nil
	}
	return s.applyRecords(t, raws, recs)
}

func (s *Service) applyRecords(t *table, raws [][]byte, recs []*logRecord) error {
	if err := s.ix.apply(t.row(), raws, recs); err != nil {
		return fmt.Errorf("meta: index table %q: %w", t.name, err)
	}
	s.advance(t, recs)
	s.log.Debug("caught up from the stage log", "table", t.name, "version", recs[len(recs)-1].Version, "records", len(recs))
	return nil
}

func (s *Service) lookup(name string) *table {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.tables[name]
}

// table finds a table by name. A follower that does not know the name
// looks in the stage catalog: the leader may have created it a moment ago.
func (s *Service) table(ctx context.Context, name string) (*table, error) {
	if err := wire.ValidateTableName(name); err != nil {
		return nil, err
	}
	if t := s.lookup(name); t != nil {
		return t, nil
	}
	if !s.canCommit() {
		t, err := s.ensureTable(ctx, name)
		if err == nil {
			return t, nil
		}
		if !errors.Is(err, objects.ErrNotFound) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("%w: %q", wire.ErrTableNotFound, name)
}

func (s *Service) allTables() []*table {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*table, 0, len(s.tables))
	for _, t := range s.tables {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
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
	s.createMu.Lock()
	defer s.createMu.Unlock()
	if err := s.ctx.Err(); err != nil {
		return nil, ErrClosed
	}
	if t := s.lookup(name); t != nil {
		s.log.Debug("create: the table exists", "table", name)
		return s.existing(t, ifNotExists)
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
		s.log.Info("another node created the table first", "table", name)
		_ = s.store.Delete(ctx, layout.LogKey(id, 0)) // our orphan; harmless if it stays
		t, lerr := s.loadFromStage(ctx, name)
		if lerr != nil {
			return nil, lerr
		}
		return s.existing(t, ifNotExists)
	}
	if err != nil {
		return nil, fmt.Errorf("meta: create %q: write catalog entry: %w", name, err)
	}
	t := &table{id: id, name: name, schema: schema, schemaRaw: schemaRaw, createdAt: now}
	if err := s.ix.apply(t.row(), [][]byte{raw}, []*logRecord{rec0}); err != nil {
		// Committed in the stage; the next start indexes it from there.
		return nil, fmt.Errorf("meta: create %q: index: %w", name, err)
	}
	s.addTable(t)
	if !s.canCommit() {
		// Created, but this node stopped leading meanwhile: it does not
		// acknowledge. A retry with if_not_exists finds the table.
		s.log.Warn("created a table but stopped leading meanwhile; not acknowledging", "table", name, "id", id)
		return nil, errNotLeading
	}
	s.cluster.PublishHead(cluster.Head{TableID: id, Name: name, Version: 0})
	s.log.Info("table created", "table", name, "id", id)
	info := t.info()
	info.Created = true
	return info, nil
}

func (s *Service) existing(t *table, ifNotExists bool) (*lakepb.TableInfo, error) {
	if !ifNotExists {
		return nil, fmt.Errorf("%w: %q", wire.ErrTableExists, t.name)
	}
	return t.info(), nil
}

// ListTables returns every table, by name.
func (s *Service) ListTables(context.Context) []*lakepb.TableInfo {
	ts := s.allTables()
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
	err = s.ix.records(t.id, 0, t.row().Head, true, func(r *logRecord) bool {
		h.Versions = append(h.Versions, &lakepb.VersionInfo{
			Version: r.Version, CommittedAtUnixMicros: r.CommittedAt.UnixMicro(),
			Rows: r.Rows, CommitIds: r.commitIDs(), Files: r.protoFiles(),
		})
		return limit == 0 || int64(len(h.Versions)) < limit
	})
	return h, err
}

// Snapshot returns the data files that make up a table at a version (the
// latest when version is nil, and at least minVersion when that is set).
func (s *Service) Snapshot(ctx context.Context, name string, version, minVersion *int64) (*lakepb.Snapshot, error) {
	t, err := s.table(ctx, name)
	if err != nil {
		return nil, err
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
		t.mu.Unlock()
		return snap, nil
	}
	t.mu.Unlock()
	if *version < 0 || *version > head {
		return nil, fmt.Errorf("%w: table %q has versions 0..%d, not %d", wire.ErrVersionNotFound, name, head, *version)
	}
	snap.Version = *version
	err = s.ix.records(t.id, 1, *version, false, func(r *logRecord) bool {
		snap.Files = append(snap.Files, r.protoFiles()...)
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
	s.peers.close()
	err := s.ix.close()
	return errors.Join(cerr, err, s.lock.release())
}
