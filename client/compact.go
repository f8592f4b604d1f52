package client

import (
	"context"
	"fmt"

	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// Compact merges a table's small data files into large ones now, as one
// new version with the same rows (lake.table.compact, admin scope). A
// table with nothing to merge keeps its version: the result then has
// FilesBefore equal to FilesAfter.
func (c *Client) Compact(ctx context.Context, table string) (*lakepb.CompactResult, error) {
	var res lakepb.CompactResult
	if err := c.action(ctx, wire.ActionCompact, &lakepb.CompactRequest{Table: table}, &res); err != nil {
		return nil, fmt.Errorf("client: compact %s: %w", table, err)
	}
	return &res, nil
}
