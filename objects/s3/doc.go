// Package s3 is the objects.Store backend for a stage in an S3 bucket (AWS
// S3 or a compatible service such as versitygw), under an optional key
// prefix: key k is stored at <prefix>/<k>.
//
// Credentials come from the AWS default chain (environment, shared config
// and credentials files, SSO, web identity, container and instance roles);
// the region from Config or that chain. Nothing in this package puts
// credentials or presigned URLs into errors or logs.
//
// Uploads are streamed: Put reads up to PartSize bytes, and an object that
// fits is sent in one PutObject; a larger one becomes a multipart upload
// whose parts are sent Concurrency at a time, so a Put holds at most
// Concurrency × PartSize bytes of it in memory. Every request body carries
// its SHA-256 (x-amz-checksum-sha256, a signed header, which S3 verifies).
// A single request also signs its payload with that sum; a part is sent as
// UNSIGNED-PAYLOAD, which spares S3 a second hash of its bytes while the
// checksum still binds them to the signature. The lowercase hex SHA-256 of
// the whole object goes into the object's user metadata "sha256" whenever it
// is known before the upload starts: always for single-request objects and
// PutPath; not for a multipart Put from a stream, whose sum is known only
// at the end (Info.SHA256 still has it). A failed or cancelled multipart
// upload is aborted, so neither a partial object nor its parts remain —
// except a resumable one.
//
// A file no larger than PartSize, through PutPath or PutPathResumable, is
// one PutObject and nothing else: read once, hashed in memory, and sent
// with its SHA-256 as checksum and metadata. There is nothing to resume in
// one request, so it writes no checkpoint.
//
// The store is an objects.Resumer (DESIGN §7, resume.go): PutPathResumable
// of a larger file is a multipart upload whose checkpoint is saved before
// the first part and after each one, checked against S3 (ListParts) and
// the file (every finished part re-hashed) when resumed, and never aborted
// on failure, so the next call with the same session sends only the
// missing parts.
// Uploads lists a checkpoint directory's uploads to this stage, and Cancel
// aborts one for good (`lake uploads cancel`).
//
// Close closes the store's HTTP connections, which the SDK would keep
// idle for 90 s; the store is not used after it.
//
// PutIfAbsent is PutObject with If-None-Match: *; S3 answers 412 when the
// key exists, which becomes objects.ErrExists. The store does not offer
// objects.Preparer: preparing on S3 would take a multipart upload (create,
// part, complete), a longer critical path than two plain PUTs in a row.
//
// The multipart steps (create, upload part, list parts, complete, abort) are
// separate small methods; resumable uploads are built from them.
package s3
