package meta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/layout"
	"github.com/lakedata/lake/wire/lakepb"
)

// Log checkpoints (DESIGN §9). Every CheckpointInterval versions the
// leader writes the whole state of a table at that version as one object,
// _lake/tables/<id>/checkpoints/<version>.json, and then overwrites the
// hint _lake/tables/<id>/checkpoints/_last.json with the version. A node
// that must learn a table from the stage (a cold start without an index,
// a rebuild, a follower far behind) reads the hint, the checkpoint and
// the log after it: O(1) objects plus at most about one interval of log
// records, whatever the number of versions.
//
// A checkpoint is derived: it holds nothing the log does not, so a lost
// or torn one costs only a longer read. The log stays the commit point;
// a checkpoint is written only for a version that committed, by
// put-if-absent, and two leaders writing the same version write the same
// state. The hint may lag (a crash between checkpoint and hint, or a
// deposed leader overwriting a newer hint); readers then read more log.
//
// Every node, follower or leader, also keeps the newest checkpoint of
// each table in its index as the table's base, so its own restart reads
// the base and the records after it instead of every record.

// checkpointFormat is the format of checkpoint objects and of the hint.
const checkpointFormat = 1

// Defaults: a checkpoint every 100 versions keeps the log read at a cold
// start to at most about 100 records per table (a fraction of a second
// on S3), and a retry of an append within a week is still recognised.
const (
	DefaultCheckpointInterval = 100
	DefaultCommitRetention    = 7 * 24 * time.Hour
)

// checkpointRecord is the state of a table at Version.
type checkpointRecord struct {
	Format      int        `json:"format"`
	TableID     string     `json:"table_id"`
	Name        string     `json:"name"`
	Schema      []byte     `json:"schema"` // IPC schema, as in the creation record
	CreatedAt   time.Time  `json:"created_at"`
	Version     int64      `json:"version"`
	CommittedAt time.Time  `json:"committed_at"` // of Version
	Rows        int64      `json:"rows"`
	Files       []dataFile `json:"files"` // data files of Version, in table order
	// RetainFrom is the oldest version still readable (expire.go).
	RetainFrom int64 `json:"retain_from,omitempty"`
	// Commits are the commit marks of the versions committed at or after
	// CommitsSince, so a retry within the retention window is still
	// answered with its version after a node learns the table from here.
	CommitsSince time.Time          `json:"commits_since"`
	Commits      []checkpointCommit `json:"commits,omitempty"`
}

// checkpointCommit is one commit mark and the version that holds it.
type checkpointCommit struct {
	ID          string    `json:"id"`
	Version     int64     `json:"version"`
	Rows        int64     `json:"rows"`
	CommittedAt time.Time `json:"committed_at"`
}

// lastCheckpoint is the hint: the version of the newest checkpoint.
type lastCheckpoint struct {
	Format  int   `json:"format"`
	Version int64 `json:"version"`
}

func (c *checkpointRecord) validate(tableID string, version int64) error {
	switch {
	case c.Format != checkpointFormat:
		return fmt.Errorf("checkpoint format %d is not supported", c.Format)
	case c.TableID != tableID:
		return fmt.Errorf("checkpoint belongs to table %q, not %q", c.TableID, tableID)
	case version >= 0 && c.Version != version:
		return fmt.Errorf("checkpoint says version %d at the key of version %d", c.Version, version)
	case c.Version < 1:
		return fmt.Errorf("checkpoint of version %d", c.Version)
	case len(c.Schema) == 0:
		return errors.New("checkpoint without a schema")
	case c.Rows < 0:
		return fmt.Errorf("checkpoint with %d rows", c.Rows)
	case c.RetainFrom < 0 || c.RetainFrom > c.Version:
		return fmt.Errorf("checkpoint keeps versions from %d of %d", c.RetainFrom, c.Version)
	}
	var rows int64
	for _, f := range c.Files {
		if f.Key == "" || f.Rows < 0 || f.Size < 0 {
			return fmt.Errorf("checkpoint with a bad data file %+v", f)
		}
		rows += f.Rows
	}
	if rows != c.Rows {
		return fmt.Errorf("checkpoint files hold %d rows, it says %d", rows, c.Rows)
	}
	for _, m := range c.Commits {
		if m.ID == "" || m.Version < 1 || m.Version > c.Version {
			return fmt.Errorf("checkpoint with a bad commit mark %+v", m)
		}
	}
	return nil
}

// decodeCheckpoint reads a checkpoint object of tableID; version is the
// version its key names, or -1 (the index, which keys it by table).
func decodeCheckpoint(b []byte, tableID string, version int64) (*checkpointRecord, error) {
	var c checkpointRecord
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("meta: corrupt checkpoint of table %s: %w", tableID, err)
	}
	if err := c.validate(tableID, version); err != nil {
		return nil, fmt.Errorf("meta: bad checkpoint of table %s: %w", tableID, err)
	}
	return &c, nil
}

func decodeLastCheckpoint(b []byte, tableID string) (int64, error) {
	var h lastCheckpoint
	if err := json.Unmarshal(b, &h); err != nil {
		return 0, fmt.Errorf("meta: corrupt %s: %w", layout.LastCheckpointKey(tableID), err)
	}
	if h.Format != checkpointFormat || h.Version < 1 {
		return 0, fmt.Errorf("meta: bad %s: format %d, version %d", layout.LastCheckpointKey(tableID), h.Format, h.Version)
	}
	return h.Version, nil
}

// protoFiles is the checkpoint's data files as the wire and memory hold
// them.
func (c *checkpointRecord) protoFiles() []*lakepb.DataFile {
	out := make([]*lakepb.DataFile, len(c.Files))
	for i, f := range c.Files {
		out[i] = &lakepb.DataFile{Key: f.Key, Rows: f.Rows, Size: f.Size}
	}
	return out
}

// advance moves the checkpoint past rec, the version after it, keeping the
// commit marks committed within retention of rec.
func (c *checkpointRecord) advance(rec *logRecord, retention time.Duration) {
	files := rec.applyFiles(c.protoFiles())
	c.Files = make([]dataFile, len(files))
	for i, f := range files {
		c.Files[i] = dataFile{Key: f.GetKey(), Rows: f.GetRows(), Size: f.GetSize()}
	}
	c.Rows += rec.Rows
	c.Version, c.CommittedAt = rec.Version, rec.CommittedAt
	c.RetainFrom = max(c.RetainFrom, rec.RetainFrom)
	for _, m := range rec.Commits {
		if m.ID != "" {
			c.Commits = append(c.Commits, checkpointCommit{ID: m.ID, Version: rec.Version, Rows: m.Rows, CommittedAt: rec.CommittedAt})
		}
	}
	since := c.CommittedAt.Add(-retention)
	if since.After(c.CommitsSince) {
		c.CommitsSince = since
		kept := c.Commits[:0]
		for _, m := range c.Commits {
			if !m.CommittedAt.Before(since) {
				kept = append(kept, m)
			}
		}
		c.Commits = kept
	}
}

// putCheckpoint writes a checkpoint, if absent, then the hint naming it.
func (l stageLog) putCheckpoint(ctx context.Context, raw []byte, c *checkpointRecord) error {
	err := l.store.PutIfAbsent(ctx, layout.CheckpointKey(c.TableID, c.Version), raw)
	if err != nil && !errors.Is(err, objects.ErrExists) {
		return err
	}
	hint, err := json.Marshal(lastCheckpoint{Format: checkpointFormat, Version: c.Version})
	if err != nil {
		return err
	}
	_, err = l.store.Put(ctx, layout.LastCheckpointKey(c.TableID), bytes.NewReader(hint), objects.PutOptions{ContentType: "application/json"})
	return err
}

// latestCheckpoint reads the checkpoint the hint names (objects.ErrNotFound:
// the table has none yet).
func (l stageLog) latestCheckpoint(ctx context.Context, tableID string) ([]byte, *checkpointRecord, error) {
	b, err := objects.ReadAll(ctx, l.store, layout.LastCheckpointKey(tableID))
	if err != nil {
		return nil, nil, err
	}
	v, err := decodeLastCheckpoint(b, tableID)
	if err != nil {
		return nil, nil, err
	}
	raw, err := objects.ReadAll(ctx, l.store, layout.CheckpointKey(tableID, v))
	if err != nil {
		return nil, nil, fmt.Errorf("meta: checkpoint %d of table %s: %w", v, tableID, err)
	}
	c, err := decodeCheckpoint(raw, tableID, v)
	return raw, c, err
}

// startCheckpointer runs the background checkpointer: for each table
// whose head passed a multiple of the interval it builds the checkpoint
// at the newest such version, writes it to the stage when this node
// leads, and makes it the index's base on every node.
func (s *Service) startCheckpointer() {
	if s.cfg.CheckpointInterval <= 0 {
		return
	}
	s.runQueue(&s.checkpointQ, func(t *table) {
		if err := s.checkpoint(s.ctx, t); err != nil && s.ctx.Err() == nil {
			s.log.Warn("cannot checkpoint the table; its log is read from the previous checkpoint", "table", t.name, "err", err)
		}
	})
}

// checkpoint makes the checkpoint of t at the newest multiple of the
// interval at or before its head, unless the base is there already.
func (s *Service) checkpoint(ctx context.Context, t *table) error {
	every := s.cfg.CheckpointInterval
	row := t.row()
	target := row.Head - row.Head%every
	if target <= row.Base || target < 1 {
		return nil
	}
	c, err := s.buildCheckpoint(ctx, t, target)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(c)
	if err != nil {
		return err
	}
	// Only the leader writes to the stage; a follower computes the same
	// state from the same log for its own index.
	if s.canCommit() {
		if err := s.stage.putCheckpoint(ctx, raw, c); err != nil {
			return fmt.Errorf("write checkpoint %d: %w", target, err)
		}
	}
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	if t.row().Base >= target {
		return nil // a catch-up set a newer base meanwhile
	}
	return s.reg.setBase(t, raw, c)
}

// buildCheckpoint computes t's state at version (at or before its head)
// from the index's base and the log records after it.
func (s *Service) buildCheckpoint(ctx context.Context, t *table, version int64) (*checkpointRecord, error) {
	c, err := s.ix.base(t.id)
	if err != nil {
		return nil, err
	}
	if c == nil || c.Version > version {
		c = &checkpointRecord{Format: checkpointFormat, TableID: t.id, Name: t.name, Schema: t.schemaRaw, CreatedAt: t.createdAt}
	}
	err = s.reg.records(ctx, t, c.Version+1, version, false, func(r *logRecord) bool {
		c.advance(r, s.cfg.CommitRetention)
		return true
	})
	if err != nil {
		return nil, err
	}
	if c.Version != version {
		return nil, fmt.Errorf("the log of %q ends at version %d, before %d", t.name, c.Version, version)
	}
	return c, nil
}
