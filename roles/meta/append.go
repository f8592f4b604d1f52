package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/layout"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

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
	began := time.Now()
	res, err := s.appendHere(ctx, cmd, recs)
	s.metrics.appended(began, res, err)
	return res, err
}

// appendHere is Append on the leader.
func (s *Service) appendHere(ctx context.Context, cmd *lakepb.Append, recs []arrow.RecordBatch) (*lakepb.AppendResult, error) {
	t, err := s.table(ctx, cmd.GetTable())
	if err != nil {
		return nil, err
	}
	// The collector's fence (gc.go): held from the check of the objects
	// until the append is answered.
	s.gc.mu.RLock()
	defer s.gc.mu.RUnlock()
	if res, ok, err := t.commits.committed(cmd.GetCommitId()); err != nil || ok {
		if err != nil {
			return nil, err
		}
		return appendResult(t, res), nil
	}
	rows, err := s.validateRows(ctx, t, recs)
	if err != nil {
		return nil, err
	}
	resp := t.commits.submit(ctx, &commitReq{kind: appendKind, commitID: cmd.GetCommitId(), expected: cmd.ExpectedVersion, recs: recs, rows: rows})
	if resp.err != nil {
		return nil, resp.err
	}
	return appendResult(t, resp), nil
}

func appendResult(t *table, r commitResp) *lakepb.AppendResult {
	return &lakepb.AppendResult{Table: t.name, Version: r.version, Rows: r.rows, Duplicate: r.duplicate}
}

// validateRows checks every record against the table schema and every FILE
// value against the stage (exists, size matches; the bytes are never read).
func (s *Service) validateRows(ctx context.Context, t *table, recs []arrow.RecordBatch) (int64, error) {
	var rows, size int64
	var checks []objectCheck
	seen := make(map[wire.FileValue]bool) // many rows may name one object: stat it once
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
				id := wire.FileValue{Key: v.Key, Size: v.Size}
				if !valid[j] || seen[id] {
					continue
				}
				seen[id] = true
				checks = append(checks, objectCheck{column: f.Name, row: j, value: v})
			}
		}
	}
	if rows == 0 {
		return 0, wire.ErrEmptyAppend
	}
	if size > s.cfg.MaxAppendBytes {
		return 0, fmt.Errorf("%w: the append holds %d bytes of Arrow data, at most %d; split it", wire.ErrInvalidRequest, size, s.cfg.MaxAppendBytes)
	}
	if err := s.checkObjects(ctx, checks); err != nil {
		return 0, err
	}
	return rows, nil
}

// objectCheck is one FILE value an append names, and where.
type objectCheck struct {
	column string
	row    int
	value  wire.FileValue
}

// statConcurrency bounds the stats one append runs at once. A batch of
// hundreds of rows (a bulk put) then costs a few round trips to S3, not
// one per row, and a single append cannot flood the stage.
const statConcurrency = 16

// checkObjects stats every object in checks, statConcurrency at a time,
// and returns the error of the first check (in row order) that failed.
func (s *Service) checkObjects(ctx context.Context, checks []objectCheck) error {
	errs := make([]error, len(checks))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(statConcurrency, len(checks)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if errs[i] = s.checkObject(ctx, checks[i].value); errs[i] != nil {
					cancel() // the append fails anyway: stop statting
				}
			}
		}()
	}
	for i := range checks {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	for i, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("column %q row %d: %w", checks[i].column, checks[i].row, err)
		}
	}
	return ctx.Err()
}

func (s *Service) checkObject(ctx context.Context, v wire.FileValue) error {
	if err := s.doomedObject(v.Key); err != nil {
		return err
	}
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

// appendKind commits appends: the group's records become one Parquet
// data file, and the record adds it and its rows to the head.
var appendKind = &commitKind{name: "append", build: buildAppend}

func buildAppend(ctx context.Context, c *committer, rec *logRecord, group []*commitReq) (staged, error) {
	var recs []arrow.RecordBatch
	for _, r := range group {
		recs = append(recs, r.recs...)
		rec.Rows += r.rows
	}
	data, err := encodeParquet(c.t.schema, recs)
	if err != nil {
		return staged{}, fmt.Errorf("meta: encode parquet: %w", err)
	}
	key := layout.NewDataKey(c.t.id)
	rec.Files = []dataFile{{Key: key, Rows: rec.Rows, Size: int64(len(data))}}
	c.holds.hold(key)
	return staged{
		settle: func() { c.holds.release(key) },
		write: func() error {
			_, err := c.store.Put(ctx, key, bytes.NewReader(data), objects.PutOptions{ContentType: "application/vnd.apache.parquet"})
			if err != nil {
				return fmt.Errorf("meta: write data file: %w", err)
			}
			return nil
		},
		discard: func() { // nothing refers to it
			_ = c.store.Delete(ctx, key)
			c.holds.release(key)
		},
	}, nil
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
