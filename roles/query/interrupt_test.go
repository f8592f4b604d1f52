//go:build duckdb_arrow

package query

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/duckdb/duckdb-go/v2"
)

// TestInterruptHandleFound: the native handle is where interrupt.go looks
// for it, and interrupting through it stops a Prepare whose constant
// folding would otherwise run to the end (DuckDB folds repeat() of a
// constant while preparing).
func TestInterruptHandleFound(t *testing.T) {
	if connField == nil {
		t.Fatal("duckdb.Conn has no field conn of type mapping.Connection: Prepare cannot be interrupted")
	}
	eng, err := openEngine(context.Background(), engineConfig{allowedDirs: []string{t.TempDir()}, timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	st, err := eng.begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	if st.interrupt == nil {
		t.Fatal("no interrupt handle for an engine connection")
	}
	start := time.Now()
	err = st.conn.Raw(func(dc any) error {
		stop := interruptOnDone(st.ctx, st.interrupt)
		defer stop()
		_, err := checkReadOnly(dc.(*duckdb.Conn), "SELECT length(repeat('x', 400000000))")
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "nterrupt") {
		t.Fatalf("Prepare after %v: %v, want it interrupted", time.Since(start), err)
	}
	t.Logf("Prepare interrupted after %v", time.Since(start))
}
