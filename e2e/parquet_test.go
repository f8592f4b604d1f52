package e2e

import (
	"bytes"
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/wire/lakepb"
)

// readRows reads the name column of every data file of a snapshot from the
// stage and counts each name.
func readRows(t *testing.T, stage objects.Store, files []*lakepb.DataFile) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for _, df := range files {
		raw, err := objects.ReadAll(context.Background(), stage, df.Key)
		if err != nil {
			t.Fatalf("data file %s: %v", df.Key, err)
		}
		rdr, err := file.NewParquetReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("data file %s: %v", df.Key, err)
		}
		fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := fr.ReadTable(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, chunk := range tbl.Column(0).Data().Chunks() {
			s := chunk.(*array.String)
			for i := range s.Len() {
				counts[s.Value(i)]++
			}
		}
		tbl.Release()
		rdr.Close()
	}
	return counts
}
