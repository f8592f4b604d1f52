// Package httpserve is the HTTP surface every lake role serves beside its
// Flight endpoint (DESIGN §13): /metrics in the Prometheus text format,
// /healthz (the process is up) and /readyz (the role can do its work), on
// one mux per role and one listener per process.
//
// A role owns its metrics on a registry of its own, never the global
// DefaultRegisterer, so that roles in one process (and tests running
// several) stay apart; the process-wide Go runtime and process collectors
// live on one registry of their own (Runtime), gathered beside the roles'.
//
// The endpoints take the bearer tokens and scopes of Flight (internal/auth):
// with tokens, /metrics and /readyz need at least a read token unless the
// operator opened them; /healthz is always open, since it tells nothing but
// that the process runs. A refused request gets 401 and no data. Tokens
// never reach a log line, an error or a metric label.
package httpserve
