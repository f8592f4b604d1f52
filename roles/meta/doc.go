// Package meta is the metadata service (`lake serve --role=meta`): it owns
// table schemas, FILE appends and the version compare-and-swap.
//
// The truth lives in the stage (DESIGN §2): the catalog entry
// _lake/catalog/<name>.json and the per-table commit log
// _lake/tables/<id>/log/<version>.json are written put-if-absent, and row data
// goes to _lake/tables/<id>/data/<uuid>.parquet. The bbolt file in the data
// dir is only an index of that log: delete it and the next start rebuilds
// the same tables, versions and snapshots from the stage.
//
// A commit (DESIGN §3) validates every row, writes one Parquet data file,
// puts the next log record if absent, applies it to bbolt and only then
// acknowledges. Appends to a table that arrive while a commit is in flight
// are grouped into the next one (group commit).
//
// The Service is made of parts, each in its own file:
//
//   - the coordinator (package cluster) decides who leads; it exists from
//     Open on, a lone node's as much as an etcd member's (leadership.go
//     reacts to its elections and announcements);
//   - the registry (registry.go) holds the tables: it loads them at start,
//     finds them by name, adds those the stage catalog has and the node
//     lacks, and is the one place a table catches up from the stage log;
//   - each table's committer (committer.go) commits every change to it: group
//     commit, commit_id and expected_version, the put-if-absent of the next
//     log record, catch-up and retry after a lost race. A kind of commit
//     builds the next record from the head: appends (append.go) and
//     compactions (compact.go, merged beside the committer, swapped in as
//     one version), and deletes and expiry are to be more;
//   - the forwarder (forwarder.go) is a follower's one path to the leader
//     for every mutation, Flight's and the Go API's alike, with the guard
//     that keeps two nodes from bouncing a forwarded call;
//   - flight.go is the Flight face: DoPut and the action table's handlers.
//
// A commit only stats a FILE value's object, so its sha256 is the client's
// claim. Verification reads the bytes: lake.table.verify runs for a client
// in short resumable calls (verify.go), and the leader's background
// verifier reads every object at a bounded rate and records what it read
// in the index (verify_background.go, index.Verified).
package meta
