package meta

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lakedata/lake/internal/failpoint"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// Compaction (DESIGN §9) merges a table's small data files into large
// ones. The slow part, reading the small files and writing the large
// ones, runs beside the committer; only the commit of the version that
// swaps them is a commitKind, so an append waits for at most that one
// short commit. Rows never change and FILE objects are never read: only
// data files (metadata rows) are.

// FailCompactBeforeCommit is the failpoint (internal/failpoint) between
// writing a compaction's merged files and committing its log record.
const FailCompactBeforeCommit = "meta-compact-before-commit"

// maxCompactAttempts bounds how often a compaction starts over because
// the files it merged were gone when it came to commit (another
// compaction, from a leader this node replaced, took them).
const maxCompactAttempts = 3

// errFilesChanged is build's answer when a file a compaction or a delete
// removes is no longer in the head (another compaction or delete took it).
// Both plan again; one that gives up answers Aborted, as for a version
// conflict: the caller may try again.
var errFilesChanged = fmt.Errorf("%w: the data files to rewrite changed meanwhile", wire.ErrVersionConflict)

// compactKind commits compactions: the record removes the merged files
// and adds the merged ones, with no rows of its own. It is built on the
// head as it is then, so appends that committed while the merge ran are
// kept: they only added files.
var compactKind = &commitKind{name: "compact", build: buildCompact}

// compaction is what a compact request carries: the files it replaces and
// those replacing them (already in the stage), and, once built, the file
// counts of the head before and after.
type compaction struct {
	removes       []string
	adds          []dataFile
	before, after int
}

func buildCompact(_ context.Context, c *committer, rec *logRecord, group []*commitReq) (staged, error) {
	t := c.t
	have := t.headKeys()
	n := len(have)
	rec.Format, rec.Kind, rec.Rows = removesFormat, kindCompact, 0
	for _, r := range group {
		cp := r.compact
		if err := takeFiles(have, cp.removes, t, rec.Version-1); err != nil {
			return staged{}, err
		}
		cp.before = n
		n += len(cp.adds) - len(cp.removes)
		cp.after = n
		rec.Removes = append(rec.Removes, cp.removes...)
		rec.Files = append(rec.Files, cp.adds...)
	}
	// The merged files were written before the request was made, and stay
	// if this attempt loses the version: the retry names them again.
	return nothingStaged, nil
}

// headKeys returns the keys of the data files of t's head.
func (t *table) headKeys() map[string]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	have := make(map[string]bool, len(t.files))
	for _, f := range t.files {
		have[f.Key] = true
	}
	return have
}

// takeFiles takes keys out of have, the files of version of t, or fails
// with errFilesChanged naming the first one it lacks: another rewrite
// took it (so two requests of one group never remove one file twice).
func takeFiles(have map[string]bool, keys []string, t *table, version int64) error {
	for _, k := range keys {
		if !have[k] {
			return fmt.Errorf("%w: %s is not in version %d of %q", errFilesChanged, k, version, t.name)
		}
		delete(have, k)
	}
	return nil
}

// Compact merges every small data file of a table into files of up to
// Config.CompactTargetSize now (planFullCompaction), as one new version
// with the same rows. A table with fewer than two small files is left as
// it is.
func (s *Service) Compact(ctx context.Context, name string) (*lakepb.CompactResult, error) {
	t, err := s.leaderTable(ctx, name)
	if err != nil {
		return nil, err
	}
	target := s.cfg.CompactTargetSize
	return s.compact(ctx, t, func(files []*lakepb.DataFile) [][]*lakepb.DataFile {
		return planFullCompaction(files, target)
	})
}

// compact merges the runs plan picks from t's head, if any.
func (s *Service) compact(ctx context.Context, t *table, plan func([]*lakepb.DataFile) [][]*lakepb.DataFile) (*lakepb.CompactResult, error) {
	t.compactMu.Lock()
	defer t.compactMu.Unlock()
	for attempt := 1; ; attempt++ {
		t.mu.Lock()
		head, files := t.head, append([]*lakepb.DataFile(nil), t.files...)
		t.mu.Unlock()
		res := &lakepb.CompactResult{Table: t.name, Version: head, FilesBefore: int64(len(files)), FilesAfter: int64(len(files))}
		batches := plan(files)
		if len(batches) == 0 {
			return res, nil
		}
		cp := &compaction{}
		for _, b := range batches {
			df, err := s.mergeFiles(ctx, t, b)
			if err != nil {
				s.discardFiles(cp.adds)
				return nil, fmt.Errorf("meta: compact %q: %w", t.name, err)
			}
			cp.adds = append(cp.adds, df)
			for _, f := range b {
				cp.removes = append(cp.removes, f.Key)
			}
		}
		// A crash here leaves merged files that no record names: garbage
		// for the collector, never a row read twice.
		failpoint.Hit(FailCompactBeforeCommit)
		resp := t.commits.submit(ctx, &commitReq{kind: compactKind, compact: cp})
		if errors.Is(resp.err, errFilesChanged) {
			s.discardFiles(cp.adds) // no record names them
			if attempt < maxCompactAttempts {
				continue
			}
		}
		if resp.err != nil {
			// Unless it was a conflict the record may exist (an ambiguous
			// put), so the merged files stay, held until the process ends;
			// garbage collection frees them later if nothing refers to them.
			return nil, resp.err
		}
		s.settleFiles(cp.adds)
		s.metrics.compacted(len(cp.removes))
		s.log.Info("compacted", "table", t.name, "version", resp.version, "merged", len(cp.removes), "into", len(cp.adds))
		res.Version, res.FilesBefore, res.FilesAfter = resp.version, int64(cp.before), int64(cp.after)
		return res, nil
	}
}

// planFullCompaction is what lake.table.compact merges: every file
// smaller than target, in table order, packed into runs whose sizes add
// up to at most target; each run of two or more becomes one file. It
// leaves the fewest files and rewrites every small row once, so the
// background compactor does not use it (planCompaction). The sizes are of
// the compressed files, so a merged file comes out at most the sum of its
// parts.
func planFullCompaction(files []*lakepb.DataFile, target int64) [][]*lakepb.DataFile {
	var small []*lakepb.DataFile
	for _, f := range files {
		if f.GetSize() < target {
			small = append(small, f)
		}
	}
	return packRuns(small, target)
}

// packRuns cuts files, in their order, into runs whose sizes add up to at
// most target, and returns the runs of two or more files.
func packRuns(files []*lakepb.DataFile, target int64) [][]*lakepb.DataFile {
	var out [][]*lakepb.DataFile
	var cur []*lakepb.DataFile
	var size int64
	flush := func() {
		if len(cur) > 1 {
			out = append(out, cur)
		}
		cur, size = nil, 0
	}
	for _, f := range files {
		if size+f.GetSize() > target {
			flush()
		}
		cur = append(cur, f)
		size += f.GetSize()
	}
	flush()
	return out
}

// planCompaction is what the background compactor merges: nothing while
// a table has at most maxSmall small files (smaller than half of target),
// and past that a size-tiered plan, as Lucene's log merge policy and
// Cassandra's size-tiered compaction make them.
//
// A file's tier is ⌊log_F rows⌋, where F = compactFanIn(maxSmall). Tiers
// count rows, not bytes: rows add up exactly when files merge, while the
// bytes of a small Parquet file are mostly its footer, so a merge of
// one-row files comes out far smaller than its parts and would stay in
// their tier. The plan merges every tier that holds F files or more into
// one run, lowest tier first, and a run that lifts its rows into a tier
// that then holds F takes that tier along. A run of F files of tier k
// holds at least F^(k+1) rows, so every merge lifts its rows at least one
// tier: a row is rewritten at most once per tier, about log_F(R)+1 times
// in all, where R is the rows of a file of half the target, instead of
// once per trigger as when every small file is merged.
//
// The bound: right after a background compaction the table has at most
// maxSmall files smaller than half the target (--compact-min-files), and
// in between at most that plus the commits made while one merge ran.
// Each tier then holds at most F-1 files, which fits maxSmall while there
// are at most maxSmall/(F-1) tiers, that is while a small file holds
// fewer than F^⌊maxSmall/(F-1)⌋ rows (8^9, about 1.3·10^8, at the default
// of 64); past that the smallest files are folded into one run as well,
// down to half of maxSmall. Files of half the target or more are not
// counted: each holds at least half a target of bytes, so their number
// grows with the data, not with the commits; they still pair up under
// planFullCompaction when two fit the target.
//
// A run keeps its files in table order, so a merged file's rows stay in
// commit order, and one whose sizes add up to more than target is cut
// there (packRuns).
func planCompaction(files []*lakepb.DataFile, target int64, maxSmall int) [][]*lakepb.DataFile {
	var small []int // positions in files
	for i, f := range files {
		if f.GetSize() < target/2 {
			small = append(small, i)
		}
	}
	if len(small) <= maxSmall {
		return nil
	}
	fanIn := compactFanIn(maxSmall)
	type run struct {
		files []int
		rows  int64
	}
	runs := make([]*run, len(small))
	for i, pos := range small {
		runs[i] = &run{files: []int{pos}, rows: files[pos].GetRows()}
	}
	byRows := func() {
		slices.SortStableFunc(runs, func(a, b *run) int { return cmp.Compare(a.rows, b.rows) })
	}
	// merge makes runs[i:j] one run.
	merge := func(i, j int) {
		m := &run{}
		for _, r := range runs[i:j] {
			m.files = append(m.files, r.files...)
			m.rows += r.rows
		}
		runs = slices.Replace(runs, i, j, m)
	}
	// Every pass merges at least two runs into one, so this ends.
	for merged := true; merged; {
		merged = false
		byRows()
		for i := 0; i < len(runs); {
			tier := compactTier(runs[i].rows, fanIn)
			j := i + 1
			for j < len(runs) && compactTier(runs[j].rows, fanIn) == tier {
				j++
			}
			if j-i >= fanIn {
				merge(i, j)
				merged = true
				break
			}
			i = j
		}
	}
	if len(runs) > maxSmall {
		byRows()
		merge(0, len(runs)-max(1, maxSmall/2)+1)
	}
	var out [][]*lakepb.DataFile
	for _, r := range runs {
		if len(r.files) < 2 {
			continue
		}
		slices.Sort(r.files)
		run := make([]*lakepb.DataFile, len(r.files))
		for i, pos := range r.files {
			run[i] = files[pos]
		}
		out = append(out, packRuns(run, target)...)
	}
	return out
}

// compactFanIn is the F of planCompaction's tiers for a bound of maxSmall
// small files: an eighth of it, so that eight tiers of F-1 files fit the
// bound (a row is rewritten about log_F R times, fewer the larger F), and
// at least 2.
func compactFanIn(maxSmall int) int { return max(2, maxSmall/8) }

// compactTier is ⌊log_fanIn rows⌋, 0 for a file of fewer than fanIn rows.
func compactTier(rows int64, fanIn int) int {
	tier := 0
	for f := int64(fanIn); rows >= f; rows /= f {
		tier++
	}
	return tier
}

// mergeFiles reads the rows of files and writes them as one new data
// file of t, returning its entry for the log.
func (s *Service) mergeFiles(ctx context.Context, t *table, files []*lakepb.DataFile) (dataFile, error) {
	var recs []arrow.RecordBatch
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	var rows int64
	for _, f := range files {
		var got int64
		err := s.readRows(ctx, t, f.GetKey(), func(rec arrow.RecordBatch) error {
			rec.Retain()
			recs = append(recs, rec)
			got += rec.NumRows()
			return nil
		})
		if err != nil {
			return dataFile{}, fmt.Errorf("read %s: %w", f.GetKey(), err)
		}
		if got != f.GetRows() {
			return dataFile{}, fmt.Errorf("%s holds %d rows, the log says %d", f.GetKey(), got, f.GetRows())
		}
		rows += got
	}
	return s.writeDataFile(ctx, t, recs)
}

// discardFiles deletes data files this node wrote that no record names,
// and lets the collector see them again.
func (s *Service) discardFiles(files []dataFile) {
	for _, f := range files {
		_ = s.store.Delete(context.WithoutCancel(s.ctx), f.Key)
		s.holds.release(f.Key)
	}
}

// settleFiles releases the holds on data files a record now names: from
// here on the collector sees them referenced.
func (s *Service) settleFiles(files []dataFile) {
	for _, f := range files {
		s.holds.release(f.Key)
	}
}

// tableQueue coalesces the tables noted since a background worker (the
// compactor, the checkpointer) last looked, so a burst of commits asks
// for one look.
type tableQueue struct {
	mu      sync.Mutex
	pending map[*table]bool
	wake    chan struct{}
}

func (q *tableQueue) init() {
	q.pending = make(map[*table]bool)
	q.wake = make(chan struct{}, 1)
}

// note asks for a check of t; it never blocks a commit.
func (q *tableQueue) note(t *table) {
	q.mu.Lock()
	q.pending[t] = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *tableQueue) take() []*table {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]*table, 0, len(q.pending))
	for t := range q.pending {
		out = append(out, t)
	}
	clear(q.pending)
	return out
}

// startCompactor runs the background compactor: one table at a time, so
// compaction never takes more than one core's worth of reads and writes
// from the commits, for every table whose head has more than
// CompactMinFiles small files, merged by tiers (planCompaction).
func (s *Service) startCompactor() {
	if s.cfg.CompactMinFiles == 0 {
		return
	}
	target, maxSmall := s.cfg.CompactTargetSize, s.cfg.CompactMinFiles
	plan := func(files []*lakepb.DataFile) [][]*lakepb.DataFile {
		return planCompaction(files, target, maxSmall)
	}
	s.runQueue(&s.compactQ, func(t *table) {
		if !s.canCommit() {
			return
		}
		if _, err := s.compact(s.ctx, t, plan); err != nil && s.ctx.Err() == nil {
			s.log.Warn("background compaction failed", "table", t.name, "err", err)
		}
	})
}

// runQueue runs work, in a goroutine of the service, for each table q is
// woken for, one at a time, until the service closes.
func (s *Service) runQueue(q *tableQueue, work func(*table)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-q.wake:
			}
			for _, t := range q.take() {
				if s.ctx.Err() != nil {
					return
				}
				work(t)
			}
		}
	}()
}

// afterCommit is what the committer tells the node after each version.
func (s *Service) afterCommit(t *table, kind *commitKind) {
	if kind == compactKind || s.cfg.CompactMinFiles == 0 {
		return
	}
	s.compactQ.note(t)
}

// compactCheck refuses a compact request without a valid table name on the
// node that got it.
func compactCheck(req *lakepb.CompactRequest) error {
	return wire.ValidateTableName(req.GetTable())
}
