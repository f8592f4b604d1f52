//go:build duckdb_arrow

package query_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/local"
	"github.com/lakedata/lake/roles/meta"
	"github.com/lakedata/lake/roles/query"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// lakeFixture runs a metadata and a query service in-process on loopback.
type lakeFixture struct {
	t     testing.TB
	stage *local.Store
	meta  *meta.Service
	query *query.Service
	fc    flight.Client     // lake's own calls to the query endpoint
	sql   *flightsql.Client // a plain third-party Flight SQL client
}

func newLake(t testing.TB) *lakeFixture {
	t.Helper()
	return newLakeWith(t, nil)
}

// newLakeWith is newLake with the query service's Config adjusted by tune
// (nil leaves the defaults).
func newLakeWith(t testing.TB, tune func(*query.Config)) *lakeFixture {
	t.Helper()
	return newLakeTuned(t, func(_ *local.Store, _ *meta.Config, q *query.Config) {
		if tune != nil {
			tune(q)
		}
	})
}

// newLakeTuned lets a test adjust both roles' configs, knowing the stage.
func newLakeTuned(t testing.TB, tune func(*local.Store, *meta.Config, *query.Config)) *lakeFixture {
	t.Helper()
	root := t.TempDir()
	stage, err := local.Open(filepath.Join(root, "stage"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stage.Close() })
	mcfg := meta.DefaultConfig()
	mcfg.Listen, mcfg.DataDir = "127.0.0.1:0", filepath.Join(root, "meta")
	mcfg.Stage, mcfg.StageURI = stage, "file://"+stage.Dir()
	qcfg := query.DefaultConfig()
	qcfg.Listen, qcfg.CacheDir = "127.0.0.1:0", filepath.Join(root, "cache")
	tune(stage, &mcfg, &qcfg)
	m, err := meta.Open(context.Background(), mcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	qcfg.Meta = m.Addr().String()
	q, err := query.Open(context.Background(), qcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close(context.Background()) })
	fc, err := flightrpc.Dial(q.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fc.Close() })
	sc, err := flightsql.NewClient(q.Addr().String(), nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })
	return &lakeFixture{t: t, stage: stage, meta: m, query: q, fc: fc, sql: sc}
}

func (l *lakeFixture) createTable(name string, schema *arrow.Schema) {
	l.t.Helper()
	req := &lakepb.CreateTableRequest{Name: name, Schema: wire.EncodeSchema(schema)}
	if err := flightrpc.Action(context.Background(), l.fc, wire.ActionCreateTable, req, &lakepb.TableInfo{}); err != nil {
		l.t.Fatal(err)
	}
}

// putFile uploads content and appends its row through the query endpoint.
func (l *lakeFixture) putFile(table, name string, content []byte) (wire.FileValue, *lakepb.AppendResult) {
	l.t.Helper()
	ctx := context.Background()
	key := objects.NewObjectKey(name, time.Now())
	info, err := l.stage.Put(ctx, key, bytes.NewReader(content), objects.PutOptions{})
	if err != nil {
		l.t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	v := wire.FileValue{Key: key, Size: info.Size, SHA256: hex.EncodeToString(sum[:]), ContentType: "video/mp4", UploadedAt: time.Now().UTC().Truncate(time.Microsecond)}
	rec := wiretest.FileRow(name, v)
	defer rec.Release()
	res, err := flightrpc.Append(ctx, l.fc, &lakepb.Append{Table: table}, rec.Schema(), []arrow.RecordBatch{rec})
	if err != nil {
		l.t.Fatal(err)
	}
	return v, res
}

// sqlQuery runs q with the third-party client and returns all records.
func (l *lakeFixture) sqlQuery(q string) (*arrow.Schema, []arrow.RecordBatch, error) {
	info, err := l.sql.Execute(context.Background(), q)
	if err != nil {
		return nil, nil, err
	}
	return l.readEndpoints(info)
}

// readEndpoints fetches every endpoint of info into records released at
// the end of the test.
func (l *lakeFixture) readEndpoints(info *flight.FlightInfo) (*arrow.Schema, []arrow.RecordBatch, error) {
	var schema *arrow.Schema
	var recs []arrow.RecordBatch
	l.t.Cleanup(func() {
		for _, r := range recs {
			r.Release()
		}
	})
	for _, ep := range info.Endpoint {
		rdr, err := l.sql.DoGet(context.Background(), ep.Ticket)
		if err != nil {
			return nil, nil, err
		}
		schema = rdr.Schema()
		for rdr.Next() {
			rec := rdr.RecordBatch()
			rec.Retain()
			recs = append(recs, rec)
		}
		err = rdr.Err()
		rdr.Release()
		if err != nil {
			return nil, nil, err
		}
	}
	return schema, recs, nil
}

func rowCount(recs []arrow.RecordBatch) int64 {
	var n int64
	for _, r := range recs {
		n += r.NumRows()
	}
	return n
}
