package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/layout"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// Deletes (DESIGN §11) remove every row whose FILE value names one of the
// given keys, as one new version. Like a compaction, the slow part runs
// beside the committer: read the current data files, find the rows, and
// write each affected file again without them. Only the swap of those
// files is a commitKind, checked against the head as it is at commit, so
// appends that committed meanwhile stay and an append waits at most for
// that one short commit. The deleted rows stay in older versions' files.

// kindDelete is the Kind of a delete's log record.
const kindDelete = "delete"

// maxDeleteAttempts bounds how often a delete plans again because a file
// it rewrote was gone at commit (a compaction took it).
const maxDeleteAttempts = 3

// MaxDeleteKeys bounds the keys of one delete, as MaxAppendBytes bounds
// an append: one request cannot make the leader hold an unbounded set.
const MaxDeleteKeys = 100_000

// deleteKind commits deletes: the record removes the rewritten files,
// adds their rewrites and has the negative of the rows it removed.
var deleteKind = &commitKind{name: kindDelete, build: buildDelete}

// deletion is what a delete request carries to the committer: the files it
// replaces, their rewrites (already in the stage) and the rows removed.
type deletion struct {
	removes []string
	adds    []dataFile
	rows    int64
}

func buildDelete(_ context.Context, c *committer, rec *logRecord, group []*commitReq) (staged, error) {
	t := c.t
	have := t.headKeys()
	rec.Format, rec.Kind, rec.Rows = removesFormat, kindDelete, 0
	for _, r := range group {
		d := r.delete
		if err := takeFiles(have, d.removes, t, rec.Version-1); err != nil {
			return staged{}, err
		}
		rec.Removes = append(rec.Removes, d.removes...)
		rec.Files = append(rec.Files, d.adds...)
		rec.Rows -= d.rows
	}
	return nothingStaged, nil // the rewrites were written before the request
}

// Delete removes every row of the table whose FILE value has one of
// req.keys, as one new version. A key no row of the current version has
// is wire.ErrKeyNotFound and changes nothing. commit_id and
// expected_version work as for appends.
func (s *Service) Delete(ctx context.Context, req *lakepb.DeleteRequest) (*lakepb.DeleteResult, error) {
	if err := deleteCheck(req); err != nil {
		return nil, err
	}
	t, err := s.leaderTable(ctx, req.GetTable())
	if err != nil {
		return nil, err
	}
	result := func(r commitResp) *lakepb.DeleteResult {
		return &lakepb.DeleteResult{Table: t.name, Version: r.version, Rows: r.rows, Duplicate: r.duplicate}
	}
	if res, ok, err := t.commits.committed(req.GetCommitId()); err != nil || ok {
		if err != nil {
			return nil, err
		}
		return result(res), nil
	}
	// One rewrite of a table's files (a delete or a compaction) plans at
	// a time on this node: two planned on one head would rewrite the same
	// file and one would lose, again and again under load.
	t.compactMu.Lock()
	defer t.compactMu.Unlock()
	keys := make(map[string]bool, len(req.GetKeys()))
	for _, k := range req.GetKeys() {
		keys[k] = true
	}
	for attempt := 1; ; attempt++ {
		t.mu.Lock()
		head, files := t.head, slices.Clone(t.files)
		t.mu.Unlock()
		if e := req.ExpectedVersion; e != nil && *e != head {
			return nil, fmt.Errorf("%w: table %q is at version %d, expected %d", wire.ErrVersionConflict, t.name, head, *e)
		}
		d, err := s.planDelete(ctx, t, files, keys)
		if err != nil {
			return nil, fmt.Errorf("meta: delete from %q: %w", t.name, err)
		}
		resp := t.commits.submit(ctx, &commitReq{kind: deleteKind, commitID: req.GetCommitId(), expected: req.ExpectedVersion, rows: d.rows, delete: d})
		if errors.Is(resp.err, errFilesChanged) {
			s.discardFiles(d.adds) // no record names them
			if attempt < maxDeleteAttempts && req.ExpectedVersion == nil {
				continue
			}
		}
		if resp.err != nil {
			return nil, resp.err // ambiguous: the rewrites stay held; GC frees them later if unreferenced
		}
		s.settleFiles(d.adds)
		s.log.Info("deleted", "table", t.name, "version", resp.version, "rows", d.rows, "rewrote", len(d.removes))
		return result(resp), nil
	}
}

// planDelete reads files (the head's data files) and writes again each one
// holding a row with one of keys, without those rows. Every key must be
// found.
func (s *Service) planDelete(ctx context.Context, t *table, files []*lakepb.DataFile, keys map[string]bool) (*deletion, error) {
	fileCols := t.fileCols
	if len(fileCols) == 0 {
		return nil, fmt.Errorf("%w: the table has no FILE column", wire.ErrInvalidRequest)
	}
	found := make(map[string]bool, len(keys))
	d := &deletion{}
	for _, f := range files {
		var kept []arrow.RecordBatch
		var removed int64
		err := s.readRows(ctx, t, f.GetKey(), func(rec arrow.RecordBatch) error {
			drop, err := rowsNaming(rec, fileCols, keys, found)
			if err != nil {
				return err
			}
			removed += int64(len(drop))
			for _, run := range keptRuns(rec.NumRows(), drop) {
				kept = append(kept, rec.NewSlice(run[0], run[1]))
			}
			return nil
		})
		if err == nil && removed > 0 && removed < f.GetRows() {
			var df dataFile
			if df, err = s.writeDataFile(ctx, t, kept); err == nil {
				d.adds = append(d.adds, df)
			}
		}
		for _, r := range kept {
			r.Release()
		}
		if err != nil {
			s.discardFiles(d.adds)
			return nil, fmt.Errorf("%s: %w", f.GetKey(), err)
		}
		if removed > 0 {
			d.removes = append(d.removes, f.GetKey())
			d.rows += removed
		}
	}
	if len(found) < len(keys) {
		s.discardFiles(d.adds)
		var missing []string
		for k := range keys {
			if !found[k] {
				missing = append(missing, k)
			}
		}
		slices.Sort(missing)
		return nil, fmt.Errorf("%w: no row has %s", wire.ErrKeyNotFound, clipKeys(missing))
	}
	return d, nil
}

// rowsNaming returns, in order, the rows of rec whose value in one of
// fileCols has a key in keys, and marks those keys found.
func rowsNaming(rec arrow.RecordBatch, fileCols []int, keys, found map[string]bool) ([]int64, error) {
	var drop []int64
	hit := make(map[int64]bool)
	for _, c := range fileCols {
		values, valid, err := wire.FileValues(rec.Column(c))
		if err != nil {
			return nil, err
		}
		for i, v := range values {
			if valid[i] && keys[v.Key] {
				found[v.Key] = true
				hit[int64(i)] = true
			}
		}
	}
	for i := range rec.NumRows() {
		if hit[i] {
			drop = append(drop, i)
		}
	}
	return drop, nil
}

// keptRuns returns the [start, end) runs of rows 0..n-1 not in drop
// (sorted).
func keptRuns(n int64, drop []int64) [][2]int64 {
	var runs [][2]int64
	start := int64(0)
	for _, d := range drop {
		if d > start {
			runs = append(runs, [2]int64{start, d})
		}
		start = d + 1
	}
	if start < n {
		runs = append(runs, [2]int64{start, n})
	}
	return runs
}

// writeDataFile writes recs as a new data file of t, held from before it
// exists (gc.go) until a record names it (settleFiles) or it is discarded.
func (s *Service) writeDataFile(ctx context.Context, t *table, recs []arrow.RecordBatch) (dataFile, error) {
	var rows int64
	for _, r := range recs {
		rows += r.NumRows()
	}
	data, err := encodeParquet(t.schema, recs)
	if err != nil {
		return dataFile{}, fmt.Errorf("encode parquet: %w", err)
	}
	key := layout.NewDataKey(t.id)
	s.holds.hold(key)
	if _, err := s.store.Put(ctx, key, bytes.NewReader(data), objects.PutOptions{ContentType: "application/vnd.apache.parquet"}); err != nil {
		s.holds.release(key)
		return dataFile{}, fmt.Errorf("write data file: %w", err)
	}
	return dataFile{Key: key, Rows: rows, Size: int64(len(data))}, nil
}

// deleteCheck refuses a malformed delete on the node that got it.
func deleteCheck(req *lakepb.DeleteRequest) error {
	if err := wire.ValidateTableName(req.GetTable()); err != nil {
		return err
	}
	if len(req.GetKeys()) == 0 {
		return fmt.Errorf("%w: a delete needs at least one key", wire.ErrInvalidRequest)
	}
	if len(req.GetKeys()) > MaxDeleteKeys {
		return fmt.Errorf("%w: %d keys in one delete, at most %d; split it", wire.ErrInvalidRequest, len(req.GetKeys()), MaxDeleteKeys)
	}
	for _, k := range req.GetKeys() {
		if err := wire.ValidateObjectKey(k); err != nil {
			return err
		}
	}
	if n := len(req.GetCommitId()); n > wire.MaxCommitIDLen {
		return fmt.Errorf("%w: %d bytes, at most %d", wire.ErrInvalidCommitID, n, wire.MaxCommitIDLen)
	}
	if e := req.ExpectedVersion; e != nil && *e < 0 {
		return fmt.Errorf("%w: expected_version %d", wire.ErrInvalidRequest, *e)
	}
	return nil
}

// clipKeys names up to 5 keys for an error message.
func clipKeys(keys []string) string {
	if len(keys) <= 5 {
		return fmt.Sprintf("%q", keys)
	}
	return fmt.Sprintf("%q and %d more", keys[:5], len(keys)-5)
}
