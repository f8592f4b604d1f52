package wire

// Flight action types answered by the metadata service and relayed by the
// query service. Bodies are the lakepb messages named beside each.
const (
	ActionCreateTable   = "lake.table.create"   // CreateTableRequest → TableInfo
	ActionListTables    = "lake.table.list"     // ListTablesRequest → TableList
	ActionDescribeTable = "lake.table.describe" // DescribeTableRequest → TableInfo
	ActionHistory       = "lake.table.history"  // HistoryRequest → History
	ActionSnapshot      = "lake.table.snapshot" // SnapshotRequest → Snapshot
	ActionDiscover      = "lake.discover"       // DiscoverRequest → StageDescriptor
	ActionStatus        = "lake.status"         // StatusRequest → ClusterStatus
	ActionVerify        = "lake.table.verify"   // VerifyRequest → VerifyResult stream: mismatches, then progress
)
