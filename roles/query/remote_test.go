//go:build duckdb_arrow

package query_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/local"
	"github.com/lakedata/lake/roles/meta"
	"github.com/lakedata/lake/roles/query"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// A remote stage (S3 in production) is read through the role's cache: the
// query role opens the stage itself from the descriptor, copies each data
// file once, and never reads the stage directory in place. Here the
// "remote" is a local store announced as S3.
func TestRemoteStageIsReadThroughTheCache(t *testing.T) {
	var cacheDir string
	l := newLakeTuned(t, func(stage *local.Store, m *meta.Config, q *query.Config) {
		m.Discover = &lakepb.StageDescriptor{Kind: "s3", RootUri: "s3://remote/lake", Bucket: "remote", Prefix: "lake"}
		q.OpenStage = func(_ context.Context, d *lakepb.StageDescriptor) (objects.Store, error) {
			if d.GetBucket() != "remote" {
				t.Errorf("OpenStage got %v", d)
			}
			return stage, nil
		}
		cacheDir = filepath.Join(t.TempDir(), "qcache")
		q.CacheDir = cacheDir
	})
	l.createTable("clips", wire.DefaultSchema())
	for _, n := range []string{"a", "b"} {
		l.putFile("clips", n+".mp4", []byte(n))
	}
	_, recs, err := l.sqlQuery("SELECT count(*) FROM clips")
	if err != nil {
		t.Fatal(err)
	}
	if rowCount(recs) != 1 {
		t.Fatalf("count returned %d rows", rowCount(recs))
	}
	var snap lakepb.Snapshot
	if err := actionSnapshot(l, "clips", &snap); err != nil {
		t.Fatal(err)
	}
	for _, f := range snap.Files {
		if _, err := os.Stat(filepath.Join(cacheDir, "data", filepath.FromSlash(f.Key))); err != nil {
			t.Errorf("data file %s is not in the cache: %v", f.Key, err)
		}
	}
}

func actionSnapshot(l *lakeFixture, table string, snap *lakepb.Snapshot) error {
	return flightrpc.Action(context.Background(), l.fc, wire.ActionSnapshot, &lakepb.SnapshotRequest{Name: table}, snap)
}
