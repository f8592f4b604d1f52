package meta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/lakedata/lake/internal/failpoint"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/layout"
	"github.com/lakedata/lake/roles/meta/cluster"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// maxCommitAttempts bounds retries after losing the put-if-absent race for
// a version; losing that often means another node is committing, so we are
// not the leader any more.
const maxCommitAttempts = 8

type appendReq struct {
	ctx      context.Context
	commitID string
	expected *int64
	recs     []arrow.RecordBatch
	rows     int64
	done     chan appendResp // buffered: the committer never blocks on it
}

type appendResp struct {
	res *lakepb.AppendResult
	err error
}

func (r *appendReq) reply(res *lakepb.AppendResult, err error) { r.done <- appendResp{res, err} }

// Append validates records against the table and commits them as one new
// version, or returns the original version when cmd.commit_id already
// committed. The records stay owned by the caller.
func (s *Service) Append(ctx context.Context, cmd *lakepb.Append, recs []arrow.RecordBatch) (*lakepb.AppendResult, error) {
	if err := wire.ValidateAppend(cmd); err != nil {
		return nil, err
	}
	if !s.canCommit() {
		return s.fwd.append(ctx, cmd, recs)
	}
	t, err := s.table(ctx, cmd.GetTable())
	if err != nil {
		return nil, err
	}
	if res, ok, err := s.committed(t, cmd.GetCommitId()); err != nil || ok {
		return res, err
	}
	rows, err := s.validateRows(ctx, t, recs)
	if err != nil {
		return nil, err
	}
	req := &appendReq{
		ctx: ctx, commitID: cmd.GetCommitId(), expected: cmd.ExpectedVersion,
		recs: recs, rows: rows, done: make(chan appendResp, 1),
	}
	select {
	case t.queue <- req:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.ctx.Done():
		return nil, fmt.Errorf("%w: %w", wire.ErrNotLeader, ErrClosed)
	}
	select {
	case resp := <-req.done:
		return resp.res, resp.err
	case <-ctx.Done():
		// The commit may still happen; a retry with the same commit_id
		// finds it.
		return nil, ctx.Err()
	}
}

// committed answers an append whose commit_id already committed.
func (s *Service) committed(t *table, commitID string) (*lakepb.AppendResult, bool, error) {
	if commitID == "" {
		return nil, false, nil
	}
	v, ok, err := s.ix.committedVersion(t.id, commitID)
	if err != nil || !ok {
		return nil, false, err
	}
	res := &lakepb.AppendResult{Table: t.name, Version: v, Duplicate: true}
	err = s.ix.records(t.id, v, v, false, func(r *logRecord) bool {
		for _, c := range r.Commits {
			if c.ID == commitID {
				res.Rows = c.Rows
			}
		}
		return false
	})
	return res, true, err
}

// validateRows checks every record against the table schema and every FILE
// value against the stage (exists, size matches; the bytes are never read).
func (s *Service) validateRows(ctx context.Context, t *table, recs []arrow.RecordBatch) (int64, error) {
	var rows, size int64
	checked := make(map[string]int64) // key → size verified in the stage
	for _, rec := range recs {
		if err := wire.CheckAppendSchema(t.schema, rec.Schema()); err != nil {
			return 0, err
		}
		rows += rec.NumRows()
		for i, col := range rec.Columns() {
			size += arraySize(col.Data())
			f := t.schema.Field(i)
			if !f.Nullable && col.NullN() > 0 {
				return 0, fmt.Errorf("%w: column %q is not nullable but has %d nulls", wire.ErrSchemaMismatch, f.Name, col.NullN())
			}
			if !wire.IsFileField(f) {
				continue
			}
			values, valid, err := wire.FileValues(col)
			if err != nil {
				return 0, fmt.Errorf("column %q: %w", f.Name, err)
			}
			for j, v := range values {
				if !valid[j] {
					continue
				}
				// Many rows may name one object: stat it once.
				if size, ok := checked[v.Key]; ok && size == v.Size {
					continue
				}
				if err := s.checkObject(ctx, v); err != nil {
					return 0, fmt.Errorf("column %q row %d: %w", f.Name, j, err)
				}
				checked[v.Key] = v.Size
			}
		}
	}
	if rows == 0 {
		return 0, wire.ErrEmptyAppend
	}
	if size > s.cfg.MaxAppendBytes {
		return 0, fmt.Errorf("%w: the append holds %d bytes of Arrow data, at most %d; split it", wire.ErrInvalidRequest, size, s.cfg.MaxAppendBytes)
	}
	return rows, nil
}

func (s *Service) checkObject(ctx context.Context, v wire.FileValue) error {
	info, err := s.store.Stat(ctx, v.Key)
	if errors.Is(err, objects.ErrNotFound) {
		return fmt.Errorf("%w: %s", wire.ErrObjectMissing, v.Key)
	}
	if err != nil {
		return fmt.Errorf("stat %s: %w", v.Key, err)
	}
	if info.Size != v.Size {
		return fmt.Errorf("%w: %s has %d bytes, the row says %d", wire.ErrSizeMismatch, v.Key, info.Size, v.Size)
	}
	return nil
}

func arraySize(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += arraySize(c)
	}
	return n
}

// startCommitter starts t's committer; the registry runs it for every
// table it adds.
func (s *Service) startCommitter(t *table) {
	t.queue = make(chan *appendReq, 4*s.cfg.MaxGroupRequests)
	s.wg.Add(1)
	go s.runCommitter(t)
}

// runCommitter is t's single writer: it takes the appends that queued up
// while the previous commit was in flight and commits them as one version.
func (s *Service) runCommitter(t *table) {
	defer s.wg.Done()
	for {
		var first *appendReq
		select {
		case first = <-t.queue:
		case <-s.ctx.Done():
			s.drainClosed(t)
			return
		}
		group := []*appendReq{first}
	gather:
		for len(group) < s.cfg.MaxGroupRequests {
			select {
			case r := <-t.queue:
				group = append(group, r)
			default:
				break gather
			}
		}
		s.commitGroup(t, group)
	}
}

func (s *Service) drainClosed(t *table) {
	for {
		select {
		case r := <-t.queue:
			r.reply(nil, fmt.Errorf("%w: %w", wire.ErrNotLeader, ErrClosed))
		default:
			return
		}
	}
}

// commitGroup commits a group of appends as one version (DESIGN §3).
func (s *Service) commitGroup(t *table, group []*appendReq) {
	pending := make([]*appendReq, 0, len(group))
	for _, r := range group {
		if err := r.ctx.Err(); err != nil {
			r.reply(nil, err) // the caller left before its commit started
			continue
		}
		pending = append(pending, r)
	}
	// The commit runs to the end even if callers leave: their retries with
	// the same commit_id then find it.
	ctx := context.WithoutCancel(s.ctx)
	for attempt := 0; len(pending) > 0; attempt++ {
		if attempt == maxCommitAttempts {
			for _, r := range pending {
				r.reply(nil, fmt.Errorf("%w: lost the race for the next version %d times", wire.ErrNotLeader, attempt))
			}
			return
		}
		// A deposed leader commits nothing more: this is what keeps a
		// node that was frozen past its lease from writing on wake-up.
		if !s.canCommit() {
			for _, r := range pending {
				r.reply(nil, errNotLeading)
			}
			return
		}
		// writeMu covers admitting against the head and committing on top
		// of it; it is released for the catch-up, which takes it itself.
		t.writeMu.Lock()
		commit, twins := s.admit(t, pending)
		if len(commit) == 0 {
			t.writeMu.Unlock()
			return
		}
		version, err := s.commitOnce(ctx, t, commit)
		t.writeMu.Unlock()
		if errors.Is(err, objects.ErrExists) {
			// Another writer took the version: learn what it wrote, then
			// retry on top of it (its commits may include ours).
			if cerr := s.reg.catchUp(ctx, t, -1); cerr != nil {
				err = cerr
			} else {
				pending = append(commit, twinList(twins)...)
				continue
			}
		}
		if err != nil {
			s.log.Error("commit failed", "table", t.name, "err", err)
			for _, r := range commit {
				r.reply(nil, err)
				for _, tw := range twins[r] {
					tw.reply(nil, err)
				}
			}
			return
		}
		if !s.canCommit() {
			// Committed, but leadership was lost meanwhile: stop
			// acknowledging at once. A retry with the same commit_id
			// gets this version from the new leader.
			for _, r := range commit {
				r.reply(nil, errNotLeading)
				for _, tw := range twins[r] {
					tw.reply(nil, errNotLeading)
				}
			}
			return
		}
		for _, r := range commit {
			r.reply(&lakepb.AppendResult{Table: t.name, Version: version, Rows: r.rows}, nil)
			for _, tw := range twins[r] {
				tw.reply(&lakepb.AppendResult{Table: t.name, Version: version, Rows: r.rows, Duplicate: true}, nil)
			}
		}
		return
	}
}

func twinList(twins map[*appendReq][]*appendReq) []*appendReq {
	var out []*appendReq
	for _, ts := range twins {
		out = append(out, ts...)
	}
	return out
}

// admit answers the appends that need no commit (already committed,
// expected_version differs) and returns the rest. Appends that repeat a
// commit_id of another append in the group become its twins: they get the
// same version with duplicate = true.
func (s *Service) admit(t *table, pending []*appendReq) (commit []*appendReq, twins map[*appendReq][]*appendReq) {
	head := t.row().Head
	byID := make(map[string]*appendReq)
	twins = make(map[*appendReq][]*appendReq)
	expectedTaken := false
	for _, r := range pending {
		if r.commitID != "" {
			if res, ok, err := s.committed(t, r.commitID); err != nil || ok {
				r.reply(res, err)
				continue
			}
			if first, ok := byID[r.commitID]; ok {
				twins[first] = append(twins[first], r)
				continue
			}
		}
		if r.expected != nil {
			// Only one conditional append per version: after the first
			// commits, the table is no longer at the expected version.
			if *r.expected != head || expectedTaken {
				r.reply(nil, fmt.Errorf("%w: table %q is at version %d, expected %d", wire.ErrVersionConflict, t.name, head, *r.expected))
				continue
			}
			expectedTaken = true
		}
		if r.commitID != "" {
			byID[r.commitID] = r
		}
		commit = append(commit, r)
	}
	return commit, twins
}

// commitOnce writes the group's data file and puts the next log record. It
// returns objects.ErrExists when another writer took the version.
func (s *Service) commitOnce(ctx context.Context, t *table, commit []*appendReq) (int64, error) {
	version := t.row().Head + 1
	var recs []arrow.RecordBatch
	rec := &logRecord{Format: recordFormat, TableID: t.id, Version: version, CommittedAt: time.Now().UTC()}
	for _, r := range commit {
		recs = append(recs, r.recs...)
		rec.Rows += r.rows
		if r.commitID != "" {
			rec.Commits = append(rec.Commits, commitMark{ID: r.commitID, Rows: r.rows})
		}
	}
	data, err := encodeParquet(t.schema, recs)
	if err != nil {
		return 0, fmt.Errorf("meta: encode parquet: %w", err)
	}
	key := layout.NewDataKey(t.id)
	rec.Files = []dataFile{{Key: key, Rows: rec.Rows, Size: int64(len(data))}}
	raw, err := json.Marshal(rec)
	if err != nil {
		return 0, err
	}
	failpoint.Hit("meta-before-log-put")
	err = s.stage.putRecordAfter(ctx, rec, raw, func() error {
		_, err := s.store.Put(ctx, key, bytes.NewReader(data), objects.PutOptions{ContentType: "application/vnd.apache.parquet"})
		if err != nil {
			return fmt.Errorf("meta: write data file: %w", err)
		}
		return nil
	})
	if errors.Is(err, objects.ErrExists) {
		_ = s.store.Delete(ctx, key) // nothing refers to it
		return 0, err
	}
	if err != nil {
		// Ambiguous: the record may exist. Keep the data file; the next
		// commit's put-if-absent tells which it was.
		return 0, fmt.Errorf("meta: commit version %d: %w", version, err)
	}
	if err := s.ix.apply(t.row(), [][]byte{raw}, []*logRecord{rec}); err != nil {
		// Durable in the stage but not indexed: the next commit loses the
		// race for this version and catches up; report it as ambiguous.
		return 0, fmt.Errorf("%w: version %d committed to the stage but not indexed: %v", wire.ErrNotLeader, version, err)
	}
	s.reg.advance(t, []*logRecord{rec})
	s.cluster.PublishHead(cluster.Head{TableID: t.id, Name: t.name, Version: version})
	return version, nil
}

// encodeParquet writes records as one zstd-compressed Parquet file. The
// Arrow schema is stored in the file so FILE columns keep lake.type=file.
func encodeParquet(schema *arrow.Schema, recs []arrow.RecordBatch) ([]byte, error) {
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd))
	w, err := pqarrow.NewFileWriter(schema, &buf, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return nil, err
	}
	// One record, one row group: a row group per small append would make
	// both writing and later scans several times slower.
	rec, err := concatRecords(schema, recs)
	if err != nil {
		w.Close()
		return nil, err
	}
	defer rec.Release()
	if err := w.Write(rec); err != nil {
		w.Close()
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// concatRecords joins records column by column into one record labelled
// with the table schema (same types; the table's field metadata).
func concatRecords(schema *arrow.Schema, recs []arrow.RecordBatch) (arrow.RecordBatch, error) {
	var rows int64
	cols := make([]arrow.Array, schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i := range cols {
		parts := make([]arrow.Array, len(recs))
		for j, r := range recs {
			parts[j] = r.Column(i)
		}
		c, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", schema.Field(i).Name, err)
		}
		cols[i] = c
	}
	for _, r := range recs {
		rows += r.NumRows()
	}
	return array.NewRecordBatch(schema, cols, rows), nil
}
