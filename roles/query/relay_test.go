//go:build duckdb_arrow

package query_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/internal/tcpproxy"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// The bytes of a file go to the stage; only its metadata row travels
// through the query endpoint, which relays it to meta without decoding it.
func TestFileAppendIsForwardedWithoutPayloadProxying(t *testing.T) {
	l := newLake(t)
	l.createTable("clips", wire.DefaultSchema())
	proxy := tcpproxy.Start(t, l.query.Addr().String())
	fc, err := flightrpc.Dial(proxy.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()

	const size = 8 << 20
	content := make([]byte, size)
	rand.Read(content)
	ctx := context.Background()
	key := objects.NewObjectKey("big.bin", time.Now())
	// Straight to the stage, as a client does.
	if _, err := l.stage.Put(ctx, key, bytes.NewReader(content), objects.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	v := wire.FileValue{Key: key, Size: size, SHA256: hex.EncodeToString(sum[:])}
	rec := wiretest.FileRow("big.bin", v)
	defer rec.Release()
	before := proxy.Sent()
	res, err := flightrpc.Append(ctx, fc, &lakepb.Append{Table: "clips", CommitId: "big-1"}, rec.Schema(), []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	sent := proxy.Sent() - before
	if res.Version != 1 || res.Rows != 1 {
		t.Fatalf("append result %v", res)
	}
	if sent > 64<<10 {
		t.Fatalf("%d bytes went through the query endpoint for a %d-byte file", sent, size)
	}
	// The relay kept meta's answer intact: a retry is a duplicate.
	again, err := flightrpc.Append(ctx, fc, &lakepb.Append{Table: "clips", CommitId: "big-1"}, rec.Schema(), []arrow.RecordBatch{rec})
	if err != nil || !again.Duplicate || again.Version != 1 {
		t.Fatalf("retry through the relay: %v %v", again, err)
	}
	_, recs, err := l.sqlQuery("SELECT file.sha256 AS sha FROM clips")
	if err != nil {
		t.Fatal(err)
	}
	if rowCount(recs) != 1 || recs[0].Column(0).(*array.String).Value(0) != v.SHA256 {
		t.Fatalf("row after relay: %v", recs)
	}
	t.Logf("%d bytes through the query endpoint for an append of a %d-byte file", sent, size)
}

// The relay passes meta's status codes back unchanged.
func TestRelayKeepsMetaErrors(t *testing.T) {
	l := newLake(t)
	l.createTable("clips", wire.DefaultSchema())
	ctx := context.Background()
	good, _ := l.putFile("clips", "ok.mp4", []byte("ok"))
	cases := []struct {
		name  string
		table string
		v     wire.FileValue
		code  codes.Code
	}{
		{"unknown table", "nope", good, codes.NotFound},
		{"key outside objects/", "clips", wire.FileValue{Key: "_lake/catalog/clips.json", Size: 1, SHA256: good.SHA256}, codes.InvalidArgument},
		{"missing object", "clips", wire.FileValue{Key: "objects/none/x", Size: 1, SHA256: good.SHA256}, codes.FailedPrecondition},
		{"wrong size", "clips", wire.FileValue{Key: good.Key, Size: good.Size + 1, SHA256: good.SHA256}, codes.FailedPrecondition},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := wiretest.FileRow("x", c.v)
			defer rec.Release()
			_, err := flightrpc.Append(ctx, l.fc, &lakepb.Append{Table: c.table}, rec.Schema(), []arrow.RecordBatch{rec})
			if status.Code(err) != c.code {
				t.Fatalf("got %v, want %s", err, c.code)
			}
		})
	}
	_, recs, err := l.sqlQuery("SELECT * FROM clips")
	if err != nil || rowCount(recs) != 1 {
		t.Fatalf("rows after refused appends: %d, %v", rowCount(recs), err)
	}
}
