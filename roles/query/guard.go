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

// guard is the first wall: DuckDB parses q (json_serialize_sql parses
// only: nothing is bound, planned or run) and sqlguard walks the tree.
// isTable says which names are lake tables. An accepted text is
// remembered with the lake tables it names, so the same text (a
// dashboard's, or GetFlightInfo's then DoGet's) passes again at the cost
// of looking those names up.
func guard(ctx context.Context, p *parser, q string, isTable func(string) bool, cache *guardCache) error {
	if cache.accepts(q, isTable) {
		return nil
	}
	var named []string
	recording := func(name string) bool {
		named = append(named, name)
		return isTable(name)
	}
	err := parseAndCheck(ctx, p, q, recording)
	if err == nil {
		cache.remember(q, named)
	}
	return err
}

func parseAndCheck(ctx context.Context, p *parser, q string, isTable func(string) bool) error {
	var tree string
	if err := p.stmt.QueryRowContext(ctx, q).Scan(&tree); err != nil {
		return fmt.Errorf("query: parse: %w", err)
	}
	err := sqlguard.Check([]byte(tree), isTable)
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
	accepted map[string][]string // text → lake table names it looked up
	bytes    int
}

const (
	guardCacheBytes   = 4 << 20
	guardCacheMaxText = 16 << 10
)

func (c *guardCache) accepts(q string, isTable func(string) bool) bool {
	c.mu.Lock()
	named, ok := c.accepted[q]
	c.mu.Unlock()
	if !ok {
		return false
	}
	for _, n := range named {
		if !isTable(n) {
			return false // dropped since: check again and say why
		}
	}
	return true
}

func (c *guardCache) remember(q string, named []string) {
	if len(q) > guardCacheMaxText {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.accepted == nil || c.bytes+len(q) > guardCacheBytes {
		c.accepted, c.bytes = map[string][]string{}, 0
	}
	if _, ok := c.accepted[q]; !ok {
		c.accepted[q] = named
		c.bytes += len(q)
	}
}

// parser has DuckDB parse caller text on connections of its own. They only
// ever run json_serialize_sql with the text as a bound parameter, never
// the caller's SQL, so unlike the statement connections they are kept, and
// so is their prepared statement (preparing it for every statement cost
// more than the parse).
type parser struct {
	db   *sql.DB
	stmt *sql.Stmt
}

func newParser(ctx context.Context, c driver.Connector) (*parser, error) {
	// Wrapped so that closing the parser leaves the database open: a
	// sql.DB closes a connector that has a Close method.
	db := sql.OpenDB(struct{ driver.Connector }{c})
	db.SetMaxIdleConns(4)
	stmt, err := db.PrepareContext(ctx, "SELECT json_serialize_sql($1::VARCHAR, skip_null := true, skip_empty := true)::VARCHAR")
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("query: prepare the parser: %w", err)
	}
	return &parser{db: db, stmt: stmt}, nil
}

func (p *parser) close() error {
	return errors.Join(p.stmt.Close(), p.db.Close())
}
