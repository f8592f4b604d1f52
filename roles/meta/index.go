package meta

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// The bbolt index of the stage's catalog and logs. Nothing here is the
// truth: every byte can be rebuilt from the stage.
var (
	bucketMeta   = []byte("meta")   // "stage" → the stage URI this index describes
	bucketTables = []byte("tables") // name → tableRow (JSON)
	bucketLog    = []byte("log")    // table id → { be64(version) → raw log record }
	// table id → { commit id → be64(version) be64(committed at, unix µs)
	// be64(rows) }; an index of an earlier release holds the version only.
	bucketCommits = []byte("commits")
	// table id → the raw checkpoint of the table's base (checkpoint.go)
	bucketCheckpoints = []byte("checkpoints")
	keyStage          = []byte("stage")
)

// tableRow is a table's entry in the index.
type tableRow struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Schema    []byte    `json:"schema"`
	CreatedAt time.Time `json:"created_at"`
	Head      int64     `json:"head"` // latest version applied from the log
	// Base is the version of the checkpoint the index holds as the
	// table's state (0: none). Log records up to Base may be missing: a
	// node that learned the table from a checkpoint never read them.
	Base int64 `json:"base,omitempty"`
}

type index struct {
	db        *bolt.DB
	dirtyPath string // exists while the index may hold unsynced writes
}

// openIndex opens the bbolt index in dir.
//
// Commits to the index are not fsync'd: the stage log is the durable
// commit point and the index is rebuilt from it, so an fsync here would
// only slow every commit. A process crash loses nothing (the page cache
// survives it); only an OS crash can. To tell the two apart, a marker file
// holds the kernel boot id while the index is open. Finding the marker of
// another boot means the machine went down with unsynced index pages, so
// the index is dropped and rebuilt from the stage.
func openIndex(dir string, logger *slog.Logger) (*index, error) {
	path := filepath.Join(dir, "meta.db")
	dirtyPath := filepath.Join(dir, "meta.db.open")
	boot, bootErr := bootID()
	if prev, err := os.ReadFile(dirtyPath); err == nil && (bootErr != nil || string(prev) != boot) {
		logger.Warn("the machine restarted while the index was open; rebuilding it from the stage")
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("meta: drop stale index: %w", err)
		}
	}
	// A timeout, never 0: 0 waits forever on a file locked by another process.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("meta: open index %s: %w", path, err)
	}
	ix := &index{db: db}
	if bootErr == nil {
		if err := writeSynced(dirtyPath, []byte(boot)); err != nil {
			db.Close()
			return nil, fmt.Errorf("meta: index marker: %w", err)
		}
		ix.dirtyPath = dirtyPath
		db.NoSync = true
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketTables, bucketLog, bucketCommits, bucketCheckpoints, bucketVerified, bucketDedup, bucketDedupByObject} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		ix.close()
		return nil, fmt.Errorf("meta: init index %s: %w", path, err)
	}
	return ix, nil
}

// close syncs the index and removes the open marker: a clean index.
func (ix *index) close() error {
	err := ix.db.Sync()
	if err == nil && ix.dirtyPath != "" {
		err = os.Remove(ix.dirtyPath)
	}
	return errors.Join(err, ix.db.Close())
}

func bootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", errors.New("empty boot id")
	}
	return id, nil
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

func be64(v int64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(v))
	return b[:]
}

// stage returns the stage URI the index was built for ("" when new).
func (ix *index) stage() (string, error) {
	var s string
	err := ix.db.View(func(tx *bolt.Tx) error {
		s = string(tx.Bucket(bucketMeta).Get(keyStage))
		return nil
	})
	return s, err
}

// reset empties the index and binds it to stage.
func (ix *index) reset(stage string) error {
	return ix.db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketTables, bucketLog, bucketCommits, bucketCheckpoints, bucketVerified, bucketDedup, bucketDedupByObject} {
			if err := tx.DeleteBucket(b); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
				return err
			}
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(keyStage, []byte(stage))
	})
}

func (ix *index) tables() ([]tableRow, error) {
	var rows []tableRow
	err := ix.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketTables).ForEach(func(k, v []byte) error {
			var r tableRow
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("meta: corrupt index row for table %q: %w", k, err)
			}
			rows = append(rows, r)
			return nil
		})
	})
	return rows, err
}

// apply records log records of one table in one transaction and moves the
// table's head to the last of them. Re-applying a version is harmless.
func (ix *index) apply(row tableRow, raws [][]byte, recs []*logRecord) error {
	return ix.db.Update(func(tx *bolt.Tx) error {
		logB, err := tx.Bucket(bucketLog).CreateBucketIfNotExists([]byte(row.ID))
		if err != nil {
			return err
		}
		commitsB, err := tx.Bucket(bucketCommits).CreateBucketIfNotExists([]byte(row.ID))
		if err != nil {
			return err
		}
		for i, rec := range recs {
			if err := logB.Put(be64(rec.Version), raws[i]); err != nil {
				return err
			}
			for _, c := range rec.Commits {
				if c.ID == "" {
					continue
				}
				if err := commitsB.Put([]byte(c.ID), commitValue(rec.Version, rec.CommittedAt, c.Rows)); err != nil {
					return err
				}
			}
			row.Head = rec.Version
		}
		return putRow(tx, row)
	})
}

// setBase makes the checkpoint c (raw) the table's base: its commit marks
// join the commits, and the head moves to it if it was behind. Log
// records up to it need not be in the index.
func (ix *index) setBase(row tableRow, raw []byte, c *checkpointRecord) error {
	return ix.db.Update(func(tx *bolt.Tx) error {
		commitsB, err := tx.Bucket(bucketCommits).CreateBucketIfNotExists([]byte(row.ID))
		if err != nil {
			return err
		}
		// In key order: bbolt appends to the pages it just filled instead
		// of splitting pages all over the bucket (about 5× faster for the
		// 20,000 commit ids a checkpoint of a busy table carries:
		// BenchmarkCommitIDInsertOrder).
		marks := slices.Clone(c.Commits)
		slices.SortFunc(marks, func(a, b checkpointCommit) int { return strings.Compare(a.ID, b.ID) })
		for _, m := range marks {
			if err := commitsB.Put([]byte(m.ID), commitValue(m.Version, m.CommittedAt, m.Rows)); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bucketCheckpoints).Put([]byte(row.ID), raw); err != nil {
			return err
		}
		row.Base = c.Version
		row.Head = max(row.Head, c.Version)
		return putRow(tx, row)
	})
}

// base returns the table's base checkpoint, or nil when it has none.
func (ix *index) base(tableID string) (*checkpointRecord, error) {
	var raw []byte
	err := ix.db.View(func(tx *bolt.Tx) error {
		raw = bytes.Clone(tx.Bucket(bucketCheckpoints).Get([]byte(tableID)))
		return nil
	})
	if err != nil || raw == nil {
		return nil, err
	}
	return decodeCheckpoint(raw, tableID, -1)
}

func putRow(tx *bolt.Tx, row tableRow) error {
	b, err := json.Marshal(row)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketTables).Put([]byte(row.Name), b)
}

func commitValue(version int64, at time.Time, rows int64) []byte {
	return append(append(be64(version), be64(at.UnixMicro())...), be64(rows)...)
}

// committedVersion returns the version that committed commitID, if any,
// and the rows it brought (rowsKnown false: an index of an earlier
// release, which kept the version only).
func (ix *index) committedVersion(tableID, commitID string) (v, rows int64, rowsKnown, ok bool, err error) {
	err = ix.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCommits).Bucket([]byte(tableID))
		if b == nil {
			return nil
		}
		raw := b.Get([]byte(commitID))
		if len(raw) < 8 {
			return nil
		}
		v, ok = int64(binary.BigEndian.Uint64(raw)), true
		if len(raw) >= 24 {
			rows, rowsKnown = int64(binary.BigEndian.Uint64(raw[16:])), true
		}
		return nil
	})
	return v, rows, rowsKnown, ok, err
}

// records calls fn for each version in [from, to] in ascending order, or in
// descending order when desc is set; fn returns false to stop.
func (ix *index) records(tableID string, from, to int64, desc bool, fn func(*logRecord) bool) error {
	return ix.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLog).Bucket([]byte(tableID))
		if b == nil {
			return nil
		}
		c := b.Cursor()
		var k, v []byte
		step := c.Next
		if desc {
			k, v = c.Seek(be64(to))
			if k == nil || int64(binary.BigEndian.Uint64(k)) > to {
				k, v = c.Prev()
			}
			step = c.Prev
		} else {
			k, v = c.Seek(be64(from))
		}
		for ; k != nil; k, v = step() {
			ver := int64(binary.BigEndian.Uint64(k))
			if ver < from || ver > to {
				break
			}
			rec, err := decodeRecord(v, tableID, ver)
			if err != nil {
				return err
			}
			if !fn(rec) {
				break
			}
		}
		return nil
	})
}
