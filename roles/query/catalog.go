package query

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// catalog keeps one DuckDB view per lake table, pointing at the Parquet
// files of the table's latest version.
type catalog struct {
	meta      *flightrpc.Pool
	eng       *engine
	stage     *lakepb.StageDescriptor
	cache     *fileCache // local copies of a remote stage's data files; nil for a local stage
	emptyDir  string     // holds one empty Parquet file per table schema
	mu        sync.Mutex
	versions  map[string]tableView // name → what its view shows now
	acked     map[string]int64     // name → newest version this node acknowledged an append of
	refreshes int64                // views (re)defined; for tests

	// Views of old versions, for time travel (timetravel.go).
	old         map[string]*versionView // view name in hiddenSchema → view
	maxOld      int                     // views of old versions kept: maxVersionViews
	clock       uint64                  // orders the uses of old views
	hiddenReady bool                    // hiddenSchema exists
}

type tableView struct {
	id      string
	version int64
	keys    []string // the data files the view reads
}

// refresh asks the metadata service for the tables and their versions and
// redefines the views of tables that changed. It returns the table list.
// Its cost when no table moved is one ListTables call and a look at each
// table's version: nothing in it grows with the versions of a table.
func (c *catalog) refresh(ctx context.Context) ([]*lakepb.TableInfo, error) {
	var list lakepb.TableList
	if err := c.meta.Action(ctx, wire.ActionListTables, &lakepb.ListTablesRequest{}, &list); err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := false
	for _, t := range list.Tables {
		v, ok := c.versions[t.Name]
		// A meta follower may answer from a moment ago: never move a view
		// back, and never show less than this node acknowledged
		// (read-your-writes).
		if ok && v.id == t.Id && v.version >= t.Version && v.version >= c.acked[t.Name] {
			continue
		}
		if err := c.define(ctx, t); err != nil {
			return nil, err
		}
		changed = true
	}
	// The cache gains files only when a view is defined, and which files
	// views need changes only then; a statement that moved no view must
	// not walk every data file of every table (that grows with the
	// versions, until compaction).
	if changed {
		c.evictCache()
	}
	return list.Tables, nil
}

// evictCache lets the cache of a remote stage's data files drop what no
// view reads. c.mu is held.
func (c *catalog) evictCache() {
	if c.cache == nil {
		return
	}
	needed := map[string]bool{}
	for _, v := range c.versions {
		for _, k := range v.keys {
			needed[k] = true
		}
	}
	for _, v := range c.old {
		for _, k := range v.keys {
			needed[k] = true
		}
	}
	c.cache.evict(needed)
}

// noteAck records that this node acknowledged version of table, so its
// next statements see at least that version.
func (c *catalog) noteAck(table string, version int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if version > c.acked[table] {
		c.acked[table] = version
	}
}

// define (re)creates the view of t at t.Version, or at the newest version
// when this node acknowledged a later one than t.Version.
func (c *catalog) define(ctx context.Context, t *lakepb.TableInfo) error {
	var snap lakepb.Snapshot
	req := &lakepb.SnapshotRequest{Name: t.Name, Version: &t.Version}
	if min := c.acked[t.Name]; min > t.Version {
		req = &lakepb.SnapshotRequest{Name: t.Name, MinVersion: &min}
	}
	if err := c.meta.Action(ctx, wire.ActionSnapshot, req, &snap); err != nil {
		return fmt.Errorf("snapshot of %s: %w", t.Name, err)
	}
	from, keys, err := c.readParquet(ctx, t, snap.Files)
	if err != nil {
		return err
	}
	stmt := fmt.Sprintf("CREATE OR REPLACE VIEW %s AS SELECT * FROM %s", sqlIdent(t.Name), from)
	if err := c.eng.exec(ctx, stmt); err != nil {
		return fmt.Errorf("define view %s: %w", t.Name, err)
	}
	c.tableMoved(t.Name)
	c.versions[t.Name] = tableView{id: t.Id, version: snap.Version, keys: keys}
	c.refreshes++
	return nil
}

// readParquet is the read_parquet call of a view over files, data files
// of t, and their keys.
func (c *catalog) readParquet(ctx context.Context, t *lakepb.TableInfo, files []*lakepb.DataFile) (string, []string, error) {
	paths := make([]string, 0, len(files))
	keys := make([]string, 0, len(files))
	for _, f := range files {
		p, err := c.dataPath(ctx, f)
		if err != nil {
			return "", nil, err
		}
		paths = append(paths, sqlString(p))
		keys = append(keys, f.Key)
	}
	if len(paths) == 0 {
		// read_parquet needs a file to learn the columns from: an empty
		// table reads an empty file of its schema.
		p, err := c.emptyFile(t)
		if err != nil {
			return "", nil, err
		}
		paths = append(paths, sqlString(p))
	}
	return "read_parquet([" + strings.Join(paths, ", ") + "])", keys, nil
}

// dataPath is where DuckDB reads a data file: in place on a local stage,
// a cached copy otherwise.
func (c *catalog) dataPath(ctx context.Context, f *lakepb.DataFile) (string, error) {
	if err := wire.ValidateKey(f.Key); err != nil {
		return "", err
	}
	if c.cache != nil {
		return c.cache.path(ctx, f.Key, f.Size)
	}
	return filepath.Join(c.stage.GetLocalPath(), filepath.FromSlash(f.Key)), nil
}

// emptyFile writes (once) an empty Parquet file with t's schema.
func (c *catalog) emptyFile(t *lakepb.TableInfo) (string, error) {
	path := filepath.Join(c.emptyDir, t.Id+".parquet")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	schema, err := wire.DecodeSchema(t.Schema)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(schema, &buf, parquet.NewWriterProperties(), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return "", err
	}
	return path, os.Rename(tmp, path)
}

// isTable reports whether name is a lake table with a view, the only
// tables caller SQL may name.
func (c *catalog) isTable(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.versions[name]
	return ok
}
