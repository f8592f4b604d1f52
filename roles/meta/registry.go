package meta

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/roles/meta/cluster"
	"github.com/lakedata/lake/wire"
)

// registry is the node's set of tables and the one way their state moves
// forward from the stage log: it loads them at start, finds them by name,
// adds the ones the stage catalog has and this node lacks (ensure), and
// applies log records past a table's head (catchUp). The committer moves a
// head by its own commits; everything else that learns of a version goes
// through catchUp.
type registry struct {
	stage stageLog
	ix    *index
	log   *slog.Logger
	// started runs for every table as it is added, before any caller can
	// find it: it starts the table's committer.
	started func(*table)
	// report hears the node's counts whenever a head moves.
	report func(cluster.Report)
	// checkpointEvery is the checkpoint interval (0: none are made);
	// checkpointDue hears of every table whose head passed a multiple of
	// it. Both are set before load.
	checkpointEvery int64
	checkpointDue   func(*table)

	mu       sync.RWMutex
	tables   map[string]*table
	addMu    sync.Mutex   // serializes adding tables within this node
	versions atomic.Int64 // sum of the table heads, for status reports
}

func newRegistry(stage stageLog, ix *index, log *slog.Logger, started func(*table), report func(cluster.Report)) *registry {
	return &registry{stage: stage, ix: ix, log: log, started: started, report: report, tables: make(map[string]*table)}
}

// load fills memory from the index, rebuilding it if it was made for
// another stage, adds the tables the index lacks from the stage catalog,
// and catches every table up from the stage log.
func (r *registry) load(ctx context.Context, stageURI string) error {
	start := time.Now()
	bound, err := r.ix.stage()
	if err != nil {
		return err
	}
	if bound != stageURI {
		if bound != "" {
			r.log.Warn("index was built for another stage; rebuilding", "index_stage", bound, "stage", stageURI)
		}
		if err := r.ix.reset(stageURI); err != nil {
			return fmt.Errorf("meta: reset index: %w", err)
		}
	}
	rows, err := r.ix.tables()
	if err != nil {
		return err
	}
	for _, row := range rows {
		t, err := newTable(row.ID, row.Name, row.Schema, row.CreatedAt)
		if err != nil {
			return err
		}
		if row.Base > 0 {
			c, err := r.ix.base(row.ID)
			if err != nil {
				return err
			}
			if c != nil {
				r.jump(t, c)
			}
		}
		var recs []*logRecord
		if err := r.ix.records(row.ID, t.row().Head+1, row.Head, false, func(rec *logRecord) bool {
			recs = append(recs, rec)
			return true
		}); err != nil {
			return err
		}
		r.advance(t, recs)
		r.add(t)
	}
	if err := r.sync(ctx); err != nil {
		return err
	}
	r.log.Info("index ready", "tables", r.counts().Tables, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// sync adds the tables of the stage catalog this node lacks and catches
// every table up from the stage log: what load does after the index, and
// what a new leader and a follower that may have missed announcements do.
func (r *registry) sync(ctx context.Context) error {
	names, err := r.stage.catalogNames(ctx)
	if err != nil {
		return fmt.Errorf("meta: list the stage catalog: %w", err)
	}
	for _, name := range names {
		if _, err := r.ensure(ctx, name); err != nil {
			return err
		}
	}
	for _, t := range r.all() {
		if err := r.catchUp(ctx, t, -1); err != nil {
			return err
		}
	}
	return nil
}

func newTable(id, name string, schemaRaw []byte, createdAt time.Time) (*table, error) {
	schema, err := wire.DecodeSchema(schemaRaw)
	if err != nil {
		return nil, fmt.Errorf("meta: table %q: %w", name, err)
	}
	return &table{id: id, name: name, schema: schema, schemaRaw: schemaRaw, fileCols: fileColumns(schema), createdAt: createdAt}, nil
}

// add makes t findable, once started has run for it.
func (r *registry) add(t *table) {
	r.started(t)
	r.mu.Lock()
	r.tables[t.name] = t
	r.mu.Unlock()
}

// lookup finds a table this node knows, or nil.
func (r *registry) lookup(name string) *table {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.tables[name]
}

// find looks a table up by name; with fromStage, a name this node does not
// know is looked for in the stage catalog (a follower: the leader may have
// created it a moment ago). A table found nowhere is wire.ErrTableNotFound.
func (r *registry) find(ctx context.Context, name string, fromStage bool) (*table, error) {
	if err := wire.ValidateTableName(name); err != nil {
		return nil, err
	}
	if t := r.lookup(name); t != nil {
		return t, nil
	}
	if fromStage {
		t, err := r.ensure(ctx, name)
		if err == nil {
			return t, nil
		}
		if !errors.Is(err, objects.ErrNotFound) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("%w: %q", wire.ErrTableNotFound, name)
}

// ensure returns the table called name, reading it from the stage catalog
// and its creation record when this node does not know it yet
// (objects.ErrNotFound: the stage has no such table either).
func (r *registry) ensure(ctx context.Context, name string) (*table, error) {
	r.addMu.Lock()
	defer r.addMu.Unlock()
	if t := r.lookup(name); t != nil {
		return t, nil
	}
	return r.fromStage(ctx, name)
}

// errCreatedElsewhere is what create's write returns when another node's
// catalog entry for the name won.
var errCreatedElsewhere = errors.New("meta: another node created the table first")

// create adds a table this node makes. Under the same lock as ensure it
// returns the table of that name when one exists already (found), or runs
// write, which commits a new table to the stage and the index. When write
// returns errCreatedElsewhere, the winner's table is read from the stage
// and found.
func (r *registry) create(ctx context.Context, name string, write func() (*table, error)) (t *table, found bool, err error) {
	r.addMu.Lock()
	defer r.addMu.Unlock()
	if t := r.lookup(name); t != nil {
		r.log.Debug("create: the table exists", "table", name)
		return t, true, nil
	}
	t, err = write()
	if errors.Is(err, errCreatedElsewhere) {
		t, err = r.fromStage(ctx, name)
		return t, true, err
	}
	if err != nil {
		return nil, false, err
	}
	r.add(t)
	return t, false, nil
}

// fromStage reads a table from the stage catalog and its creation record,
// indexes and adds it. The caller holds addMu.
func (r *registry) fromStage(ctx context.Context, name string) (*table, error) {
	entry, err := r.stage.readCatalog(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("meta: table %q: %w", name, err)
	}
	raw, rec0, err := r.stage.readRecord(ctx, entry.TableID, 0)
	if err != nil {
		return nil, fmt.Errorf("meta: table %q: creation record: %w", name, err)
	}
	t, err := newTable(entry.TableID, name, rec0.Schema, rec0.CommittedAt)
	if err != nil {
		return nil, err
	}
	if err := r.ix.apply(t.row(), [][]byte{raw}, []*logRecord{rec0}); err != nil {
		return nil, fmt.Errorf("meta: index table %q: %w", name, err)
	}
	r.add(t)
	return t, nil
}

// catchUp applies t's log records past its head: it reads the stage from
// head+1 up to version last (-1: until the first version the log lacks)
// and applies them to the index and to memory, 1024 at a time so a long
// log never sits in memory at once. When the head may be far behind (last
// is -1, or more than jumpAfter versions ahead), it first looks for a
// checkpoint past the head and starts from there (checkpoint.go), so a
// node learning a long log reads O(1) objects plus the log's tail.
//
// Locking: catchUp takes t.writeMu itself and holds it from reading the
// head to the last apply, so it never runs beside a commit of t (the
// committer holds writeMu while it builds, puts and applies a version) or
// beside another catch-up of t; every record is therefore read after the
// head it follows is applied, and applied once. The caller must not hold
// t.writeMu. A last that is already applied reads nothing from the stage.
func (r *registry) catchUp(ctx context.Context, t *table, last int64) error {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	head := t.row().Head
	if last >= 0 && head >= last {
		return nil // applied meanwhile
	}
	var raws [][]byte
	var recs []*logRecord
	if last < 0 && head > 0 {
		// A table this node has followed: the log usually ends at the
		// head (a start with its index, a gc), so one read settles it
		// before the hint is worth reading.
		raw, rec, err := r.stage.readRecord(ctx, t.id, head+1)
		if errors.Is(err, objects.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("meta: catch up table %q: %w", t.name, err)
		}
		raws, recs = append(raws, raw), append(recs, rec)
	}
	if last < 0 || last-head > jumpAfter {
		if err := r.jumpFromStage(ctx, t); err != nil {
			return err
		}
		if h := t.row().Head; h != head {
			head, raws, recs = h, raws[:0], recs[:0] // the probed record is below the checkpoint
		}
	}
	for v := head + int64(len(recs)) + 1; last < 0 || v <= last; v++ {
		raw, rec, err := r.stage.readRecord(ctx, t.id, v)
		if errors.Is(err, objects.ErrNotFound) {
			break
		}
		if err != nil {
			return fmt.Errorf("meta: catch up table %q: %w", t.name, err)
		}
		raws, recs = append(raws, raw), append(recs, rec)
		if len(recs) == 1024 {
			if err := r.apply(t, raws, recs); err != nil {
				return err
			}
			raws, recs = raws[:0], recs[:0]
		}
	}
	if len(recs) == 0 {
		return nil
	}
	return r.apply(t, raws, recs)
}

// jumpAfter: a catch-up more than this many versions behind reads the
// checkpoint hint first; a shorter one reads the log records it misses,
// which costs about as many requests.
const jumpAfter = 16

// jumpFromStage makes the table's newest checkpoint in the stage its base
// when that is past the head. A missing, unreadable or corrupt checkpoint
// is only a longer read of the log, never an error of the table: the log
// holds everything a checkpoint does. The caller holds t.writeMu.
func (r *registry) jumpFromStage(ctx context.Context, t *table) error {
	raw, c, err := r.stage.latestCheckpoint(ctx, t.id)
	switch {
	case errors.Is(err, objects.ErrNotFound):
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		r.log.Warn("cannot read the table's newest checkpoint; reading its log instead", "table", t.name, "err", err)
		return nil
	}
	if c.Name != t.name {
		r.log.Warn("the table's newest checkpoint names another table; reading its log instead", "table", t.name, "checkpoint_name", c.Name)
		return nil
	}
	if c.Version <= t.row().Head+1 {
		return nil // reading the log from the head is no longer
	}
	if err := r.setBase(t, raw, c); err != nil {
		return err
	}
	r.log.Debug("caught up from a checkpoint", "table", t.name, "version", c.Version)
	return nil
}

// setBase makes c (raw), a checkpoint of t at or before its head, the
// index's base for t. The caller holds t.writeMu.
func (r *registry) setBase(t *table, raw []byte, c *checkpointRecord) error {
	if err := r.ix.setBase(t.row(), raw, c); err != nil {
		return fmt.Errorf("meta: index table %q: %w", t.name, err)
	}
	r.jump(t, c)
	return nil
}

// apply writes records that follow t's head to the index, then to memory.
// The caller holds t.writeMu.
func (r *registry) apply(t *table, raws [][]byte, recs []*logRecord) error {
	if err := r.ix.apply(t.row(), raws, recs); err != nil {
		return fmt.Errorf("meta: index table %q: %w", t.name, err)
	}
	r.advance(t, recs)
	r.log.Debug("caught up from the stage log", "table", t.name, "version", recs[len(recs)-1].Version, "records", len(recs))
	return nil
}

// advance applies recs to t's in-memory state and keeps the node's report
// current. A head that passed a multiple of the checkpoint interval asks
// for a checkpoint.
func (r *registry) advance(t *table, recs []*logRecord) {
	n := t.advance(recs)
	if n == 0 {
		return
	}
	r.versions.Add(n)
	r.report(r.counts())
	if every := r.checkpointEvery; every > 0 && r.checkpointDue != nil {
		if head := t.row().Head; head/every > (head-n)/every {
			r.checkpointDue(t)
		}
	}
}

// jump moves t's in-memory state to checkpoint c, when that is past its
// head, and keeps the node's report current.
func (r *registry) jump(t *table, c *checkpointRecord) {
	if n := t.jump(c); n > 0 {
		r.versions.Add(n)
		r.report(r.counts())
	}
}

// records calls fn for each version of t in [from, to], in ascending
// order or in descending order when desc is set, until fn returns false.
// It reads the index, and the stage log for the versions the index lacks:
// those up to the base of a node that learned t from a checkpoint. It
// holds at most recordsChunk records at a time.
func (r *registry) records(ctx context.Context, t *table, from, to int64, desc bool, fn func(*logRecord) bool) error {
	for from <= to {
		lo, hi := from, min(to, from+recordsChunk-1)
		if desc {
			lo, hi = max(from, to-recordsChunk+1), to
		}
		got := make(map[int64]*logRecord, hi-lo+1)
		if err := r.ix.records(t.id, lo, hi, false, func(rec *logRecord) bool {
			got[rec.Version] = rec
			return true
		}); err != nil {
			return err
		}
		for i := range hi - lo + 1 {
			v := lo + i
			if desc {
				v = hi - i
			}
			rec := got[v]
			if rec == nil {
				var err error
				if _, rec, err = r.stage.readRecord(ctx, t.id, v); err != nil {
					return fmt.Errorf("meta: table %q version %d: %w", t.name, v, err)
				}
			}
			if !fn(rec) {
				return nil
			}
		}
		if desc {
			to = lo - 1
		} else {
			from = hi + 1
		}
	}
	return nil
}

const recordsChunk = 256

// counts is what this node reports about itself.
func (r *registry) counts() cluster.Report {
	r.mu.RLock()
	n := len(r.tables)
	r.mu.RUnlock()
	return cluster.Report{Tables: n, Versions: r.versions.Load()}
}

// all returns every table, by name.
func (r *registry) all() []*table {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*table, 0, len(r.tables))
	for _, t := range r.tables {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}
