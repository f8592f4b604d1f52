// Package query is the query role (`lake serve --role=query`): a stateless
// Arrow Flight SQL endpoint for read-only SQL on DuckDB, plus a typed DoPut
// side channel that relays FILE appends to the metadata service frame by
// frame.
//
// Every lake table is a DuckDB view over the Parquet files of its current
// snapshot, refreshed from the metadata service before each statement runs,
// so a query sees every acknowledged append. Statements and prepared
// statement handles carry their SQL, so any query node can serve any
// ticket: the role keeps no per-client state.
//
// Read-only is enforced twice: only statements DuckDB types as SELECT run,
// and DuckDB itself is locked down (no external access beyond the stage's
// table data and the role's cache, no extensions, locked configuration).
package query
