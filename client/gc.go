package client

import (
	"context"
	"fmt"
	"time"

	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// GCOptions shape a garbage collection.
type GCOptions struct {
	// Grace keeps objects, data files and leftovers younger than this;
	// nil means the server's default (24 h). 0 is allowed.
	Grace *time.Duration
	// DryRun reports what would be freed and frees nothing.
	DryRun bool
}

// GC frees, on the metadata leader, what no retained version of any table
// references (lake.gc, admin scope): data files, objects older than the
// grace, and the leftovers of failed writes. An acknowledged row never
// points at what it frees.
func (c *Client) GC(ctx context.Context, o GCOptions) (*lakepb.GcResult, error) {
	req := &lakepb.GcRequest{DryRun: o.DryRun}
	if o.Grace != nil {
		us := o.Grace.Microseconds()
		req.GraceMicros = &us
	}
	var res lakepb.GcResult
	if err := c.action(ctx, wire.ActionGC, req, &res); err != nil {
		return nil, fmt.Errorf("client: gc: %w", err)
	}
	return &res, nil
}
