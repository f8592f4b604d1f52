// Package failpoint kills the process at named points, so tests can crash
// a real lake process exactly where a real crash could happen (between
// "part uploaded" and "checkpoint saved", say), the way bbolt's failpoints
// do.
//
// Failpoints exist only in a binary built with the tag failpoints (the e2e
// tests build theirs with -tags duckdb_arrow,failpoints). Without it Hit
// is an empty function and the environment is never read, so nobody can
// kill or freeze a release binary by setting a variable.
//
// With the tag, LAKE_FAILPOINTS is a comma-separated list of name or
// name=N entries: the process dies with SIGKILL the N-th time (default the
// first time) it passes the point. An entry ending in ":stop"
// (name=N:stop) freezes the process with SIGSTOP instead, as a long GC
// pause or a stalled VM would; it runs on when the test sends SIGCONT.
package failpoint

// Env is the variable that arms failpoints in a binary built with the tag.
const Env = "LAKE_FAILPOINTS"
