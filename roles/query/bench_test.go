//go:build duckdb_arrow

package query_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/duckdb/duckdb-go/v2"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/objects/local"
	"github.com/lakedata/lake/roles/meta"
	"github.com/lakedata/lake/roles/query"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// appendRows appends n rows of the default schema in batches of batch
// rows, all pointing at one object, as one commit.
func appendRows(b testing.TB, l *lakeFixture, table string, n, batch int) {
	b.Helper()
	v, _ := l.putFile(table, "seed.bin", []byte("seed object"))
	var recs []arrow.RecordBatch
	now := arrow.Timestamp(time.Now().UnixMicro())
	for done := 0; done < n; done += batch {
		bld := array.NewRecordBuilder(memory.DefaultAllocator, wire.DefaultSchema())
		for i := done; i < min(done+batch, n); i++ {
			bld.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("clip-%08d.mp4", i))
			wire.AppendFileValue(bld.Field(1).(*array.StructBuilder), v)
			bld.Field(2).(*array.TimestampBuilder).Append(now + arrow.Timestamp(i))
		}
		recs = append(recs, bld.NewRecordBatch())
		bld.Release()
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	if _, err := flightrpc.Append(context.Background(), l.fc, &lakepb.Append{Table: table}, wire.DefaultSchema(), recs); err != nil {
		b.Fatal(err)
	}
}

// drainFlight runs q through the third-party Flight SQL client and counts
// the rows it streams.
func drainFlight(b testing.TB, l *lakeFixture, q string) int64 {
	ctx := context.Background()
	info, err := l.sql.Execute(ctx, q)
	if err != nil {
		b.Fatal(err)
	}
	var rows int64
	for _, ep := range info.Endpoint {
		rdr, err := l.sql.DoGet(ctx, ep.Ticket)
		if err != nil {
			b.Fatal(err)
		}
		for rdr.Next() {
			rows += rdr.RecordBatch().NumRows()
		}
		if err := rdr.Err(); err != nil {
			b.Fatal(err)
		}
		rdr.Release()
	}
	return rows
}

// drainEmbedded runs q in an embedded DuckDB through its Arrow interface.
func drainEmbedded(b testing.TB, db *sql.DB, q string) int64 {
	conn, err := db.Conn(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	var rows int64
	err = conn.Raw(func(dc any) error {
		ar, err := duckdb.NewArrowFromConn(dc.(*duckdb.Conn))
		if err != nil {
			return err
		}
		rdr, err := ar.QueryContext(context.Background(), q)
		if err != nil {
			return err
		}
		defer rdr.Release()
		for rdr.Next() {
			rows += rdr.RecordBatch().NumRows()
		}
		return rdr.Err()
	})
	if err != nil {
		b.Fatal(err)
	}
	return rows
}

// BenchmarkSelectStar streams SELECT * of a 1M-row table through Flight
// SQL and, in the same iteration, runs the same query on the same Parquet
// file in an embedded DuckDB; ratio = flight / embedded.
func BenchmarkSelectStar(b *testing.B) {
	const rows = 1_000_000
	l := newLake(b)
	l.createTable("big", wire.DefaultSchema())
	appendRows(b, l, "big", rows, 100_000)
	var s lakepb.Snapshot
	if err := flightrpc.Action(context.Background(), l.fc, wire.ActionSnapshot, &lakepb.SnapshotRequest{Name: "big"}, &s); err != nil {
		b.Fatal(err)
	}
	var files []string
	for _, f := range s.Files {
		files = append(files, "'"+filepath.Join(l.stage.Dir(), f.Key)+"'")
	}
	embeddedQ := fmt.Sprintf("SELECT * FROM read_parquet([%s])", strings.Join(files, ", "))
	db, err := sql.Open("duckdb", "")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var flightT, embeddedT time.Duration
	for b.Loop() {
		t0 := time.Now()
		if n := drainFlight(b, l, "SELECT * FROM big"); n < rows {
			b.Fatalf("flight returned %d rows", n)
		}
		t1 := time.Now()
		if n := drainEmbedded(b, db, embeddedQ); n < rows {
			b.Fatalf("embedded returned %d rows", n)
		}
		flightT += t1.Sub(t0)
		embeddedT += time.Since(t1)
	}
	b.ReportMetric(float64(flightT.Milliseconds())/float64(b.N), "flight-ms")
	b.ReportMetric(float64(embeddedT.Milliseconds())/float64(b.N), "embedded-ms")
	b.ReportMetric(float64(flightT)/float64(embeddedT), "ratio")
}

// BenchmarkSelectOne is the round trip of a trivial statement: GetFlightInfo
// (view refresh and read-only check) plus DoGet.
func BenchmarkSelectOne(b *testing.B) {
	benchSelectOne(b, func(int) string { return "SELECT 1" })
}

// BenchmarkSelectOneNewText is BenchmarkSelectOne with a text never seen
// before in every round (SELECT 1 AS c<n>): no cache helps the checks.
func BenchmarkSelectOneNewText(b *testing.B) {
	benchSelectOne(b, func(n int) string { return fmt.Sprintf("SELECT 1 AS c%d", n) })
}

func benchSelectOne(b *testing.B, text func(int) string) {
	l := newLake(b)
	l.createTable("clips", wire.DefaultSchema())
	l.putFile("clips", "a.mp4", []byte("a"))
	var lat []time.Duration
	for n := 0; b.Loop(); n++ {
		t0 := time.Now()
		if drainFlight(b, l, text(n)) != 1 {
			b.Fatal("SELECT 1 returned no row")
		}
		lat = append(lat, time.Since(t0))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkAggregateManyFiles runs a one-row aggregate over a table made
// of many one-row commits (one Parquet file each) and over the same rows
// in one file; ratio = many / one. It is what compaction will fix.
func BenchmarkAggregateManyFiles(b *testing.B) {
	const files = 1000
	// Without compaction: this measures what a table of many files costs.
	l := newLakeTuned(b, func(_ *local.Store, m *meta.Config, _ *query.Config) { m.CompactMinFiles = 0 })
	l.createTable("many", wire.DefaultSchema())
	l.createTable("one", wire.DefaultSchema())
	for i := range files {
		l.putFile("many", fmt.Sprintf("f%04d.mp4", i), []byte("x"))
	}
	appendRows(b, l, "one", files, files)
	const q = "SELECT count(*), sum(file.size) FROM %s"
	var manyT, oneT time.Duration
	for b.Loop() {
		t0 := time.Now()
		drainFlight(b, l, fmt.Sprintf(q, "many"))
		t1 := time.Now()
		drainFlight(b, l, fmt.Sprintf(q, "one"))
		manyT += t1.Sub(t0)
		oneT += time.Since(t1)
	}
	b.ReportMetric(float64(manyT.Microseconds())/1000/float64(b.N), "many-ms")
	b.ReportMetric(float64(oneT.Microseconds())/1000/float64(b.N), "one-ms")
	b.ReportMetric(float64(manyT)/float64(oneT), "ratio")
}
