package meta

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"google.golang.org/protobuf/proto"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// Verification reads the objects that rows point to and compares them with
// what the rows claim. A commit only stats an object (DESIGN §3), so a
// FILE value's sha256 is whatever its client said until this code has read
// the bytes: lake.table.verify (a run driven by a client, below) and the
// background verifier (verify_background.go) share it.

const (
	// verifyChunk is how much is read, hashed and paced at a time.
	verifyChunk = 1 << 20
	// verifyCallBudget bounds the reading of one lake.table.verify call.
	// The query role relays each call with a 10 s deadline per attempt, so
	// a call must answer well within that; the cursor carries the rest of
	// the run to the next call.
	verifyCallBudget = 4 * time.Second
	// verifyMaxMismatches bounds the mismatch messages of one call, which
	// the relay holds in memory until the call ends.
	verifyMaxMismatches = 1000
)

// verifyClaim is one row's FILE value for an object.
type verifyClaim struct {
	column  string
	row     int64   // position among the rows read, from 1
	name    *string // the row's name column, if any
	version int64   // the version that added the row
	size    int64
	sha256  string
}

// verifyObject is one distinct object and every row that names it.
type verifyObject struct {
	key    string
	claims []verifyClaim
}

// fileAt is a data file and the version that added it.
type fileAt struct {
	key     string
	version int64
}

// verifyFiles returns the data files whose rows a run checks: those of
// version (all false), or those of every retained version up to it (all
// true: the oldest retained version's files and every file a later one
// added; a compaction's or delete's files repeat rows of older ones, which
// only adds claims to objects already listed). The version that added a
// file of the snapshot a run starts from is looked up in the index; one
// the index lacks (before the base of a node that started from a
// checkpoint) counts as added at the base.
func (s *Service) verifyFiles(ctx context.Context, t *table, version int64, all bool) ([]fileAt, error) {
	from := version
	if all {
		from = min(t.retained(), version)
	}
	snap, err := s.Snapshot(ctx, &lakepb.SnapshotRequest{Name: t.name, Version: &from})
	if err != nil {
		return nil, err
	}
	files := make([]fileAt, 0, len(snap.GetFiles()))
	pending := make(map[string]int, len(snap.GetFiles())) // key → index in files
	base := t.row().Base
	for _, f := range snap.GetFiles() {
		pending[f.GetKey()] = len(files)
		files = append(files, fileAt{f.GetKey(), max(base, min(from, 1))})
	}
	err = s.ix.records(t.id, 1, from, true, func(r *logRecord) bool {
		for _, f := range r.Files {
			if i, ok := pending[f.Key]; ok {
				files[i].version = r.Version
				delete(pending, f.Key)
			}
		}
		return len(pending) > 0
	})
	if err != nil {
		return nil, err
	}
	added, err := s.addedFiles(ctx, t, from+1, version)
	return append(files, added...), err
}

// addedFiles returns the data files that versions from..to of t added,
// in order.
func (s *Service) addedFiles(ctx context.Context, t *table, from, to int64) ([]fileAt, error) {
	var files []fileAt
	err := s.reg.records(ctx, t, from, to, false, func(r *logRecord) bool {
		for _, f := range r.Files {
			files = append(files, fileAt{f.Key, r.Version})
		}
		return true
	})
	return files, err
}

// objectsOf lists the distinct objects named by the rows of files, sorted
// by key, with their claims in row order. It walks the records itself, not
// through eachFileValue, since a claim names its row in the whole file
// and the row's name.
func (s *Service) objectsOf(ctx context.Context, t *table, files []fileAt) ([]verifyObject, error) {
	fileCols := t.fileCols
	nameCol := -1
	for i, f := range t.schema.Fields() {
		if f.Name == "name" && f.Type.ID() == arrow.STRING {
			nameCol = i
			break
		}
	}
	if len(fileCols) == 0 {
		return nil, nil
	}
	at := make(map[string]int) // key → index in objs
	var objs []verifyObject
	var row int64
	for _, f := range files {
		err := s.readRows(ctx, t, f.key, func(rec arrow.RecordBatch) error {
			var names *array.String
			if nameCol >= 0 {
				names, _ = rec.Column(nameCol).(*array.String)
			}
			for _, c := range fileCols {
				values, valid, err := wire.FileValues(rec.Column(c))
				if err != nil {
					return fmt.Errorf("column %q: %w", t.schema.Field(c).Name, err)
				}
				for j, v := range values {
					if !valid[j] {
						continue
					}
					claim := verifyClaim{column: t.schema.Field(c).Name, row: row + int64(j) + 1, version: f.version, size: v.Size, sha256: v.SHA256}
					if names != nil && names.IsValid(j) {
						n := names.Value(j)
						claim.name = &n
					}
					i, ok := at[v.Key]
					if !ok {
						i = len(objs)
						at[v.Key] = i
						objs = append(objs, verifyObject{key: v.Key})
					}
					objs[i].claims = append(objs[i].claims, claim)
				}
			}
			row += rec.NumRows()
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("meta: table %q: data file %s: %w", t.name, f.key, err)
		}
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].key < objs[j].key })
	return objs, nil
}

// readRows calls fn for the record batches of one data file of t.
// eachFileValue calls fn with every FILE value that a row of the data
// file at key holds, column by column of t's FILE columns within each
// record: rec is the record, row the value's row in it, col its column.
// An error of fn ends the walk and is returned.
func (s *Service) eachFileValue(ctx context.Context, t *table, key string, fn func(rec arrow.RecordBatch, row, col int, v wire.FileValue) error) error {
	if len(t.fileCols) == 0 {
		return nil
	}
	return s.readRows(ctx, t, key, func(rec arrow.RecordBatch) error {
		for _, c := range t.fileCols {
			values, valid, err := wire.FileValues(rec.Column(c))
			if err != nil {
				return fmt.Errorf("column %q: %w", t.schema.Field(c).Name, err)
			}
			for i, v := range values {
				if valid[i] {
					if err := fn(rec, i, c, v); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
}

func (s *Service) readRows(ctx context.Context, t *table, key string, fn func(arrow.RecordBatch) error) error {
	// Data files hold metadata rows only, so reading one whole is fine.
	raw, err := objects.ReadAll(ctx, s.store, key)
	if err != nil {
		return err
	}
	pf, err := file.NewParquetReader(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		return err
	}
	tbl, err := fr.ReadTable(ctx)
	if err != nil {
		return err
	}
	defer tbl.Release()
	if got, want := tbl.Schema().NumFields(), t.schema.NumFields(); got != want {
		return fmt.Errorf("%d columns, the table has %d", got, want)
	}
	// A table reader cuts every column at the same rows, which the
	// columns' own chunks need not do.
	tr := array.NewTableReader(tbl, 64<<10)
	defer tr.Release()
	for tr.Next() {
		if err := fn(tr.RecordBatch()); err != nil {
			return err
		}
	}
	return nil
}

// partialRead is an object read in part: bytes [0, offset) are hashed into
// state.
type partialRead struct {
	key    string
	offset int64
	state  []byte
}

// objectRead is what one look at an object found.
type objectRead struct {
	// problem is set when the object could not be read at all: missing,
	// not a regular file, or a stage error (detail).
	problem lakepb.VerifyProblem
	detail  string
	// size is the object's size: the bytes read when it was read whole,
	// else what Stat said.
	size int64
	// sha256 is the hash of its bytes when it was read whole.
	sha256 string
	// read is how many bytes this look read.
	read int64
	// partial is set when the read stopped before the end.
	partial *partialRead
}

// readLimits shape one look at an object. Every field may be nil.
type readLimits struct {
	// need says whether an object of this size is worth reading: when no
	// row claims its size, its size alone says what is wrong.
	need func(size int64) bool
	// stop is asked after each chunk, with the bytes read so far in this
	// look, whether to stop and leave a partialRead.
	stop func(read int64) bool
	// pace is told of each chunk read and may wait (the background
	// verifier's rate).
	pace func(ctx context.Context, n int) error
}

// readObject looks at the object at key, continuing from a partial read
// of it when from is set, and hashes it with buf. It returns an error only
// when ctx ends; a stage that cannot read the object is a problem in the
// result.
func (s *Service) readObject(ctx context.Context, key string, from *partialRead, buf []byte, lim readLimits) (objectRead, error) {
	var r objectRead
	h := sha256.New()
	var offset int64
	if from != nil && from.key == key {
		if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(from.state); err == nil {
			offset = from.offset
		} else {
			h.Reset()
		}
	}
	info, err := s.store.Stat(ctx, key)
	if err != nil {
		return s.unreadable(ctx, key, err)
	}
	r.size = info.Size
	if offset == 0 && lim.need != nil && !lim.need(info.Size) {
		return r, nil
	}
	if offset > info.Size {
		// Shorter than when the previous call read it: start over, and the
		// whole read tells what it is now.
		offset = 0
		h.Reset()
	}
	rc, err := s.store.Open(ctx, key, offset, -1)
	if err != nil {
		return s.unreadable(ctx, key, err)
	}
	defer rc.Close()
	n := offset
	for {
		m, err := rc.Read(buf)
		if m > 0 {
			h.Write(buf[:m])
			n += int64(m)
			r.read += int64(m)
			if lim.pace != nil {
				if perr := lim.pace(ctx, m); perr != nil {
					return r, perr
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return r, cerr
			}
			r.problem, r.detail = lakepb.VerifyProblem_VERIFY_PROBLEM_UNREADABLE, err.Error()
			return r, nil
		}
		if lim.stop != nil && lim.stop(r.read) {
			state, err := h.(encoding.BinaryMarshaler).MarshalBinary()
			if err != nil {
				return r, err
			}
			r.partial = &partialRead{key: key, offset: n, state: state}
			return r, nil
		}
	}
	r.size, r.sha256 = n, hex.EncodeToString(h.Sum(nil))
	return r, nil
}

// unreadable classifies a stage error on key.
func (s *Service) unreadable(ctx context.Context, key string, err error) (objectRead, error) {
	if cerr := ctx.Err(); cerr != nil {
		return objectRead{}, cerr
	}
	switch {
	case errors.Is(err, objects.ErrNotRegular), errors.Is(err, objects.ErrNotFound) && s.notRegular(key):
		return objectRead{problem: lakepb.VerifyProblem_VERIFY_PROBLEM_NOT_REGULAR_FILE}, nil
	case errors.Is(err, objects.ErrNotFound):
		return objectRead{problem: lakepb.VerifyProblem_VERIFY_PROBLEM_OBJECT_MISSING}, nil
	}
	return objectRead{problem: lakepb.VerifyProblem_VERIFY_PROBLEM_UNREADABLE, detail: err.Error()}, nil
}

// stageDir is the local stage's capability of naming its directory. The
// stage says ErrNotRegular for links, pipes and devices, but a directory at
// a key is a prefix to it, ErrNotFound as on S3; with the directory,
// verification can tell that from a missing object.
type stageDir interface{ Dir() string }

// notRegular reports whether the local stage holds something at key that
// it reported as not found (a directory).
func (s *Service) notRegular(key string) bool {
	d, ok := s.store.(stageDir)
	if !ok {
		return false
	}
	root, err := os.OpenRoot(d.Dir())
	if err != nil {
		return false
	}
	defer root.Close()
	_, err = root.Lstat(filepath.FromSlash(key))
	return err == nil
}

// problemFor says what r finds wrong with claim c (UNSPECIFIED: nothing).
func (r objectRead) problemFor(c verifyClaim) lakepb.VerifyProblem {
	switch {
	case r.problem != lakepb.VerifyProblem_VERIFY_PROBLEM_UNSPECIFIED:
		return r.problem
	case c.size != r.size:
		return lakepb.VerifyProblem_VERIFY_PROBLEM_SIZE_DIFFERS
	case r.sha256 != "" && c.sha256 != r.sha256:
		return lakepb.VerifyProblem_VERIFY_PROBLEM_SHA256_DIFFERS
	}
	return lakepb.VerifyProblem_VERIFY_PROBLEM_UNSPECIFIED
}

// needsRead reports whether some claim of o has this size, so that only
// the bytes can tell whether it holds.
func (o verifyObject) needsRead(size int64) bool {
	for _, c := range o.claims {
		if c.size == size {
			return true
		}
	}
	return false
}

func (o verifyObject) mismatch(c verifyClaim, r objectRead, p lakepb.VerifyProblem) *lakepb.VerifyMismatch {
	m := &lakepb.VerifyMismatch{
		Key: o.key, Problem: p, Column: c.column, Row: c.row, Name: c.name, AddedInVersion: c.version,
		ClaimedSize: c.size, ClaimedSha256: c.sha256, ActualSha256: r.sha256, Detail: r.detail,
	}
	if r.problem == lakepb.VerifyProblem_VERIFY_PROBLEM_UNSPECIFIED {
		m.ActualSize = r.size
	}
	return m
}

// verifyLimits bound one call of a verify run.
type verifyLimits struct {
	deadline      time.Time // stop reading after it
	maxBytes      int64     // stop once this many bytes are read (checked per chunk); 0: no bound
	maxMismatches int
}

func (l verifyLimits) spent(read int64) bool {
	return time.Now().After(l.deadline) || (l.maxBytes > 0 && read >= l.maxBytes)
}

// callLimits are the limits of a call that arrived with ctx: the budget,
// or half of what is left of the caller's deadline if that is less.
func callLimits(ctx context.Context) verifyLimits {
	budget := verifyCallBudget
	if dl, ok := ctx.Deadline(); ok {
		if half := time.Until(dl) / 2; half < budget {
			budget = half
		}
	}
	return verifyLimits{deadline: time.Now().Add(budget), maxMismatches: verifyMaxMismatches}
}

// Verify runs one call of a lake.table.verify run (see VerifyRequest):
// it resumes at the request's cursor, reads objects until the call's
// budget is spent, sends a mismatch for every row an object contradicts,
// then the progress with the next cursor. It only reads, so a follower
// answers it from its own index.
func (s *Service) Verify(ctx context.Context, req *lakepb.VerifyRequest, send func(*lakepb.VerifyResult) error) error {
	return s.verify(ctx, req, callLimits(ctx), send)
}

func (s *Service) verify(ctx context.Context, req *lakepb.VerifyRequest, lim verifyLimits, send func(*lakepb.VerifyResult) error) error {
	t, err := s.table(ctx, req.GetTable())
	if err != nil {
		return err
	}
	cur, err := decodeVerifyCursor(req.GetCursor())
	if err != nil {
		return err
	}
	switch {
	case cur == nil:
		cur = &lakepb.VerifyCursor{TableId: t.id, Version: t.row().Head, AllVersions: req.GetAllVersions()}
	case cur.GetTableId() != t.id:
		return fmt.Errorf("%w: the verify cursor belongs to another table than %q", wire.ErrInvalidRequest, t.name)
	case cur.GetAllVersions() != req.GetAllVersions():
		return fmt.Errorf("%w: the verify cursor belongs to a run with all_versions=%t", wire.ErrInvalidRequest, cur.GetAllVersions())
	default:
		// A node behind the run's version (another node answered the
		// previous call) catches up first.
		if err := s.reach(ctx, t, &cur.Version); err != nil {
			return err
		}
	}
	files, err := s.verifyFiles(ctx, t, cur.GetVersion(), cur.GetAllVersions())
	if err != nil {
		return err
	}
	objs, err := s.objectsOf(ctx, t, files)
	if err != nil {
		return err
	}
	prog := &lakepb.VerifyProgress{Version: cur.GetVersion(), Objects: int64(len(objs))}
	i := sort.Search(len(objs), func(i int) bool { return objs[i].key > cur.GetAfter() })
	for j, o := range objs {
		prog.Bytes += o.claims[0].size
		if j < i {
			prog.BytesDone += o.claims[0].size
		}
	}
	var from *partialRead
	if k := cur.GetPartialKey(); k != "" && i < len(objs) && objs[i].key == k {
		from = &partialRead{key: k, offset: cur.GetPartialOffset(), state: cur.GetPartialState()}
	}
	cur.PartialKey, cur.PartialOffset, cur.PartialState = "", 0, nil
	buf := make([]byte, verifyChunk)
	var partial *partialRead
	for started := false; i < len(objs); i++ {
		if started && (lim.spent(prog.BytesRead) || prog.Mismatches >= int64(lim.maxMismatches)) {
			break
		}
		started = true
		o := objs[i]
		readBefore := prog.BytesRead
		r, err := s.readObject(ctx, o.key, from, buf, readLimits{
			need: o.needsRead,
			stop: func(read int64) bool { return lim.spent(readBefore + read) },
		})
		from = nil
		if err != nil {
			return err
		}
		prog.BytesRead += r.read
		if r.partial != nil {
			partial = r.partial
			break
		}
		for _, c := range o.claims {
			if p := r.problemFor(c); p != lakepb.VerifyProblem_VERIFY_PROBLEM_UNSPECIFIED {
				if err := send(&lakepb.VerifyResult{Result: &lakepb.VerifyResult_Mismatch{Mismatch: o.mismatch(c, r, p)}}); err != nil {
					return err
				}
				prog.Mismatches++
			}
		}
		cur.After = o.key
		prog.BytesDone += o.claims[0].size
	}
	prog.ObjectsDone = int64(i)
	if partial != nil {
		cur.PartialKey, cur.PartialOffset, cur.PartialState = partial.key, partial.offset, partial.state
		prog.BytesDone += min(partial.offset, objs[i].claims[0].size)
	}
	if i < len(objs) {
		if prog.Next, err = proto.Marshal(cur); err != nil {
			return err
		}
	}
	return send(&lakepb.VerifyResult{Result: &lakepb.VerifyResult_Progress{Progress: prog}})
}

// decodeVerifyCursor decodes and checks VerifyRequest.cursor; nil when
// empty (the first call of a run). A cursor comes from the client, so
// nothing in it is trusted beyond what it can only affect: the report of
// its own run.
func decodeVerifyCursor(raw []byte) (*lakepb.VerifyCursor, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var c lakepb.VerifyCursor
	if err := proto.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("%w: verify cursor: %v", wire.ErrInvalidRequest, err)
	}
	bad := func(why string) (*lakepb.VerifyCursor, error) {
		return nil, fmt.Errorf("%w: verify cursor: %s", wire.ErrInvalidRequest, why)
	}
	switch {
	case c.GetTableId() == "":
		return bad("no table id")
	case c.GetVersion() < 0:
		return bad("negative version")
	case c.GetAfter() != "" && wire.ValidateObjectKey(c.GetAfter()) != nil:
		return bad("the last key is not an object key")
	case c.GetPartialKey() == "":
		if c.GetPartialOffset() != 0 || len(c.GetPartialState()) != 0 {
			return bad("a partial read without its key")
		}
		return &c, nil
	case wire.ValidateObjectKey(c.GetPartialKey()) != nil:
		return bad("the partial key is not an object key")
	case c.GetPartialKey() <= c.GetAfter():
		return bad("the partial key does not come after the last key")
	case c.GetPartialOffset() <= 0:
		return bad("a partial read of no bytes")
	}
	if err := sha256.New().(encoding.BinaryUnmarshaler).UnmarshalBinary(c.GetPartialState()); err != nil {
		return bad("the partial hash state does not decode")
	}
	return &c, nil
}
