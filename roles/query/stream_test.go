//go:build duckdb_arrow

package query

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/duckdb/duckdb-go/v2"
)

// TestResultStreams: DuckDB has not produced the whole result when the
// first batch arrives. An interrupt after the first batch must therefore
// stop the rest; a materialized result would still hand out every row.
func TestResultStreams(t *testing.T) {
	const total = 10_000_000
	eng, err := openEngine(context.Background(), engineConfig{allowedDirs: []string{t.TempDir()}, timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.close()
	st, err := eng.begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	var rows int64
	err = st.conn.Raw(func(dc any) error {
		rdr, err := arrowQuery(st.ctx, dc.(*duckdb.Conn), "SELECT * FROM range(10000000)")
		if err != nil {
			return err
		}
		defer rdr.Release()
		if !rdr.Next() {
			t.Fatalf("no first batch: %v", rdr.Err())
		}
		rows += rdr.RecordBatch().NumRows()
		st.interrupt()
		for rdr.Next() {
			rows += rdr.RecordBatch().NumRows()
		}
		return rdr.Err()
	})
	if err == nil || !strings.Contains(err.Error(), "nterrupt") {
		t.Fatalf("read %d of %d rows after an interrupt, err %v: the result was built before it was read", rows, total, err)
	}
	if rows >= total {
		t.Fatalf("read all %d rows", rows)
	}
	t.Logf("%d of %d rows had left DuckDB when the interrupt stopped it", rows, total)
}
