// Package checkpoint owns the checkpoint file of a resumable S3 upload
// (DESIGN §7): its format, its validation, and the session that holds it
// locked while an upload runs. The S3 backend (objects/s3) is its user;
// so is a put of a file that uploads in one request, which records its
// object there before its append (KindSingle); `lake uploads ls` reads a
// directory of them with List.
//
// # File format
//
// A checkpoint is one JSON object, UTF-8, at most MaxSize bytes, written by
// Encode with two-space indentation. Every field is always present; Decode
// refuses unknown, misspelt (the match is exact, case included) and
// duplicate fields and anything after the object:
//
//	{
//	  "version": 2,                      // format version; a file of another version is left alone (ErrUnknownVersion)
//	  "kind": "multipart",               // "multipart", "single" or "granted" (below)
//	  "source": {                        // the file being uploaded, as it was when the upload started
//	    "path": "/home/ann/data/big.parquet", // absolute, clean, symbolic links resolved
//	    "size": 73400320,                // bytes, > 0
//	    "mod_time": "2026-03-01T10:00:00.123456789Z" // RFC 3339, UTC, nanoseconds
//	  },
//	  "binding": {                       // where it goes on S3
//	    "bucket": "lake-stage",
//	    "prefix": "prod",                // may be ""
//	    "key": "prod/objects/2026/03/0195…/big.parquet",
//	    "upload_id": "…"                 // the multipart upload's id
//	  },
//	  "part_size": 8388608,              // every part but the last has exactly this length
//	  "sha256": "…",                     // lowercase hex SHA-256 of the whole file, hashed before the upload started
//	  "content_type": "application/vnd.apache.parquet", // may be ""
//	  "parts": [                         // the finished parts, by ascending number
//	    {
//	      "number": 1,                   // 1..10000
//	      "length": 8388608,
//	      "etag": "\"…\"",               // as UploadPart returned it
//	      "checksum_sha256": "…",        // base64 SHA-256 as S3 returned it; may be "" when the endpoint returns none
//	      "sha256": "…"                  // lowercase hex SHA-256 of the part's bytes
//	    }
//	  ],
//	  "completed": false,                // CompleteMultipartUpload succeeded: the object at binding.key is final
//	  "etag": "",                        // the final object's ETag; set exactly when completed
//	  "commit_id": "",                   // the append's idempotency key, kept until the append is acknowledged; may be ""
//	  "table": "",                       // the table the file is appended to; may be ""
//	  "updated_at": "2026-03-01T10:00:05Z" // when Save wrote the file
//	}
//
// The comments above are documentation only; the file holds none. The part
// length is fixed by its number: min(part_size, size − (number−1)·part_size),
// and the source must fit in 10000 parts.
//
// A "single" checkpoint records an object that was uploaded in one request
// (the local stage; S3 for a file no larger than one part) and whose row
// is not acknowledged yet: the same fields, with "source" (size may be
// 0), "binding" holding only "key" (the object's key in the stage;
// "bucket", "prefix" and "upload_id" are ""), "part_size" 0, "parts" [],
// "completed" true, "etag" the object's ETag as the stage reported it
// (may be ""), and "sha256", "commit_id" and "table" all set.
//
// A "granted" checkpoint is an upload through an upload grant (DESIGN
// §12): the metadata leader started the multipart upload and signs the
// part URLs; the client PUTs parts and asks the leader to complete. Its
// fields are those of "multipart": "binding" is the grant's ("bucket"
// and "prefix" as lake.discover names them, "key" the granted key with
// the prefix, as multipart keys are, "upload_id" the grant's), and
// "part_size" the stage's. It differs in four ways: "sha256" is "" until
// the upload has read the whole file once (hashing overlaps the upload);
// a part's "etag" and "checksum_sha256" may be "" (a part the stage was
// found to hold when the upload resumed); the completed object's "etag"
// may be ""; and "source.size" may be 0 (one empty part). It never holds
// a part URL or its signed headers: those live in memory only, and a
// resumed upload asks for fresh ones.
//
// Version 1, the format before "kind", is read too: its files have no
// "kind" and are all multipart. Decode returns them as version 2 and the
// next Save writes them so; a release that reads only version 1 leaves a
// version 2 file alone (ErrUnknownVersion) rather than misread it.
//
// A checkpoint holds no secret: no credentials, tokens, signatures,
// presigned URLs or endpoint settings, and never any of the file's bytes —
// only hashes. Decode and Validate errors never quote a checkpoint file's
// text: they name the field, a byte offset, at most a number. CheckSource
// and CheckBinding show the old and new path, size, time, bucket, prefix
// or key, since that is what the user must see to act.
//
// # Files on disk
//
// The caller chooses the checkpoint's path; List considers only names ending
// in ".json". Next to a checkpoint "X.json" live, transiently:
//
//   - "X.json.lock": the lock file of a Session (flock(2), exclusive, holding
//     the holder's pid as text). It exists while a session is open and is
//     removed by Close; a crashed holder leaves it behind, unlocked, and the
//     next Open takes it over.
//   - "X.json.tmp-<digits>": Save's temp file, renamed over X.json once
//     written and fsynced. One left by a crash is removed by the next Open
//     of X.json, or by List once it is StaleTempAge old and unlocked.
//
// Files and directories are created mode 0600 and 0700.
//
// # Run checkpoints
//
// A bulk put (many files into one table, committed in batches) keeps one
// more kind of checkpoint in the same directory: a Run (run.go), named
// "<name>.run" so List never takes it for an upload. It has its own format
// version (RunVersion), a strict decoder (DecodeRun, as strict as Decode),
// and the same discipline through RunSession: the same exclusive lock,
// the same atomic saves, the same modes, no secrets (the stage is named by
// a hash of its root URI). It records each batch's commit id and rows
// before the batch's append is sent, and which batches were acknowledged.
package checkpoint
