package client

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// CreateTable creates a table at version 0. A nil schema means
// wire.DefaultSchema(). With ifNotExists, an existing table of that name is
// returned (TableInfo.Created false) instead of wire.ErrTableExists.
func (c *Client) CreateTable(ctx context.Context, name string, schema *arrow.Schema, ifNotExists bool) (*lakepb.TableInfo, error) {
	if schema == nil {
		schema = wire.DefaultSchema()
	}
	if err := wire.ValidateSchema(schema); err != nil {
		return nil, fmt.Errorf("client: create %s: %w", name, err)
	}
	req := &lakepb.CreateTableRequest{Name: name, Schema: wire.EncodeSchema(schema), IfNotExists: ifNotExists}
	var info lakepb.TableInfo
	if err := c.action(ctx, wire.ActionCreateTable, req, &info); err != nil {
		return nil, fmt.Errorf("client: create %s: %w", name, err)
	}
	return &info, nil
}

// Tables lists every table, by name.
func (c *Client) Tables(ctx context.Context) ([]*lakepb.TableInfo, error) {
	var list lakepb.TableList
	if err := c.action(ctx, wire.ActionListTables, &lakepb.ListTablesRequest{}, &list); err != nil {
		return nil, fmt.Errorf("client: list tables: %w", err)
	}
	return list.GetTables(), nil
}

// Describe returns a table's schema (TableInfo.Schema, decode it with
// wire.DecodeSchema) and current version.
func (c *Client) Describe(ctx context.Context, name string) (*lakepb.TableInfo, error) {
	var info lakepb.TableInfo
	if err := c.action(ctx, wire.ActionDescribeTable, &lakepb.DescribeTableRequest{Name: name}, &info); err != nil {
		return nil, fmt.Errorf("client: describe %s: %w", name, err)
	}
	return &info, nil
}

// DescribeAtLeast is Describe for read-your-writes: the answer reflects
// at least minVersion (say, the version an append returned), even from a
// metadata follower that has not heard of it yet. A version that was never
// committed is wire.ErrVersionNotFound.
func (c *Client) DescribeAtLeast(ctx context.Context, name string, minVersion int64) (*lakepb.TableInfo, error) {
	var info lakepb.TableInfo
	req := &lakepb.DescribeTableRequest{Name: name, MinVersion: &minVersion}
	if err := c.action(ctx, wire.ActionDescribeTable, req, &info); err != nil {
		return nil, fmt.Errorf("client: describe %s at version %d or later: %w", name, minVersion, err)
	}
	return &info, nil
}

// History returns a table's versions, newest first; limit 0 means all.
func (c *Client) History(ctx context.Context, name string, limit int64) (*lakepb.History, error) {
	var h lakepb.History
	if err := c.action(ctx, wire.ActionHistory, &lakepb.HistoryRequest{Name: name, Limit: limit}, &h); err != nil {
		return nil, fmt.Errorf("client: history of %s: %w", name, err)
	}
	return &h, nil
}

// Snapshot returns the Parquet data files that make up a table at version,
// or at its latest version when version is nil.
func (c *Client) Snapshot(ctx context.Context, name string, version *int64) (*lakepb.Snapshot, error) {
	var snap lakepb.Snapshot
	if err := c.action(ctx, wire.ActionSnapshot, &lakepb.SnapshotRequest{Name: name, Version: version}, &snap); err != nil {
		return nil, fmt.Errorf("client: snapshot of %s: %w", name, err)
	}
	return &snap, nil
}

// schema fetches and decodes a table's schema.
func (c *Client) schema(ctx context.Context, table string) (*arrow.Schema, error) {
	info, err := c.Describe(ctx, table)
	if err != nil {
		return nil, err
	}
	s, err := wire.DecodeSchema(info.GetSchema())
	if err != nil {
		return nil, fmt.Errorf("client: schema of %s: %w", table, err)
	}
	return s, nil
}

// Status reports the metadata cluster: its leader, members and how far
// each member is behind the leader.
func (c *Client) Status(ctx context.Context) (*lakepb.ClusterStatus, error) {
	var st lakepb.ClusterStatus
	if err := c.action(ctx, wire.ActionStatus, &lakepb.StatusRequest{}, &st); err != nil {
		return nil, fmt.Errorf("client: status: %w", err)
	}
	return &st, nil
}
