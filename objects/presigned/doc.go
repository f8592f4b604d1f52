// Package presigned uploads a file through an upload grant (DESIGN §12):
// the metadata leader holds the stage's credentials, starts the multipart
// upload and signs one URL per part bound to the part's SHA-256; this
// package, holding only a lake token, PUTs each part's bytes to its URL
// and asks the leader to complete the upload. It is the client side of
// lake.upload.grant, lake.upload.renew and lake.upload.complete, reached
// through the small Actions interface, so it needs neither the client
// package nor a role.
//
// A file of one part is hashed first: its grant carries the whole sum and
// the part digest, so the leader can answer an object it already holds
// (dedup) before a byte is sent. The leader then grants it a single PUT
// (one URL, number 0, no upload id): the file goes in one PutObject and
// is completed with no upload id, with no checkpoint of its own. A larger file asks for a grant without
// a sum and uploads while it hashes: one reader reads the parts in order
// and feeds the whole file's SHA-256, workers hash and PUT their part;
// only when the leader says it holds an object of that size (hash_first)
// is the whole file hashed before the grant. At most Concurrency+1 parts
// are in memory.
//
// URLs live in memory only: they are never logged, never in an error
// (an HTTP failure names the part, the status and S3's error code) and
// never in a checkpoint. A URL close to its expiry is renewed before use,
// and a PUT refused because its URL expired is renewed once and retried.
//
// A path upload with a checkpoint.Session is resumable: a checkpoint of
// kind checkpoint.KindGranted records the grant's binding and every
// finished part, saved after each part. Resumed, it asks the leader which
// parts the stage holds, re-reads the file in order and sends only the
// parts whose bytes the stage does not hold; a completed one is completed
// again (idempotent) and answered.
package presigned
