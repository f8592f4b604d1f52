// Package wire holds lake's protocol values: the FILE-append command
// descriptor (lake.file.Append) and its result, the FILE column type and its
// validator, stage key rules, table-name rules, the action table (Actions:
// each Flight action's name, bodies, token scope, whether it mutates and
// who answers it, which drives both roles' DoAction and ListActions), the
// bound on one append, and the sentinel errors with their one table of
// gRPC codes and google.rpc.ErrorInfo reasons: servers answer with
// ToStatus, Go callers get the sentinel back with FromStatus.
//
// The Append/AppendResult messages and the FILE struct are exact contracts
// (DESIGN §4): third-party clients are written against them. The generated
// protobuf code lives in wire/lakepb; regenerate it with `task proto`.
package wire
