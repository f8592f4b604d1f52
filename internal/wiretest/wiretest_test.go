package wiretest

import (
	"strings"
	"testing"

	"github.com/lakedata/lake/wire"
)

func TestFileRowsFollowTheDefaultSchema(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	vs := []wire.FileValue{{Key: "objects/a", Size: 1, SHA256: sum}, {Key: "objects/b", Size: 2, SHA256: sum}}
	rec := FileRows([]string{"a", "b"}, vs)
	defer rec.Release()
	if !rec.Schema().Equal(wire.DefaultSchema()) || rec.NumRows() != 2 {
		t.Fatalf("record %v with %d rows", rec.Schema(), rec.NumRows())
	}
	got, valid, err := wire.FileValues(rec.Column(1))
	if err != nil || len(got) != 2 || !valid[1] || got[1].Key != "objects/b" || got[1].Size != 2 {
		t.Fatalf("file values %+v %v %v", got, valid, err)
	}
}
