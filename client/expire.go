package client

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// ExpireOptions say which versions an expiry keeps: the newest KeepLast,
// or those that stopped being current less than OlderThan ago (and the
// one current then). Exactly one of them.
type ExpireOptions struct {
	KeepLast  int64
	OlderThan time.Duration
}

// Expire makes a table's older versions unreadable, as one new version
// (lake.table.expire, admin scope), so that garbage collection may free
// the files and objects only they use. An expiry that keeps everything
// kept already changes nothing.
func (c *Client) Expire(ctx context.Context, table string, o ExpireOptions) (*lakepb.ExpireResult, error) {
	req := &lakepb.ExpireRequest{Table: table, CommitId: uuid.NewString()}
	if o.KeepLast != 0 {
		req.KeepLast = &o.KeepLast
	} else {
		us := o.OlderThan.Microseconds()
		req.OlderThanMicros = &us
	}
	var res lakepb.ExpireResult
	err := c.retryAmbiguous(ctx, "expire "+table, req.CommitId, func() error {
		return flightrpc.Action(ctx, c.fc, wire.ActionExpire, req, &res)
	})
	if err != nil {
		return nil, err
	}
	return &res, nil
}
