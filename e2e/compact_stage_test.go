package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/internal/s3test"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/layout"
	"github.com/lakedata/lake/objects/stageopen"
	"github.com/lakedata/lake/wire"
)

// compactStage is the stage a compaction test's meta role writes to: a
// local directory or a versitygw bucket. The tests run the same steps on
// each.
type compactStage struct {
	uri   string
	flags []string // --stage and what completes it, for lake serve
	s3    stageopen.S3Options
}

// compactStages are the stages every compaction test runs on, by subtest
// name; each makes its stage for the subtest t.
var compactStages = []struct {
	name string
	make func(t *testing.T) compactStage
}{
	{"local", localCompactStage},
	{"s3", s3CompactStage},
}

func localCompactStage(t *testing.T) compactStage {
	uri := "file://" + filepath.Join(t.TempDir(), "stage")
	return compactStage{uri: uri, flags: []string{"--stage", uri}}
}

// s3CompactStage starts a gateway of its own for t; its credentials reach
// the lake processes, and the test's own reads, through the AWS default
// chain.
func s3CompactStage(t *testing.T) compactStage {
	gw := s3test.Start(t)
	gw.SetEnv(t)
	uri := "s3://" + gw.NewBucket(t) + "/lake"
	return compactStage{uri: uri, flags: []string{"--stage", uri, "--s3-endpoint", gw.Endpoint},
		s3: stageopen.S3Options{Endpoint: gw.Endpoint, PathStyle: true}}
}

// open opens the stage as the test itself, to look at what meta wrote.
func (s compactStage) open(t *testing.T) objects.Store {
	t.Helper()
	d, err := stageopen.Describe(s.uri, s.s3)
	if err != nil {
		t.Fatal(err)
	}
	st, err := stageopen.Open(context.Background(), d, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// dataFiles lists the keys in a table's data directory of the stage.
func dataFiles(t *testing.T, st objects.Store, tableID string) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	for info, err := range st.List(context.Background(), layout.DataPrefix(tableID)) {
		if err != nil {
			t.Fatal(err)
		}
		keys[info.Key] = true
	}
	return keys
}

// appendRows has writers clients append each one-row records, all naming
// the object of seed, to table, one append at a time (the meta role
// groups what arrives together). Row names are distinct: w<writer>-<n>.
// A failed append fails t; appendRows returns when every writer is done.
func appendRows(t testing.TB, ctx context.Context, endpoint, table string, seed wire.FileValue, writers, each int) {
	t.Helper()
	var wg sync.WaitGroup
	for w := range writers {
		cl, err := client.Connect(ctx, endpoint)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				rec := wiretest.FileRow(fmt.Sprintf("w%d-%05d", w, i), seed)
				_, err := cl.Append(ctx, table, rec, client.AppendOptions{})
				rec.Release()
				if err != nil {
					t.Errorf("writer %d append %d: %v", w, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
