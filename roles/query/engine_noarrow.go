//go:build !duckdb_arrow

package query

import (
	"context"
	"errors"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/duckdb/duckdb-go/v2"
)

// ErrBuiltWithoutArrow: the binary lacks DuckDB's Arrow interface.
var ErrBuiltWithoutArrow = errors.New("this lake was built without -tags duckdb_arrow, which SQL queries need; rebuild with: go build -tags duckdb_arrow")

// errNoArrow makes Open fail at once rather than at the first query.
var errNoArrow = ErrBuiltWithoutArrow

func arrowQuery(context.Context, *duckdb.Conn, string) (array.RecordReader, error) {
	return nil, ErrBuiltWithoutArrow
}
