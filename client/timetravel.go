package client

import (
	"context"
	"fmt"
	"time"

	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// SnapshotAt returns the Parquet data files of a table at the newest
// version committed at or before at (time travel, like SQL's
// AT (TIMESTAMP => …)). A time before the table's creation is
// wire.ErrVersionNotFound, one in the future wire.ErrTimestampInFuture.
func (c *Client) SnapshotAt(ctx context.Context, name string, at time.Time) (*lakepb.Snapshot, error) {
	micros := at.UnixMicro()
	var snap lakepb.Snapshot
	if err := c.action(ctx, wire.ActionSnapshot, &lakepb.SnapshotRequest{Name: name, AtUnixMicros: &micros}, &snap); err != nil {
		return nil, fmt.Errorf("client: snapshot of %s at %s: %w", name, at.UTC().Format(time.RFC3339Nano), err)
	}
	return &snap, nil
}

// FindFileAt is FindFile at a version of the table: the row must exist in
// that version (it may have been deleted since). A version never
// committed is wire.ErrVersionNotFound; a key no row of the version has,
// ErrFileNotFound.
func (c *Client) FindFileAt(ctx context.Context, table, key string, version int64) (wire.FileValue, error) {
	return c.findFile(ctx, table, key, &version)
}
