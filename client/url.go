package client

import (
	"context"
	"time"

	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// URL returns a URL that reads the object at key without lake and
// without stage credentials (lake.table.url, read scope): on an S3 stage a
// presigned GET URL that works until the answer's expires_at, on a local
// stage the object's file:// URL. A key that no row of the table's current
// version has is wire.ErrRowNotFound. expires 0 takes the service's
// default (15 minutes); one above its --url-max-expiry is
// wire.ErrInvalidRequest.
//
// The URL is a secret while it works: whoever holds it reads the object.
// Do not log it.
func (c *Client) URL(ctx context.Context, table, key string, expires time.Duration) (*lakepb.ObjectUrl, error) {
	req := &lakepb.ObjectUrlRequest{Table: table, Key: key}
	if expires != 0 {
		us := expires.Microseconds()
		req.ExpiresMicros = &us
	}
	var res lakepb.ObjectUrl
	if err := c.action(ctx, wire.ActionURL, req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}
