package query

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"

	"github.com/lakedata/lake/roles/query/sqlguard"
)

// tableSource is what caller SQL may read: the lake tables, and the
// versions of them its AT clauses name.
type tableSource interface {
	isTable(name string) bool
	// version returns the hidden view (in schema hiddenSchema) of tt's
	// table at tt's version, or at the version current at atMicros when
	// tt has a Timestamp. The view stays defined until release is called.
	version(ctx context.Context, tt sqlguard.TimeTravel, atMicros int64) (view string, release func(), err error)
}

// guard is the first wall: DuckDB parses q (json_serialize_sql parses
// only: nothing is bound, planned or run) and sqlguard walks the tree. It
// returns the text to run: q, or, when q travels in time, q rewritten to
// read the hidden view of each version it names (timetravel.go), which
// stay defined until release is called. An accepted text is remembered
// with the lake tables it names (and its rewriting, when every AT clause
// names a version), so the same text (a dashboard's, or GetFlightInfo's
// then DoGet's) passes again at the cost of looking those names up.
func guard(ctx context.Context, p *parser, q string, tables tableSource, cache *guardCache) (text string, release func(), err error) {
	if e, ok := cache.accepts(q, tables.isTable); ok {
		if len(e.travel) == 0 {
			return q, func() {}, nil
		}
		if release, err := pinVersions(ctx, p, tables, e.travel); err == nil {
			return e.rewritten, release, nil
		}
		// Check and resolve it again below, to say why.
	}
	var named []string
	recording := func(name string) bool {
		named = append(named, name)
		return tables.isTable(name)
	}
	travel, err := parseAndCheck(ctx, p, q, recording)
	if err != nil {
		return "", nil, err
	}
	if len(travel) == 0 {
		cache.remember(q, guardEntry{named: named})
		return q, func() {}, nil
	}
	text, release, err = rewriteTimeTravel(ctx, p, q, tables)
	if err != nil {
		return "", nil, err
	}
	if byVersionOnly(travel) {
		cache.remember(q, guardEntry{named: named, travel: travel, rewritten: text})
	}
	return text, release, nil
}

func parseAndCheck(ctx context.Context, p *parser, q string, isTable func(string) bool) ([]sqlguard.TimeTravel, error) {
	tree, err := p.serialize(ctx, q)
	if err != nil {
		return nil, err
	}
	travel, err := sqlguard.Analyze(tree, isTable)
	return travel, guardError(q, err)
}

// guardError words an error of sqlguard for the caller.
func guardError(q string, err error) error {
	var notSelect *sqlguard.NotSelect
	switch {
	case err == nil:
		return nil
	case errors.As(err, &notSelect) && notSelect.Statements == 1:
		if kw := leadingKeyword(q); writeKeywords[kw] {
			return fmt.Errorf("%w: this is a statement of type %s", ErrNotReadOnly, kw)
		}
		return fmt.Errorf("%w: %v", ErrNotReadOnly, err)
	case errors.As(err, &notSelect) && notSelect.Statements > 1:
		return fmt.Errorf("%w: the text holds more than one statement", ErrNotReadOnly)
	case errors.As(err, &notSelect):
		return fmt.Errorf("%w: empty query", errSQL)
	case errors.Is(err, sqlguard.ErrSyntax):
		return fmt.Errorf("%w: %v", errSQL, err)
	}
	return err
}

// guardCache remembers accepted texts. It is bounded by the bytes of the
// texts it holds and forgets everything when full: simple, and a text
// refused or forgotten is only parsed again.
type guardCache struct {
	mu       sync.Mutex
	accepted map[string]guardEntry
	bytes    int
}

// guardEntry is what the cache knows of an accepted text.
type guardEntry struct {
	named []string // lake table names it looked up
	// travel are its AT clauses, all by version, and rewritten the text
	// to run, reading the hidden views of those versions; whose names
	// depend on nothing but the table and the version.
	travel    []sqlguard.TimeTravel
	rewritten string
}

const (
	guardCacheBytes   = 4 << 20
	guardCacheMaxText = 16 << 10
)

func (c *guardCache) accepts(q string, isTable func(string) bool) (guardEntry, bool) {
	c.mu.Lock()
	e, ok := c.accepted[q]
	c.mu.Unlock()
	if !ok {
		return guardEntry{}, false
	}
	for _, n := range e.named {
		if !isTable(n) {
			return guardEntry{}, false // dropped since: check again and say why
		}
	}
	return e, true
}

func (c *guardCache) remember(q string, e guardEntry) {
	if len(q) > guardCacheMaxText {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	size := len(q) + len(e.rewritten)
	if c.accepted == nil || c.bytes+size > guardCacheBytes {
		c.accepted, c.bytes = map[string]guardEntry{}, 0
	}
	if _, ok := c.accepted[q]; !ok {
		c.accepted[q] = e
		c.bytes += size
	}
}

// parser has DuckDB parse caller text on connections of its own. They only
// ever run the role's own statements with the text as a bound parameter,
// never the caller's SQL, so unlike the statement connections they are
// kept, and so are their prepared statements (preparing one for every
// statement cost more than the parse).
type parser struct {
	db *sql.DB
	// stmt serializes the tree sqlguard checks; full the whole tree
	// (nulls and empty lists too), which json_deserialize_sql needs back;
	// deserialize turns a tree into SQL text.
	stmt, full, deserialize *sql.Stmt
	// epochs reads a time-travel time as Unix microseconds, one statement
	// per type it may be written as.
	epochs map[string]*sql.Stmt
}

// timestampCasts are the SQL types of the time-travel times sqlguard
// accepts.
var timestampCasts = map[string]string{"TIMESTAMP": "TIMESTAMP", "TIMESTAMP WITH TIME ZONE": "TIMESTAMPTZ", "DATE": "DATE"}

func newParser(ctx context.Context, c driver.Connector) (*parser, error) {
	// Wrapped so that closing the parser leaves the database open: a
	// sql.DB closes a connector that has a Close method.
	db := sql.OpenDB(struct{ driver.Connector }{c})
	db.SetMaxIdleConns(4)
	p := &parser{db: db, epochs: map[string]*sql.Stmt{}}
	texts := map[**sql.Stmt]string{
		&p.stmt:        "SELECT json_serialize_sql($1::VARCHAR, skip_null := true, skip_empty := true)::VARCHAR",
		&p.full:        "SELECT json_serialize_sql($1::VARCHAR)::VARCHAR",
		&p.deserialize: "SELECT json_deserialize_sql($1::JSON)",
	}
	for dst, text := range texts {
		stmt, err := db.PrepareContext(ctx, text)
		if err != nil {
			p.close()
			return nil, fmt.Errorf("query: prepare the parser: %w", err)
		}
		*dst = stmt
	}
	for typ, cast := range timestampCasts {
		// The session time zone is UTC (lockDown): a TIMESTAMP is a UTC time.
		stmt, err := db.PrepareContext(ctx, "SELECT epoch_us(CAST($1::VARCHAR AS "+cast+")::TIMESTAMPTZ)")
		if err != nil {
			p.close()
			return nil, fmt.Errorf("query: prepare the parser: %w", err)
		}
		p.epochs[typ] = stmt
	}
	return p, nil
}

// serialize is the tree sqlguard checks.
func (p *parser) serialize(ctx context.Context, q string) ([]byte, error) {
	var tree string
	if err := p.stmt.QueryRowContext(ctx, q).Scan(&tree); err != nil {
		return nil, fmt.Errorf("query: parse: %w", err)
	}
	return []byte(tree), nil
}

func (p *parser) close() error {
	stmts := []*sql.Stmt{p.stmt, p.full, p.deserialize}
	for _, s := range p.epochs {
		stmts = append(stmts, s)
	}
	var errs []error
	for _, s := range stmts {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(append(errs, p.db.Close())...)
}
