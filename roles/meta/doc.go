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
// A commit only stats a FILE value's object, so its sha256 is the client's
// claim. Verification reads the bytes: lake.table.verify runs for a client
// in short resumable calls (verify.go), and the leader's background
// verifier reads every object at a bounded rate and records what it read
// in the index (verify_background.go, index.Verified).
package meta
