package query

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/duckdb/duckdb-go/v2"

	"github.com/lakedata/lake/roles/query/sqlguard"
)

// guard is the first wall: DuckDB parses q (json_serialize_sql parses
// only: nothing is bound, planned or run) and sqlguard walks the tree.
// isTable says which names are lake tables. An accepted text is
// remembered with the lake tables it names, so the same text (a
// dashboard's, or GetFlightInfo's then DoGet's) passes again at the cost
// of looking those names up.
func guard(ctx context.Context, conn *duckdb.Conn, q string, isTable func(string) bool, cache *guardCache) error {
	if cache.accepts(q, isTable) {
		return nil
	}
	var named []string
	recording := func(name string) bool {
		named = append(named, name)
		return isTable(name)
	}
	err := parseAndCheck(ctx, conn, q, recording)
	if err == nil {
		cache.remember(q, named)
	}
	return err
}

func parseAndCheck(ctx context.Context, conn *duckdb.Conn, q string, isTable func(string) bool) error {
	rows, err := conn.QueryContext(ctx, "SELECT json_serialize_sql($1::VARCHAR)::VARCHAR", []driver.NamedValue{{Ordinal: 1, Value: q}})
	if err != nil {
		return fmt.Errorf("query: parse: %w", err)
	}
	defer rows.Close()
	dest := make([]driver.Value, 1)
	if err := rows.Next(dest); err != nil {
		if errors.Is(err, io.EOF) {
			err = errors.New("no parse tree")
		}
		return fmt.Errorf("query: parse: %w", err)
	}
	tree, ok := dest[0].(string)
	if !ok {
		return fmt.Errorf("query: parse tree of type %T", dest[0])
	}
	err = sqlguard.Check([]byte(tree), isTable)
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
