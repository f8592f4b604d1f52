package query

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"

	"github.com/duckdb/duckdb-go/v2"

	"github.com/lakedata/lake/roles/query/sqlguard"
)

// guard is the first wall: DuckDB parses q (json_serialize_sql parses
// only: nothing is bound, planned or run) and sqlguard walks the tree.
// isTable says which names are lake tables.
func guard(ctx context.Context, conn *duckdb.Conn, q string, isTable func(string) bool) error {
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
