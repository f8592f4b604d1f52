package meta

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

func (f *fixture) delete(req *lakepb.DeleteRequest) (*lakepb.DeleteResult, error) {
	var res lakepb.DeleteResult
	err := flightrpc.Action(context.Background(), f.fc, wire.ActionDelete, req, &res)
	return &res, err
}

// keysOf appends n one-row versions and returns their FILE keys.
func (f *fixture) keysOf(table string, n int) []string {
	f.t.Helper()
	var keys []string
	for i := range n {
		v := f.putObject(nameN(i), []byte("content of "+nameN(i)))
		rec := wiretest.FileRow(nameN(i), v)
		_, err := f.append(table, "", rec)
		rec.Release()
		if err != nil {
			f.t.Fatal(err)
		}
		keys = append(keys, v.Key)
	}
	return keys
}

// TestDeleteRemovesRowsAsOneVersion: a delete of two keys is one version
// without their rows, older versions still have them, a retry with the
// same commit id is a duplicate, and a rebuild from the stage agrees.
func TestDeleteRemovesRowsAsOneVersion(t *testing.T) {
	f := newFixture(t)
	f.createTable("clips")
	keys := f.keysOf("clips", 6)
	before := f.snapshot("clips", nil)
	req := &lakepb.DeleteRequest{Table: "clips", Keys: []string{keys[1], keys[4]}, CommitId: "del-1"}
	res, err := f.delete(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != before.Version+1 || res.Rows != 2 || res.Duplicate {
		t.Fatalf("delete: %v, want version %d with 2 rows", res, before.Version+1)
	}
	want := []string{nameN(0), nameN(2), nameN(3), nameN(5)}
	check := func(when string) {
		t.Helper()
		if got := f.readNames(f.snapshot("clips", nil)); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: rows %v, want %v", when, got, want)
		}
		if got := f.readNames(f.snapshot("clips", &before.Version)); len(got) != 6 {
			t.Errorf("%s: version %d has rows %v, want all 6", when, before.Version, got)
		}
		info, err := f.describe("clips", nil)
		if err != nil || info.Rows != 4 {
			t.Errorf("%s: described %v, %v; want 4 rows", when, info, err)
		}
	}
	check("after the delete")
	again, err := f.delete(req)
	if err != nil || !again.Duplicate || again.Version != res.Version || again.Rows != 2 {
		t.Errorf("retry: %v, %v; want the duplicate of version %d", again, err, res.Version)
	}
	f.rebuild()
	check("after a rebuild")
}

// TestBadDeletesChangeNothing: a key no row has, a wrong expected_version,
// no keys, a key outside objects/ and an unknown table are each refused
// with their code, and the table stays at its version.
func TestBadDeletesChangeNothing(t *testing.T) {
	f := newFixture(t)
	f.createTable("clips")
	keys := f.keysOf("clips", 3)
	head := f.snapshot("clips", nil).Version
	for name, c := range map[string]struct {
		req  *lakepb.DeleteRequest
		want error
	}{
		"missing key":      {&lakepb.DeleteRequest{Table: "clips", Keys: []string{keys[0], "objects/2026/12/01/nobody-has-this"}}, wire.ErrKeyNotFound},
		"wrong expected":   {&lakepb.DeleteRequest{Table: "clips", Keys: keys[:1], ExpectedVersion: ptr(head - 1)}, wire.ErrVersionConflict},
		"no keys":          {&lakepb.DeleteRequest{Table: "clips"}, wire.ErrInvalidRequest},
		"key outside":      {&lakepb.DeleteRequest{Table: "clips", Keys: []string{"_lake/catalog/clips.json"}}, wire.ErrInvalidKey},
		"unknown table":    {&lakepb.DeleteRequest{Table: "nope", Keys: keys[:1]}, wire.ErrTableNotFound},
		"negative version": {&lakepb.DeleteRequest{Table: "clips", Keys: keys[:1], ExpectedVersion: ptr[int64](-1)}, wire.ErrInvalidRequest},
	} {
		_, err := f.delete(c.req)
		if got := wire.FromStatus(err); !errors.Is(got, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	if v := f.snapshot("clips", nil).Version; v != head {
		t.Errorf("the table moved to version %d, want %d", v, head)
	}
	if n := len(f.readNames(f.snapshot("clips", nil))); n != 3 {
		t.Errorf("%d rows, want 3", n)
	}
	// The right expected version deletes.
	if res, err := f.delete(&lakepb.DeleteRequest{Table: "clips", Keys: keys[:1], ExpectedVersion: ptr(head)}); err != nil || res.Rows != 1 {
		t.Errorf("delete at the expected version: %v, %v", res, err)
	}
}

// TestDeletesRaceAppendsAndCompaction: deletes of rows committed earlier
// run while eight writers append and compactions run; every acknowledged
// append is there at the end, every deleted row is gone, each once.
func TestDeletesRaceAppendsAndCompaction(t *testing.T) {
	f := newFixture(t)
	f.createTable("clips")
	doomed := f.keysOf("clips", 20)
	seed := f.putObject("seed", []byte("one object for the writers"))
	var wg sync.WaitGroup
	const writers, each = 8, 30
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				rec := wiretest.FileRow(fmt.Sprintf("w%d-%02d", w, i), seed)
				_, err := f.append("clips", "", rec)
				rec.Release()
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 10 {
			// Against a stream of deletes a compaction may give up:
			// Aborted, try again, never a wrong table.
			if _, err := f.svc.Compact(context.Background(), "clips"); err != nil && !errors.Is(err, wire.ErrVersionConflict) {
				t.Error(err)
				return
			}
		}
	}()
	for _, k := range doomed {
		if _, err := f.delete(&lakepb.DeleteRequest{Table: "clips", Keys: []string{k}}); err != nil {
			t.Errorf("delete %s: %v", k, err)
		}
	}
	wg.Wait()
	names := f.readNames(f.snapshot("clips", nil))
	seen := map[string]int{}
	for _, n := range names {
		seen[n]++
	}
	if len(names) != writers*each || len(seen) != writers*each {
		t.Errorf("%d rows (%d distinct), want %d appended rows, each once", len(names), len(seen), writers*each)
	}
	for i := range 20 {
		if seen[nameN(i)] > 0 {
			t.Errorf("deleted row %s is still there", nameN(i))
		}
	}
}

// snapshotKey returns the FILE key of the first row of the table.
func (f *fixture) snapshotKey(table string) string {
	f.t.Helper()
	var key string
	for _, df := range f.snapshot(table, nil).Files {
		err := f.svc.readRows(context.Background(), f.svc.reg.lookup(table), df.Key, func(rec arrow.RecordBatch) error {
			values, valid, err := wire.FileValues(rec.Column(1))
			if err == nil && key == "" && len(values) > 0 && valid[0] {
				key = values[0].Key
			}
			return err
		})
		if err != nil {
			f.t.Fatal(err)
		}
	}
	if key == "" {
		f.t.Fatalf("%s has no row with a FILE key", table)
	}
	return key
}
