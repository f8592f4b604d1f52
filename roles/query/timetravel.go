package query

import (
	"context"
	"fmt"
	"sync"

	"github.com/lakedata/lake/roles/query/sqlguard"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// Time travel (DESIGN §10). DuckDB parses FROM t AT (VERSION => n) but
// refuses it on a view, and every lake table is one. So the role resolves
// each AT clause itself: it asks meta for that version's data files,
// defines a view of them in hiddenSchema (or finds it defined), and
// rewrites the parse tree so the reference reads that view under its old
// name, then turns the tree back into SQL (json_deserialize_sql) and
// checks that text again. Caller SQL can never name hiddenSchema: the
// allow-list refuses every schema but main and information_schema.

// hiddenSchema holds the views of table versions that time travel reads.
const hiddenSchema = "lake_versions"

// maxVersionViews bounds the version views kept defined; the least
// recently used one that no running statement reads goes first.
const maxVersionViews = 64

// versionViewName is the view of table at version: it depends on nothing
// else, so the rewriting of a text whose AT clauses all name versions can
// be remembered.
func versionViewName(table string, version int64) string {
	return fmt.Sprintf("%s@%d", table, version)
}

func byVersionOnly(travel []sqlguard.TimeTravel) bool {
	for _, tt := range travel {
		if tt.Timestamp != "" {
			return false
		}
	}
	return true
}

// rewriteTimeTravel returns q rewritten to read, for each of its AT
// clauses, the view of the version it names, defined until release.
func rewriteTimeTravel(ctx context.Context, p *parser, q string, tables tableSource) (text string, release func(), err error) {
	var full string
	if err := p.full.QueryRowContext(ctx, q).Scan(&full); err != nil {
		return "", nil, fmt.Errorf("query: parse: %w", err)
	}
	var pins pinned
	views := map[string]bool{}
	tree, err := sqlguard.Rewrite([]byte(full), func(tt sqlguard.TimeTravel) (string, string, error) {
		view, err := pins.pin(ctx, p, tables, tt)
		views[view] = true
		return hiddenSchema, view, err
	})
	if err == nil {
		err = p.deserialize.QueryRowContext(ctx, string(tree)).Scan(&text)
	}
	if err == nil {
		// What came back is checked like caller text: the rewriting
		// must have changed nothing but the references.
		var checked []byte
		if checked, err = p.serialize(ctx, text); err == nil {
			err = guardError(text, sqlguard.CheckRewritten(checked, tables.isTable, hiddenSchema, func(v string) bool { return views[v] }))
		}
	}
	if err != nil {
		pins.release()
		return "", nil, err
	}
	return text, pins.release, nil
}

// pinVersions defines (or finds) the views of travel and keeps them until
// release.
func pinVersions(ctx context.Context, p *parser, tables tableSource, travel []sqlguard.TimeTravel) (release func(), err error) {
	var pins pinned
	for _, tt := range travel {
		if _, err := pins.pin(ctx, p, tables, tt); err != nil {
			pins.release()
			return nil, err
		}
	}
	return pins.release, nil
}

// pinned collects the releases of the views a statement reads.
type pinned []func()

func (ps *pinned) pin(ctx context.Context, p *parser, tables tableSource, tt sqlguard.TimeTravel) (string, error) {
	var at int64
	if tt.Timestamp != "" {
		var err error
		if at, err = p.epochMicros(ctx, tt); err != nil {
			return "", err
		}
	}
	view, release, err := tables.version(ctx, tt, at)
	if err != nil {
		return "", err
	}
	*ps = append(*ps, release)
	return view, nil
}

func (ps pinned) release() {
	for _, r := range ps {
		r()
	}
}

// epochMicros reads the time of tt as Unix microseconds.
func (p *parser) epochMicros(ctx context.Context, tt sqlguard.TimeTravel) (int64, error) {
	stmt := p.epochs[tt.TimestampType]
	if stmt == nil {
		return 0, fmt.Errorf("%w: %s: a time of type %s", errSQL, tt, tt.TimestampType)
	}
	var at int64
	if err := stmt.QueryRowContext(ctx, tt.Timestamp).Scan(&at); err != nil {
		return 0, fmt.Errorf("%w: %s: %v", errSQL, tt, err)
	}
	return at, nil
}

// versionView is a defined view of an old version.
type versionView struct {
	table string
	id    string // the table's id
	// stale: the table has moved since meta last gave this version, so
	// it may have expired; the next use asks meta again.
	stale bool
	keys  []string // the data files it reads
	pins  int      // statements reading it now
	used  uint64   // when it was last pinned, on the catalog's clock
}

// version implements tableSource for the catalog: the view of tt's table
// at its version, defined if need be from meta's snapshot. A version
// never committed is wire.ErrVersionNotFound, a time in the future
// wire.ErrTimestampInFuture, an expired version wire.ErrVersionExpired:
// meta's answers, which name the table and the version.
func (c *catalog) version(ctx context.Context, tt sqlguard.TimeTravel, atMicros int64) (string, func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.versions[tt.Table]
	if !ok {
		return "", nil, fmt.Errorf("%w: %s", wire.ErrTableNotFound, tt.Table)
	}
	req := &lakepb.SnapshotRequest{Name: tt.Table}
	if tt.Timestamp == "" {
		if v := c.old[versionViewName(tt.Table, tt.Version)]; v != nil && v.id == cur.id && !v.stale {
			return versionViewName(tt.Table, tt.Version), c.pin(versionViewName(tt.Table, tt.Version)), nil
		}
		req.Version = &tt.Version
	} else {
		req.AtUnixMicros = &atMicros
	}
	var snap lakepb.Snapshot
	if err := c.meta.Action(ctx, wire.ActionSnapshot, req, &snap); err != nil {
		return "", nil, fmt.Errorf("%s: %w", tt, err)
	}
	name := versionViewName(tt.Table, snap.Version)
	if v := c.old[name]; v != nil && v.id == snap.Id {
		v.stale = false // a version's files never change
	} else if err := c.defineVersion(ctx, name, &snap); err != nil {
		return "", nil, err
	}
	release := c.pin(name)
	c.evictVersions(ctx)
	return name, release, nil
}

func (c *catalog) defineVersion(ctx context.Context, name string, snap *lakepb.Snapshot) error {
	if !c.hiddenReady {
		if err := c.eng.exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+sqlIdent(hiddenSchema)); err != nil {
			return fmt.Errorf("query: create schema %s: %w", hiddenSchema, err)
		}
		c.hiddenReady = true
	}
	from, keys, err := c.readParquet(ctx, &lakepb.TableInfo{Name: snap.Name, Id: snap.Id, Schema: snap.Schema}, snap.Files)
	if err != nil {
		return err
	}
	stmt := fmt.Sprintf("CREATE OR REPLACE VIEW %s.%s AS SELECT * FROM %s", sqlIdent(hiddenSchema), sqlIdent(name), from)
	if err := c.eng.exec(ctx, stmt); err != nil {
		return fmt.Errorf("define view of %s version %d: %w", snap.Name, snap.Version, err)
	}
	c.old[name] = &versionView{table: snap.Name, id: snap.Id, keys: keys}
	c.evictCache()
	return nil
}

// tableMoved marks the views of table's old versions stale: a new
// version may have expired them (expiry commits a version of its own).
// c.mu is held.
func (c *catalog) tableMoved(table string) {
	for _, v := range c.old {
		if v.table == table {
			v.stale = true
		}
	}
}

// pin marks the view name read by one more statement until the returned
// function is called. c.mu is held.
func (c *catalog) pin(name string) func() {
	v := c.old[name]
	v.pins++
	c.clock++
	v.used = c.clock
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			v.pins--
			c.mu.Unlock()
		})
	}
}

// evictVersions drops the least recently used views that no statement
// reads while there are more than c.maxOld. c.mu is held.
func (c *catalog) evictVersions(ctx context.Context) {
	for len(c.old) > c.maxOld {
		victim := ""
		for name, v := range c.old {
			if v.pins == 0 && (victim == "" || v.used < c.old[victim].used) {
				victim = name
			}
		}
		if victim == "" {
			return // all in use: they go once released and a later one is defined
		}
		if err := c.eng.exec(ctx, fmt.Sprintf("DROP VIEW IF EXISTS %s.%s", sqlIdent(hiddenSchema), sqlIdent(victim))); err != nil {
			return
		}
		delete(c.old, victim)
	}
	c.evictCache()
}

// versionViewNames lists the defined version views, for tests.
func (c *catalog) versionViewNames() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for name := range c.old {
		out = append(out, name)
	}
	return out
}
