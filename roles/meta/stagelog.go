package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/layout"
	"github.com/lakedata/lake/wire/lakepb"
)

// recordFormat is the format of catalog entries and of log records that
// only add files; their keys are objects/layout's (DESIGN §2).
const recordFormat = 1

// removesFormat is the format of a log record that removes data files (a
// compaction). Appends keep writing recordFormat, so a table that was
// never compacted stays readable by the previous release; a release that
// does not know removes refuses such a record instead of reading every
// row twice.
const removesFormat = 2

// Kinds of log record other than appends (logRecord.Kind); kindDelete
// and kindExpire are in delete.go and expire.go.
const kindCompact = "compact"

// catalogEntry is _lake/catalog/<name>.json: the commit point of a table's
// creation. Put-if-absent makes exactly one of racing creators win.
type catalogEntry struct {
	Format    int       `json:"format"`
	Name      string    `json:"name"`
	TableID   string    `json:"table_id"`
	CreatedAt time.Time `json:"created_at"`
}

// logRecord is one version of a table: _lake/tables/<id>/log/<version>.json.
// Version 0 is the creation and carries the schema; a later version adds
// data files (an append) or replaces some by others holding the same rows
// (a compaction: Kind "compact", Removes, Rows 0).
type logRecord struct {
	Format      int          `json:"format"`
	TableID     string       `json:"table_id"`
	Version     int64        `json:"version"`
	CommittedAt time.Time    `json:"committed_at"`
	Name        string       `json:"name,omitempty"`   // version 0
	Schema      []byte       `json:"schema,omitempty"` // version 0: IPC schema
	Kind        string       `json:"kind,omitempty"`   // "" is an append
	Files       []dataFile   `json:"files,omitempty"`
	Removes     []string     `json:"removes,omitempty"`     // keys of data files the version drops
	RetainFrom  int64        `json:"retain_from,omitempty"` // an expiry: the oldest version still readable
	Commits     []commitMark `json:"commits,omitempty"`
	Rows        int64        `json:"rows"` // rows the version adds
}

type dataFile struct {
	Key  string `json:"key"`
	Rows int64  `json:"rows"`
	Size int64  `json:"size"`
}

// commitMark records an idempotency key and the rows it brought, so a
// retried append finds its version after a restart or a leader change.
type commitMark struct {
	ID   string `json:"id"`
	Rows int64  `json:"rows"`
}

func (r *logRecord) validate(tableID string, version int64) error {
	switch {
	case r.Format != recordFormat && r.Format != removesFormat:
		return fmt.Errorf("log record format %d is not supported", r.Format)
	case len(r.Removes) > 0 && r.Format < removesFormat:
		return fmt.Errorf("log record of format %d removes files", r.Format)
	case r.TableID != tableID:
		return fmt.Errorf("log record belongs to table %q, not %q", r.TableID, tableID)
	case r.Version != version:
		return fmt.Errorf("log record says version %d at the key of version %d", r.Version, version)
	case version == 0 && len(r.Schema) == 0:
		return errors.New("creation record without a schema")
	case r.RetainFrom < 0 || r.RetainFrom >= version && r.RetainFrom > 0:
		return fmt.Errorf("log record keeps versions from %d, not before its own %d", r.RetainFrom, version)
	}
	return nil
}

func (r *logRecord) protoFiles() []*lakepb.DataFile {
	out := make([]*lakepb.DataFile, len(r.Files))
	for i, f := range r.Files {
		out[i] = &lakepb.DataFile{Key: f.Key, Rows: f.Rows, Size: f.Size}
	}
	return out
}

// applyFiles returns files, the data files of the version before r, as
// they are after r: without the ones r removes, with the ones r adds in
// the place of the first one removed (so the order of rows stays close to
// the order they came in), or at the end.
func (r *logRecord) applyFiles(files []*lakepb.DataFile) []*lakepb.DataFile {
	if len(r.Removes) == 0 {
		return append(files, r.protoFiles()...)
	}
	gone := make(map[string]bool, len(r.Removes))
	for _, k := range r.Removes {
		gone[k] = true
	}
	out := make([]*lakepb.DataFile, 0, len(files)-len(r.Removes)+len(r.Files))
	added := false
	for _, f := range files {
		if !gone[f.Key] {
			out = append(out, f)
			continue
		}
		if !added {
			out = append(out, r.protoFiles()...)
			added = true
		}
	}
	if !added {
		out = append(out, r.protoFiles()...)
	}
	return out
}

// kindName is what the version did, as history shows it.
func (r *logRecord) kindName() string {
	switch {
	case r.Version == 0:
		return "create"
	case r.Kind == "":
		return "append"
	}
	return r.Kind
}

func (r *logRecord) commitIDs() []string {
	ids := make([]string, len(r.Commits))
	for i, c := range r.Commits {
		ids[i] = c.ID
	}
	return ids
}

// stageLog reads and writes the catalog and commit logs in the stage.
type stageLog struct {
	store objects.Store
}

// putRecord publishes a log record if its version is still free. It returns
// objects.ErrExists when another writer (a deposed or a new leader) already
// took the version.
func (l stageLog) putRecord(ctx context.Context, r *logRecord) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return b, l.putRecordAfter(ctx, r, b, func() error { return nil })
}

// putRecordAfter publishes raw as r's log record once write (the data file
// the record refers to) has succeeded. Where the stage can prepare objects,
// the record is made durable while write runs, so a commit waits for one
// fsync'd write instead of two in a row; it is published only after write
// returns, so no visible record ever points to a missing data file.
func (l stageLog) putRecordAfter(ctx context.Context, r *logRecord, raw []byte, write func() error) error {
	key := layout.LogKey(r.TableID, r.Version)
	p, ok := l.store.(objects.Preparer)
	if !ok {
		if err := write(); err != nil {
			return err
		}
		return l.store.PutIfAbsent(ctx, key, raw)
	}
	var prepared objects.Prepared
	var prepErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		prepared, prepErr = p.PrepareIfAbsent(ctx, key, raw)
	}()
	writeErr := write()
	<-done
	if prepErr != nil {
		return errors.Join(writeErr, prepErr)
	}
	if writeErr != nil {
		prepared.Discard()
		return writeErr
	}
	err := prepared.Publish(ctx)
	prepared.Discard()
	return err
}

// readRecord returns the raw and decoded record of a version, or
// objects.ErrNotFound when the log ends before it.
func (l stageLog) readRecord(ctx context.Context, tableID string, version int64) ([]byte, *logRecord, error) {
	b, err := objects.ReadAll(ctx, l.store, layout.LogKey(tableID, version))
	if err != nil {
		return nil, nil, err
	}
	r, err := decodeRecord(b, tableID, version)
	return b, r, err
}

func decodeRecord(b []byte, tableID string, version int64) (*logRecord, error) {
	var r logRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("meta: corrupt log record %s: %w", layout.LogKey(tableID, version), err)
	}
	if err := r.validate(tableID, version); err != nil {
		return nil, fmt.Errorf("meta: bad log record %s: %w", layout.LogKey(tableID, version), err)
	}
	return &r, nil
}

func (l stageLog) putCatalog(ctx context.Context, e catalogEntry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return l.store.PutIfAbsent(ctx, layout.CatalogKey(e.Name), b)
}

func (l stageLog) readCatalog(ctx context.Context, name string) (catalogEntry, error) {
	b, err := objects.ReadAll(ctx, l.store, layout.CatalogKey(name))
	if err != nil {
		return catalogEntry{}, err
	}
	var e catalogEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return catalogEntry{}, fmt.Errorf("meta: corrupt catalog entry %s: %w", layout.CatalogKey(name), err)
	}
	if e.Format != recordFormat || e.Name != name || e.TableID == "" {
		return catalogEntry{}, fmt.Errorf("meta: bad catalog entry %s", layout.CatalogKey(name))
	}
	return e, nil
}

// catalogNames lists the table names in the stage catalog.
func (l stageLog) catalogNames(ctx context.Context) ([]string, error) {
	var names []string
	for info, err := range l.store.List(ctx, layout.CatalogPrefix) {
		if err != nil {
			return nil, err
		}
		k, err := layout.Parse(info.Key)
		if err != nil || k.Kind != layout.KindCatalog {
			continue // not ours; never fail a rebuild over a stray file
		}
		names = append(names, k.Name)
	}
	return names, nil
}
