package console

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// action calls a metadata action for the request's session, refused with
// wire.ErrPermissionDenied when its scope would be refused it on Flight.
// Errors come back with their sentinels (wire.FromStatus).
func (c *Console) action(ctx context.Context, s *session, name string, req, resp proto.Message) error {
	if !allowed(s, name) {
		return fmt.Errorf("%w: this session's token may not call %s", wire.ErrPermissionDenied, name)
	}
	return wire.FromStatus(c.cfg.Meta.Action(ctx, name, req, resp))
}

func (c *Console) tables(ctx context.Context, s *session) ([]*lakepb.TableInfo, error) {
	var list lakepb.TableList
	if err := c.action(ctx, s, wire.ActionListTables, &lakepb.ListTablesRequest{}, &list); err != nil {
		return nil, err
	}
	return list.GetTables(), nil
}

func (c *Console) describe(ctx context.Context, s *session, name string) (*lakepb.TableInfo, error) {
	var info lakepb.TableInfo
	if err := c.action(ctx, s, wire.ActionDescribeTable, &lakepb.DescribeTableRequest{Name: name}, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

func (c *Console) history(ctx context.Context, s *session, name string, limit int64) (*lakepb.History, error) {
	var h lakepb.History
	if err := c.action(ctx, s, wire.ActionHistory, &lakepb.HistoryRequest{Name: name, Limit: limit}, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// objectURL asks meta for a URL of key, which it answers only when a row
// of table (at version, when set) names key: the check that keeps the
// console from serving any other object.
func (c *Console) objectURL(ctx context.Context, s *session, table, key string, version *int64) (*lakepb.ObjectUrl, error) {
	return c.objectURLAs(ctx, s, &lakepb.ObjectUrlRequest{Table: table, Key: key, Version: version})
}

// objectURLAs is objectURL for a request of the caller's making (a
// download name, say).
func (c *Console) objectURLAs(ctx context.Context, s *session, req *lakepb.ObjectUrlRequest) (*lakepb.ObjectUrl, error) {
	var u lakepb.ObjectUrl
	if err := c.action(ctx, s, wire.ActionURL, req, &u); err != nil {
		return nil, err
	}
	return &u, nil
}
