//go:build duckdb_arrow

package query_test

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lakedata/lake/wire"
)

func TestSelectSeesEveryAcknowledgedAppend(t *testing.T) {
	l := newLake(t)
	l.createTable("clips", wire.DefaultSchema())
	schema, recs, err := l.sqlQuery("SELECT * FROM clips")
	if err != nil {
		t.Fatal(err)
	}
	if rowCount(recs) != 0 {
		t.Fatalf("empty table returned %d rows", rowCount(recs))
	}
	if schema.NumFields() != 3 || schema.Field(0).Name != "name" {
		t.Fatalf("empty table schema %v", schema)
	}
	var want []wire.FileValue
	for i, name := range []string{"a.mp4", "b.mp4", "c.mp4"} {
		v, res := l.putFile("clips", name, []byte("bytes of "+name))
		want = append(want, v)
		_, recs, err := l.sqlQuery("SELECT name, file FROM clips ORDER BY name")
		if err != nil {
			t.Fatal(err)
		}
		if rowCount(recs) != int64(i+1) {
			t.Fatalf("after append %d (version %d): %d rows", i+1, res.Version, rowCount(recs))
		}
	}
	schema, recs, err = l.sqlQuery("SELECT name, file FROM clips ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("schema: %v", schema)
	f := schema.Field(1)
	if !wire.IsFileField(f) || !arrow.TypeEqual(f.Type, wire.FileType()) {
		t.Fatalf("file column is %v, want the FILE struct with lake.type=file", f)
	}
	var got []wire.FileValue
	for _, r := range recs {
		vals, _, err := wire.FileValues(r.Column(1))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, vals...)
		_ = r.Column(0).(*array.String)
	}
	for i := range want {
		if got[i].Key != want[i].Key || got[i].SHA256 != want[i].SHA256 || got[i].Size != want[i].Size ||
			got[i].ContentType != want[i].ContentType || !got[i].UploadedAt.Equal(want[i].UploadedAt) {
			t.Errorf("row %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}
