// Package server composes lake's roles into what `lake serve` runs: from
// the values of its flags (Config) it decides the token and TLS policy of
// every listener (internal/auth), refuses a listener that anyone could
// reach without a token, opens the managed stage, builds the coordinator
// of a clustered metadata node, and opens the metadata service, the query
// service or both (--role=all|meta|query) in the right order. Close stops
// them in reverse order and releases everything they hold: ports, the
// index and its lock, the stage handle, the coordinator.
//
// It lives apart from package main so that all of this runs, and is
// tested, without a process; main only binds flags into a Config, builds
// the log handler and turns signals into a context.
package server
