package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lakedata/lake/internal/failpoint"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/layout"
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

// errCompactConflict is build's answer when a file a compaction removes
// is no longer in the head.
var errCompactConflict = errors.New("meta: the files to compact changed")

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
	t.mu.Lock()
	have := make(map[string]bool, len(t.files))
	for _, f := range t.files {
		have[f.Key] = true
	}
	n := len(t.files)
	t.mu.Unlock()
	rec.Format, rec.Kind, rec.Rows = removesFormat, kindCompact, 0
	for _, r := range group {
		cp := r.compact
		for _, k := range cp.removes {
			if !have[k] {
				return staged{}, fmt.Errorf("%w: %s is not in version %d of %q", errCompactConflict, k, rec.Version-1, t.name)
			}
			delete(have, k) // two requests of one group never remove one file twice
		}
		cp.before = n
		n += len(cp.adds) - len(cp.removes)
		cp.after = n
		rec.Removes = append(rec.Removes, cp.removes...)
		rec.Files = append(rec.Files, cp.adds...)
	}
	// The merged files were written before the request was made, and stay
	// if this attempt loses the version: the retry names them again.
	return staged{write: func() error { return nil }, discard: func() {}}, nil
}

// Compact merges the small data files of a table into files of up to
// Config.CompactTargetSize now, as one new version with the same rows. A
// table with fewer than two small files is left as it is.
func (s *Service) Compact(ctx context.Context, name string) (*lakepb.CompactResult, error) {
	if !s.canCommit() {
		return nil, errNotLeading
	}
	t, err := s.table(ctx, name)
	if err != nil {
		return nil, err
	}
	return s.compact(ctx, t, 2)
}

// compact merges t's small files once there are at least minFiles of
// them.
func (s *Service) compact(ctx context.Context, t *table, minFiles int) (*lakepb.CompactResult, error) {
	t.compactMu.Lock()
	defer t.compactMu.Unlock()
	for attempt := 1; ; attempt++ {
		t.mu.Lock()
		head, files := t.head, append([]*lakepb.DataFile(nil), t.files...)
		t.mu.Unlock()
		res := &lakepb.CompactResult{Table: t.name, Version: head, FilesBefore: int64(len(files)), FilesAfter: int64(len(files))}
		batches := planCompaction(files, s.cfg.CompactTargetSize)
		var small int
		for _, b := range batches {
			small += len(b)
		}
		if small < minFiles || small < 2 {
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
		if errors.Is(resp.err, errCompactConflict) && attempt < maxCompactAttempts {
			s.discardFiles(cp.adds) // no record names them
			continue
		}
		if resp.err != nil {
			// Unless it was a conflict the record may exist (an ambiguous
			// put), so the merged files stay; garbage collection frees
			// them if nothing refers to them.
			return nil, resp.err
		}
		s.log.Info("compacted", "table", t.name, "version", resp.version, "merged", len(cp.removes), "into", len(cp.adds))
		res.Version, res.FilesBefore, res.FilesAfter = resp.version, int64(cp.before), int64(cp.after)
		return res, nil
	}
}

// planCompaction groups the files smaller than target, in table order,
// into runs whose sizes add up to at most target; each run of two or more
// becomes one file. The sizes are of the compressed files, so a merged
// file comes out close to the sum of its parts.
func planCompaction(files []*lakepb.DataFile, target int64) [][]*lakepb.DataFile {
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
		if f.GetSize() >= target {
			continue
		}
		if size+f.GetSize() > target {
			flush()
		}
		cur = append(cur, f)
		size += f.GetSize()
	}
	flush()
	return out
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
	data, err := encodeParquet(t.schema, recs)
	if err != nil {
		return dataFile{}, fmt.Errorf("encode parquet: %w", err)
	}
	key := layout.NewDataKey(t.id)
	if _, err := s.store.Put(ctx, key, bytes.NewReader(data), objects.PutOptions{ContentType: "application/vnd.apache.parquet"}); err != nil {
		return dataFile{}, fmt.Errorf("write data file: %w", err)
	}
	return dataFile{Key: key, Rows: rows, Size: int64(len(data))}, nil
}

func (s *Service) discardFiles(files []dataFile) {
	for _, f := range files {
		_ = s.store.Delete(context.WithoutCancel(s.ctx), f.Key)
	}
}

// compactQueue coalesces the tables that committed since the background
// compactor last looked, so a burst of appends asks for one check.
type compactQueue struct {
	mu      sync.Mutex
	pending map[*table]bool
	wake    chan struct{}
}

func (q *compactQueue) init() {
	q.pending = make(map[*table]bool)
	q.wake = make(chan struct{}, 1)
}

// note asks for a check of t; it never blocks a commit.
func (q *compactQueue) note(t *table) {
	q.mu.Lock()
	q.pending[t] = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *compactQueue) take() []*table {
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
// CompactMinFiles small files.
func (s *Service) startCompactor() {
	if s.cfg.CompactMinFiles == 0 {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-s.compactQ.wake:
			}
			for _, t := range s.compactQ.take() {
				if !s.canCommit() || s.ctx.Err() != nil {
					break
				}
				if _, err := s.compact(s.ctx, t, s.cfg.CompactMinFiles+1); err != nil && s.ctx.Err() == nil {
					s.log.Warn("background compaction failed", "table", t.name, "err", err)
				}
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
