// Package local is the objects.Store backend for a stage kept in a local (or
// shared, POSIX) directory.
//
// A key maps to the file root/<key>. Writers build the object in a temp file
// under root/.lake-tmp/ — the same file system, so publishing is a rename(2)
// (Put) or link(2) (PutIfAbsent) — after fsyncing it, and fsync the
// directories on the key's path afterwards, so a published object survives a
// crash whole or not at all. link(2) fails with EEXIST when the key is taken,
// which is what makes PutIfAbsent a safe commit point (DESIGN §2).
//
// Those fsyncs are what durability needs and no more: the temp file, the
// directory that gains the entry, and, for each directory on the way to
// root that is new or not yet known, its parent. The Store remembers the
// directories it made durable (by identity, so one removed and made again
// counts as new), so a put into a directory in use costs two fsyncs, and
// one that creates a directory under a known one three.
//
// Open removes temp files older than a day that crashed writers left
// behind; it leaves younger ones alone because other processes may be
// writing them.
//
// Every path is resolved through an os.Root, so neither a key nor a symbolic
// link inside the stage can reach a file outside root. Keys are checked with
// wire.ValidateKey, and keys whose first segment is .lake-tmp are refused.
//
// Open, Stat and List go further: an object is a regular file reached
// through real directories. They follow no symbolic link at all — openat2
// with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS on Linux, else one
// O_NOFOLLOW|O_DIRECTORY openat per directory — because whoever can write
// to the stage could otherwise link objects/x to a catalog record and have
// it read or committed as a file. A link, named pipe, device or socket at a
// key, or a link on the way to it, is objects.ErrNotRegular; List neither
// reports nor enters one.
//
// Limitations that come from using a directory tree:
//   - A key cannot be both an object and a directory of other keys: once
//     "a/b" exists, Put("a") fails, and the other way round. The stage's own
//     key layouts never do this.
//   - Delete removes parent directories it leaves empty (never root), so
//     the day directories of minted keys (objects/<yyyy>/<mm>/<dd>/…), and
//     the per-object ones of keys minted before, do not leave a trail of
//     empty directories; writers retry when a concurrent Delete removes a
//     directory they just made.
//   - List gathers every match under the prefix's directory before yielding
//     the first one, because directory order is not key order.
//   - ETags are "<mtime ns>-<size>" in hex: cheap and stable while the object
//     is unchanged, but not a content hash.
package local
