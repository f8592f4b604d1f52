//go:build duckdb_arrow

package query

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/duckdb/duckdb-go/v2"
)

// arrowQuery runs q through DuckDB's Arrow interface, which duckdb-go
// compiles only with the duckdb_arrow build tag.
func arrowQuery(ctx context.Context, conn *duckdb.Conn, q string) (array.RecordReader, error) {
	ar, err := duckdb.NewArrowFromConn(conn)
	if err != nil {
		return nil, err
	}
	rdr, err := ar.QueryContext(ctx, q)
	if err != nil {
		return nil, sqlError(err)
	}
	return rdr, nil
}

// errNoArrow is nil: this build can answer SQL.
var errNoArrow error
