package meta

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lakedata/lake/internal/failpoint"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/layout"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// Garbage collection (DESIGN §11) frees, on the leader, what no retained
// version of any table references: data files, objects under objects/
// older than the grace, and the leftovers of failed writes.
//
// The invariant — an acknowledged row never points at a freed object,
// even with a grace of 0 while appends run — is kept by a fence between
// the collector and the appends of this leader, through which every
// append passes (followers forward theirs):
//
//  1. The collector lists the objects older than the grace, then computes
//     the objects every retained version references, table by table.
//  2. It takes the fence's write lock. Every append holds the read lock
//     from the check of its objects until it is acknowledged, so taking
//     the write lock waits for the appends that were checked before, and
//     they are committed by then. Under the lock the collector adds what
//     the versions committed since step 1 reference, and publishes the
//     objects it will free as doomed.
//  3. An append checked after that and naming a doomed object is refused
//     with FailedPrecondition, before anything commits. The collector
//     frees the doomed objects; once it is done, an append naming one
//     fails its stat of the object instead.
//
// Data files are written by this leader only: while a commit, compaction
// or delete is under way, its data files are held (dataHolds) and never
// freed; a file whose commit ended ambiguously stays held until the
// process ends, since its record may exist.
//
// A crash anywhere loses nothing referenced: what was freed was doomed,
// and the next run computes everything again.

// DefaultGCGrace is how old an unreferenced object must be before gc
// frees it, unless the request says otherwise: a day outlasts any upload
// whose row is still to be committed.
const DefaultGCGrace = 24 * time.Hour

// Failpoints of a collection (internal/failpoint).
const (
	// FailGCBeforeFree: the doomed objects are published, nothing is freed yet.
	FailGCBeforeFree = "gc-before-free"
	// FailGCBetweenFrees: an object or file has been freed (a batch of
	// them, on a stage that deletes in batches), others not yet.
	FailGCBetweenFrees = "gc-between-frees"
)

// dataHolds are the data files this node is writing and has not
// committed or discarded yet.
type dataHolds struct {
	mu   sync.Mutex
	keys map[string]int
}

func (h *dataHolds) hold(key string) {
	if h == nil {
		return // a committer made without a service, in tests
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.keys == nil {
		h.keys = make(map[string]int)
	}
	h.keys[key]++
}

func (h *dataHolds) release(key string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.keys[key]--; h.keys[key] <= 0 {
		delete(h.keys, key)
	}
}

func (h *dataHolds) held(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.keys[key] > 0
}

// gcFence is the lock between the collector and the appends, and the
// objects the collector is freeing.
type gcFence struct {
	mu     sync.RWMutex
	doomed map[string]bool // under mu
	run    sync.Mutex      // one collection at a time
}

// refSet is what the retained versions reference.
type refSet struct {
	objects   map[string]bool
	dataFiles map[string]bool
}

func newRefSet() *refSet {
	return &refSet{objects: map[string]bool{}, dataFiles: map[string]bool{}}
}

// GC frees what no retained version references (DESIGN §11).
func (s *Service) GC(ctx context.Context, req *lakepb.GcRequest) (*lakepb.GcResult, error) {
	if err := gcCheck(req); err != nil {
		return nil, err
	}
	if !s.canCommit() {
		return nil, errNotLeading
	}
	s.gc.run.Lock()
	defer s.gc.run.Unlock()
	grace := DefaultGCGrace
	if req.GraceMicros != nil {
		grace = time.Duration(req.GetGraceMicros()) * time.Microsecond
	}
	now := time.Now()
	cutoff := now.Add(-grace)
	// A write in flight (a put's temp file, a part upload, this leader's
	// own prepared log record) keeps its leftover at least
	// GCLeftoverMinAge, whatever the grace.
	leftoverCutoff := now.Add(-max(grace, s.cfg.GCLeftoverMinAge))
	res := &lakepb.GcResult{DryRun: req.GetDryRun(), DataFiles: &lakepb.GcCount{}, Objects: &lakepb.GcCount{}, Uploads: &lakepb.GcCount{}, TempFiles: &lakepb.GcCount{}}

	// 1. The candidates first: an object written after this listing is
	// never one. Then what the retained versions reference.
	candidates, err := s.listOlder(ctx, wire.ObjectsPrefix, cutoff)
	if err != nil {
		return nil, fmt.Errorf("meta: gc: list objects: %w", err)
	}
	refs := newRefSet()
	heads := map[*table]int64{}
	var dataCandidates []objects.Info
	for _, t := range s.reg.all() {
		files, err := s.listOlder(ctx, layout.DataPrefix(t.id), cutoff)
		if err != nil {
			return nil, fmt.Errorf("meta: gc: list data files of %q: %w", t.name, err)
		}
		if err := s.reg.catchUp(ctx, t, -1); err != nil {
			return nil, err
		}
		if heads[t], err = s.addRetained(ctx, t, refs); err != nil {
			return nil, fmt.Errorf("meta: gc: table %q: %w", t.name, err)
		}
		dataCandidates = append(dataCandidates, files...)
	}

	// 2. The fence: what committed meanwhile, then the doomed objects.
	var doomed []objects.Info
	if !req.GetDryRun() {
		s.gc.mu.Lock()
	}
	err = func() error {
		for _, t := range s.reg.all() {
			from, seen := heads[t]
			if !seen {
				from = -1 // created meanwhile: all of it
			}
			if _, err := s.addSince(ctx, t, from, refs); err != nil {
				return fmt.Errorf("meta: gc: table %q: %w", t.name, err)
			}
		}
		for _, o := range candidates {
			if refs.objects[o.Key] {
				res.ReferencedObjects++
				continue
			}
			doomed = append(doomed, o)
		}
		if !req.GetDryRun() {
			s.gc.doomed = make(map[string]bool, len(doomed))
			for _, o := range doomed {
				s.gc.doomed[o.Key] = true
			}
		}
		return nil
	}()
	if !req.GetDryRun() {
		s.gc.mu.Unlock()
		defer func() {
			s.gc.mu.Lock()
			s.gc.doomed = nil
			s.gc.mu.Unlock()
		}()
	}
	if err != nil {
		return nil, err
	}
	var dataDoomed []objects.Info
	for _, f := range dataCandidates {
		if !refs.dataFiles[f.Key] && !s.holds.held(f.Key) {
			dataDoomed = append(dataDoomed, f)
		}
	}
	if req.GetDryRun() {
		count(res.Objects, doomed)
		count(res.DataFiles, dataDoomed)
		return res, s.sweepLeftovers(ctx, leftoverCutoff, res, true)
	}

	// 3. Free. The dedup entries of the doomed objects go first, before
	// any of them is freed: since the doomed set was published a grant
	// refuses these objects (dedupUsable asks doomedObject), and from
	// here on no entry names them, so a grant never answers an object
	// this collection is freeing or has freed. (An entry recorded for one
	// of them later, by a completion or the verifier racing this run, is
	// refused by the grant's stat of the object and dropped then.)
	if err := s.ix.dropDedup(objectKeys(doomed)...); err != nil {
		return res, fmt.Errorf("meta: gc: drop dedup entries: %w", err)
	}
	failpoint.Hit(FailGCBeforeFree)
	if err := s.free(ctx, doomed, res.Objects, nil); err != nil {
		return res, err
	}
	if err := s.free(ctx, dataDoomed, res.DataFiles, s.holds.held); err != nil {
		return res, err
	}
	if err := s.sweepLeftovers(ctx, leftoverCutoff, res, false); err != nil {
		return res, err
	}
	s.log.Info("garbage collected", "objects", res.Objects.Count, "object_bytes", res.Objects.Bytes,
		"data_files", res.DataFiles.Count, "uploads", res.Uploads.Count, "temp_files", res.TempFiles.Count, "grace", grace)
	return res, nil
}

func objectKeys(infos []objects.Info) []string {
	keys := make([]string, len(infos))
	for i, o := range infos {
		keys[i] = o.Key
	}
	return keys
}

func count(c *lakepb.GcCount, infos []objects.Info) {
	for _, i := range infos {
		c.Count++
		c.Bytes += i.Size
	}
}

// free deletes objects or data files and counts them: in batches where
// the stage deletes many keys per request (objects.BatchDeleter: S3
// takes 1000, where one request per key made a collection of 20,000
// objects 20,000 requests), else one at a time. The failpoint between
// frees is passed after each batch. skip, when not nil, keeps a key,
// asked right before its batch goes. One that is gone already (a
// collection before a crash) counts as freed.
func (s *Service) free(ctx context.Context, infos []objects.Info, c *lakepb.GcCount, skip func(key string) bool) error {
	batcher, batches := s.store.(objects.BatchDeleter)
	size := 1
	if batches {
		size = max(1, batcher.MaxDeleteBatch())
	}
	for len(infos) > 0 {
		chunk := infos[:min(size, len(infos))]
		infos = infos[len(chunk):]
		var keys []string
		var freed []objects.Info
		for _, o := range chunk {
			if skip == nil || !skip(o.Key) {
				keys = append(keys, o.Key)
				freed = append(freed, o)
			}
		}
		var err error
		switch {
		case len(keys) == 0:
			continue
		case batches:
			err = batcher.DeleteMany(ctx, keys)
		default:
			err = s.store.Delete(ctx, keys[0])
		}
		if err != nil && !errors.Is(err, objects.ErrNotFound) {
			return fmt.Errorf("meta: gc: free %s: %w", keys[0], err)
		}
		count(c, freed)
		failpoint.Hit(FailGCBetweenFrees)
	}
	return nil
}

// listOlder lists the objects under prefix published before cutoff.
func (s *Service) listOlder(ctx context.Context, prefix string, cutoff time.Time) ([]objects.Info, error) {
	var out []objects.Info
	for info, err := range s.store.List(ctx, prefix) {
		if err != nil {
			return nil, err
		}
		if info.ModTime.Before(cutoff) {
			out = append(out, info)
		}
	}
	return out, nil
}

// addRetained adds to refs what t's retained versions reference: the data
// files of the oldest retained version and those every later version
// added, and the objects their rows name. It returns the head it went to.
func (s *Service) addRetained(ctx context.Context, t *table, refs *refSet) (int64, error) {
	from := t.retained()
	snap, err := s.Snapshot(ctx, &lakepb.SnapshotRequest{Name: t.name, Version: &from})
	if err != nil {
		return 0, err
	}
	for _, f := range snap.GetFiles() {
		if err := s.addDataFile(ctx, t, f.GetKey(), refs); err != nil {
			return 0, err
		}
	}
	return s.addSince(ctx, t, snap.GetVersion(), refs)
}

// addSince adds what the versions of t after version from added (-1: all
// retained versions), and returns the head it went to.
func (s *Service) addSince(ctx context.Context, t *table, from int64, refs *refSet) (int64, error) {
	if from < 0 {
		return s.addRetained(ctx, t, refs)
	}
	head := t.row().Head
	added, err := s.addedFiles(ctx, t, from+1, head)
	if err != nil {
		return 0, err
	}
	for _, f := range added {
		if err := s.addDataFile(ctx, t, f.key, refs); err != nil {
			return 0, err
		}
	}
	return head, nil
}

// addDataFile adds a data file and the objects its rows name.
func (s *Service) addDataFile(ctx context.Context, t *table, key string, refs *refSet) error {
	if refs.dataFiles[key] {
		return nil
	}
	refs.dataFiles[key] = true
	err := s.eachFileValue(ctx, t, key, func(_ arrow.RecordBatch, _, _ int, v wire.FileValue) error {
		refs.objects[v.Key] = true
		return nil
	})
	if err != nil {
		return fmt.Errorf("read %s: %w", key, err)
	}
	return nil
}

// sweepLeftovers removes (or, dry, counts) what failed writes left in
// the stage before cutoff, where the stage can list it.
func (s *Service) sweepLeftovers(ctx context.Context, cutoff time.Time, res *lakepb.GcResult, dry bool) error {
	sw, ok := s.store.(objects.Sweeper)
	if !ok {
		return nil
	}
	var found []objects.Leftover
	for l, err := range sw.Leftovers(ctx, cutoff) {
		if err != nil {
			return fmt.Errorf("meta: gc: list leftovers: %w", err)
		}
		found = append(found, l)
	}
	sort.Slice(found, func(i, j int) bool { return found[i].Key < found[j].Key })
	for _, l := range found {
		c := res.TempFiles
		if l.Kind == objects.LeftoverUpload {
			c = res.Uploads
		}
		if !dry {
			if err := sw.RemoveLeftover(ctx, l); err != nil && !errors.Is(err, objects.ErrNotFound) {
				return fmt.Errorf("meta: gc: remove %s %s: %w", l.Kind, l.Key, err)
			}
		}
		c.Count++
		c.Bytes += l.Size
	}
	return nil
}

// doomedObject refuses, in an append's check, an object the collector is
// freeing; a grant asks it too before answering a dedup hit. The caller
// holds the fence's read lock.
func (s *Service) doomedObject(key string) error {
	if s.gc.doomed[key] {
		return fmt.Errorf("%w: %s is being freed by garbage collection: no retained row referenced it", wire.ErrObjectMissing, key)
	}
	return nil
}

func gcCheck(req *lakepb.GcRequest) error {
	if req.GraceMicros != nil && req.GetGraceMicros() < 0 {
		return fmt.Errorf("%w: grace %v is negative", wire.ErrInvalidRequest, time.Duration(req.GetGraceMicros())*time.Microsecond)
	}
	return nil
}
