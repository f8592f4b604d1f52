// Package client is lake's Go client. It needs one address, the query
// endpoint (a metadata service answers the same table actions and appends,
// everything but SQL): Connect asks it where the managed stage is
// (lake.discover) and opens the stage with the caller's own access.
//
// File bytes never pass through a lake server: PutFile and PutReader upload
// straight to the stage, then append one metadata row (a FILE value: key,
// size, SHA-256) through the endpoint, with a commit id that makes the
// client's own retries harmless. PutFiles does the same for many files
// at once: a bounded pool of uploads, rows committed in batches (one table
// version per batch), and a run checkpoint that makes a killed run, run
// again, commit each file exactly once. Open reads an object back from the stage
// and verifies its size and SHA-256; Verify has the metadata service check
// every object of a table against its rows. Query runs read-only SQL over
// Flight SQL. Errors the endpoint returns are a *StatusError holding the
// server's message and code, which unwraps to the wire sentinel that the
// status's reason names (errors.Is(err, wire.ErrTableNotFound)).
//
// The package never imports a role: it speaks only the wire contract.
package client
