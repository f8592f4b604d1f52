// Package sqlguard decides whether a caller's SQL statement may run on the
// query role's engine, from DuckDB's own parse tree of it
// (json_serialize_sql), before anything is bound, planned or run.
//
// It is an allow-list, never a deny-list: a statement passes only if it is
// a single SELECT whose every node is of a known kind, every function it
// calls is on a list of functions known to touch neither files, settings,
// logging, profiling, checkpoints nor any state that outlives the
// statement, and every table it names is a lake table (a view the role
// defines), a CTE in scope, or one of a few information_schema views. A
// function or construct that a newer DuckDB adds is refused until someone
// has looked at it and put it on the list.
//
// Time travel (FROM t AT (VERSION => n), AT (TIMESTAMP => ts)) is allowed
// only on a lake table and only with a constant: Analyze returns the AT
// clauses, Rewrite replaces each reference by a view the caller names
// (DuckDB refuses AT on a view), and CheckRewritten checks the statement
// that comes back, letting it read those views and nothing more.
//
// The package only reads and rewrites the JSON tree; the caller runs
// DuckDB.
package sqlguard
