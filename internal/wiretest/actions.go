package wiretest

import (
	"google.golang.org/protobuf/proto"

	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// ActionRequest returns a valid request of the action called name on a
// node that knows the table called table, which has a row with the FILE
// key key; a create makes the table called fresh, a delete removes that
// row. It is nil for an action it does not know, so the tests that walk
// wire.Actions fail until a new action gets its request here.
func ActionRequest(name, table, fresh, key string) proto.Message {
	switch name {
	case wire.ActionCreateTable:
		return &lakepb.CreateTableRequest{Name: fresh, Schema: wire.EncodeSchema(wire.DefaultSchema())}
	case wire.ActionListTables:
		return &lakepb.ListTablesRequest{}
	case wire.ActionDescribeTable:
		return &lakepb.DescribeTableRequest{Name: table}
	case wire.ActionHistory:
		return &lakepb.HistoryRequest{Name: table}
	case wire.ActionSnapshot:
		return &lakepb.SnapshotRequest{Name: table}
	case wire.ActionDiscover:
		return &lakepb.DiscoverRequest{}
	case wire.ActionStatus:
		return &lakepb.StatusRequest{}
	case wire.ActionVerify:
		return &lakepb.VerifyRequest{Table: table}
	case wire.ActionCompact:
		return &lakepb.CompactRequest{Table: table}
	case wire.ActionExpire:
		keep := int64(1_000_000)
		return &lakepb.ExpireRequest{Table: table, KeepLast: &keep}
	case wire.ActionGC:
		return &lakepb.GcRequest{DryRun: true}
	case wire.ActionURL:
		return &lakepb.ObjectUrlRequest{Table: table, Key: key}
	case wire.ActionUploadGrant:
		// The SHA-256 of "hello".
		return &lakepb.UploadGrantRequest{Table: table, FileName: "granted.bin", Size: 5,
			Sha256: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824", ContentType: "application/octet-stream"}
	case wire.ActionUploadRenew:
		// On a local stage, where these walks run, a grant is its key.
		return &lakepb.UploadRenewRequest{Table: table, Key: key}
	case wire.ActionUploadComplete:
		return &lakepb.UploadCompleteRequest{Table: table, Key: key}
	case wire.ActionUploadAbort:
		return &lakepb.UploadAbortRequest{Table: table, Key: key, UploadId: "no-such-upload"}
	case wire.ActionDelete:
		return &lakepb.DeleteRequest{Table: table, Keys: []string{key}}
	}
	return nil
}
