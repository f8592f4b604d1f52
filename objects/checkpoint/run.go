package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lakedata/lake/wire"
)

// RunVersion is the format version EncodeRun writes and DecodeRun reads.
// It is separate from Version: the two formats change independently.
const RunVersion = 1

// RunMaxSize bounds a run checkpoint file: about 300,000 committed files
// with long paths, or a few tens of thousands of pending rows.
const RunMaxSize = 64 << 20

// runMaxDepth: object, batch list, batch, file list, file.
const runMaxDepth = 5

// RunSuffix ends every run checkpoint's name. It is not ".json", so List
// (and `lake uploads ls`) never mistakes a run for an upload.
const RunSuffix = ".run"

// ErrRunMismatch: the run checkpoint belongs to another stage or table.
var ErrRunMismatch = errors.New("the run checkpoint belongs to another run")

var runFieldNames = map[string]bool{
	"version": true, "stage_id": true, "table": true, "pending": true, "committed": true,
	"commit_id": true, "files": true, "path": true, "name": true, "size": true,
	"mod_time": true, "key": true, "sha256": true, "content_type": true, "etag": true,
	"uploaded_at": true, "table_version": true, "paths": true, "updated_at": true,
}

// Run is the state of one bulk put (many files into one table, committed
// in batches): which rows were sent under which commit id, and which of
// them the table acknowledged. A batch is recorded as pending, with every
// value of its rows, before its append is sent, and moved to Committed
// once the append is acknowledged; so a run that is killed and started
// again resends exactly the rows of its pending batches with the same
// commit ids, skips the files of committed ones, and commits each file
// once.
//
// The file holds no secret: the stage is named by a hash of its root URI,
// files by path, rows by their values and hashes, never by their bytes.
type Run struct {
	Version int `json:"version"`
	// StageID is the lowercase hex SHA-256 of the stage's root URI
	// (StageID), so a checkpoint is never resumed against another stage.
	StageID string `json:"stage_id"`
	// Table is the table the rows go to.
	Table string `json:"table"`
	// Pending are batches whose append may or may not have committed.
	Pending []RunBatch `json:"pending"`
	// Committed are batches the table acknowledged, by their files' paths
	// only: their rows are never sent again.
	Committed []CommittedBatch `json:"committed"`
	// UpdatedAt is when the run was last saved.
	UpdatedAt time.Time `json:"updated_at"`
}

// RunBatch is one append of the run: its commit id and its rows.
type RunBatch struct {
	CommitID string    `json:"commit_id"`
	Files    []RunFile `json:"files"`
}

// RunFile is one row of a batch: the file it was made from and the FILE
// value it carries, enough to build the same row again.
type RunFile struct {
	// Path is the file's canonical path (absolute, clean, symbolic links
	// resolved).
	Path string `json:"path"`
	// Name fills the row's name column.
	Name string `json:"name"`
	// Size and ModTime are the file's as uploaded.
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mod_time"`
	// Key, SHA256, ContentType, ETag and UploadedAt are the FILE value;
	// UploadedAt is the row's created_at too.
	Key         string    `json:"key"`
	SHA256      string    `json:"sha256"`
	ContentType string    `json:"content_type"`
	ETag        string    `json:"etag"`
	UploadedAt  time.Time `json:"uploaded_at"`
}

// CommittedBatch is a batch the table acknowledged.
type CommittedBatch struct {
	CommitID string `json:"commit_id"`
	// TableVersion is the version holding its rows.
	TableVersion int64    `json:"table_version"`
	Paths        []string `json:"paths"`
}

// StageID names a stage in a run checkpoint without writing down its
// root URI.
func StageID(rootURI string) string {
	h := sha256.Sum256([]byte(rootURI))
	return hex.EncodeToString(h[:])
}

// CheckOwner refuses a run checkpoint of another stage or table with
// ErrRunMismatch.
func (r *Run) CheckOwner(stageID, table string) error {
	switch {
	case r.StageID != stageID:
		return fmt.Errorf("%w: it is for another stage", ErrRunMismatch)
	case r.Table != table:
		return fmt.Errorf("%w: it is for table %q, not %q", ErrRunMismatch, r.Table, table)
	}
	return nil
}

// Validate checks the run's consistency: the version; a stage id of 64
// lowercase hex digits; a valid table name; every pending batch has a
// commit id (at most wire.MaxCommitIDLen bytes) and at least one file,
// every file a canonical path, a name, a size >= 0, a clean object key and
// a SHA-256; every committed batch a commit id, a version >= 1 and at
// least one path; no path and no commit id appears twice in the run; text
// without control characters; times within years 0..9999. Failures wrap
// ErrInvalid (or ErrUnknownVersion) and name the field, never its value.
func (r *Run) Validate() error {
	if r == nil {
		return invalid("nil run")
	}
	if r.Version <= 0 {
		return invalid("version %d", r.Version)
	}
	if r.Version != RunVersion {
		return fmt.Errorf("%w %d (this lake reads run version %d)", ErrUnknownVersion, r.Version, RunVersion)
	}
	if !isHexSHA256(r.StageID) {
		return invalid("stage_id is not 64 lowercase hex digits")
	}
	if wire.ValidateTableName(r.Table) != nil {
		return invalid("table is not a valid table name")
	}
	paths := make(map[string]bool)
	ids := make(map[string]bool)
	seen := func(field, p string) error {
		if err := checkCanonical(field, p); err != nil {
			return err
		}
		if paths[p] {
			return invalid("%s: a path appears twice in the run", field)
		}
		paths[p] = true
		return nil
	}
	commitID := func(field, id string) error {
		if err := checkText(field, id, wire.MaxCommitIDLen, true); err != nil {
			return err
		}
		if ids[id] {
			return invalid("%s: a commit id appears twice in the run", field)
		}
		ids[id] = true
		return nil
	}
	for i, b := range r.Pending {
		at := "pending[" + strconv.Itoa(i) + "]"
		if err := commitID(at+".commit_id", b.CommitID); err != nil {
			return err
		}
		if len(b.Files) == 0 {
			return invalid("%s.files is empty", at)
		}
		for j, f := range b.Files {
			if err := f.validate(at+".files["+strconv.Itoa(j)+"]", seen); err != nil {
				return err
			}
		}
	}
	for i, b := range r.Committed {
		at := "committed[" + strconv.Itoa(i) + "]"
		if err := commitID(at+".commit_id", b.CommitID); err != nil {
			return err
		}
		if b.TableVersion < 1 {
			return invalid("%s.table_version %d: an append commits version 1 or later", at, b.TableVersion)
		}
		if len(b.Paths) == 0 {
			return invalid("%s.paths is empty", at)
		}
		for j, p := range b.Paths {
			if err := seen(at+".paths["+strconv.Itoa(j)+"]", p); err != nil {
				return err
			}
		}
	}
	return checkTime("updated_at", r.UpdatedAt)
}

func (f *RunFile) validate(at string, seen func(field, p string) error) error {
	if err := seen(at+".path", f.Path); err != nil {
		return err
	}
	if err := checkText(at+".name", f.Name, maxTextLen, true); err != nil {
		return err
	}
	if f.Size < 0 {
		return invalid("%s.size %d is negative", at, f.Size)
	}
	if f.Key == "" || wire.ValidateKey(f.Key) != nil {
		return invalid("%s.key is not a clean object key", at)
	}
	if !isHexSHA256(f.SHA256) {
		return invalid("%s.sha256 is not 64 lowercase hex digits", at)
	}
	if err := checkText(at+".content_type", f.ContentType, maxTextLen, false); err != nil {
		return err
	}
	if err := checkText(at+".etag", f.ETag, maxETagLen, false); err != nil {
		return err
	}
	if f.UploadedAt.IsZero() {
		return invalid("%s.uploaded_at is not set", at)
	}
	if err := checkTime(at+".mod_time", f.ModTime); err != nil {
		return err
	}
	return checkTime(at+".uploaded_at", f.UploadedAt)
}

// checkCanonical checks an absolute, clean path without quoting it.
func checkCanonical(field, p string) error {
	switch {
	case p == "":
		return invalid("%s is empty", field)
	case len(p) > maxPathLen:
		return invalid("%s: %d bytes, at most %d", field, len(p), maxPathLen)
	case !utf8.ValidString(p):
		return invalid("%s is not valid UTF-8", field)
	case strings.IndexByte(p, 0) >= 0:
		return invalid("%s contains NUL", field)
	case !filepath.IsAbs(p):
		return invalid("%s is not absolute", field)
	case filepath.Clean(p) != p:
		return invalid("%s is not clean", field)
	}
	return nil
}

func isHexSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// EncodeRun validates r and renders it: compact JSON (a run may list
// thousands of files, and every save rewrites them all), times in UTC,
// ending in a newline. r is not modified.
func EncodeRun(r *Run) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	c := *r
	c.UpdatedAt = c.UpdatedAt.UTC()
	if c.Committed == nil {
		c.Committed = []CommittedBatch{}
	}
	c.Pending = make([]RunBatch, len(r.Pending))
	for i, b := range r.Pending {
		files := make([]RunFile, len(b.Files))
		for j, f := range b.Files {
			f.ModTime, f.UploadedAt = f.ModTime.UTC(), f.UploadedAt.UTC()
			files[j] = f
		}
		c.Pending[i] = RunBatch{CommitID: b.CommitID, Files: files}
	}
	return encodeLimited(&c, RunMaxSize, false)
}

// DecodeRun parses a run checkpoint as strictly as Decode parses an
// upload checkpoint: one JSON object in valid UTF-8 of at most RunMaxSize
// bytes; a version other than RunVersion → ErrUnknownVersion; unknown,
// misspelt or duplicate fields, wrong types, trailing data and any
// Validate failure → ErrCorrupt. Times come back in UTC, empty lists as
// nil. Errors give byte offsets and field names, never the text.
func DecodeRun(b []byte) (*Run, error) {
	_, _, err := scanStrict(b, RunMaxSize, runFieldNames, runMaxDepth, func(v int64) error {
		if v != RunVersion {
			return fmt.Errorf("%w %d (this lake reads run version %d)", ErrUnknownVersion, v, RunVersion)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var r Run
	if err := decodeStrict(b, &r); err != nil {
		return nil, err
	}
	r.UpdatedAt = r.UpdatedAt.UTC()
	if len(r.Pending) == 0 {
		r.Pending = nil
	}
	if len(r.Committed) == 0 {
		r.Committed = nil
	}
	for i := range r.Pending {
		for j := range r.Pending[i].Files {
			f := &r.Pending[i].Files[j]
			f.ModTime, f.UploadedAt = f.ModTime.UTC(), f.UploadedAt.UTC()
		}
		if len(r.Pending[i].Files) == 0 {
			r.Pending[i].Files = nil
		}
	}
	for i := range r.Committed {
		if len(r.Committed[i].Paths) == 0 {
			r.Committed[i].Paths = nil
		}
	}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return &r, nil
}

// RunSession is an open, exclusively locked run checkpoint, with the
// discipline of Session (the same lock, temp files and atomic saves):
// while it is open no other RunSession can open the same path, so two
// identical runs never run at once.
type RunSession struct {
	s *Session
}

// OpenRun locks the run checkpoint at path as Open locks an upload
// checkpoint. A run holding it → an error wrapping ErrInProgress.
func OpenRun(path string) (*RunSession, error) {
	s, err := Open(path)
	if errors.Is(err, ErrInProgress) {
		return nil, runBusy{path: filepath.Clean(path), pid: readPID(filepath.Clean(path) + lockSuffix)}
	}
	if err != nil {
		return nil, err
	}
	return &RunSession{s: s}, nil
}

// runBusy is ErrInProgress in the words of a run.
type runBusy struct {
	path string
	pid  int
}

func (e runBusy) Error() string {
	if e.pid > 0 {
		return fmt.Sprintf("run checkpoint %s: the same put is already running (pid %d)", e.path, e.pid)
	}
	return fmt.Sprintf("run checkpoint %s: the same put is already running", e.path)
}

func (e runBusy) Is(target error) bool { return target == ErrInProgress }

// Path is the run checkpoint's file.
func (r *RunSession) Path() string { return r.s.path }

// Load reads and decodes the run (DecodeRun). None yet → ErrNoCheckpoint.
func (r *RunSession) Load() (*Run, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if r.s.lock == nil {
		return nil, fmt.Errorf("run checkpoint %s: load: %w", r.s.path, errClosed)
	}
	b, err := readLimited(r.s.path, RunMaxSize)
	if err == nil {
		var run *Run
		if run, err = DecodeRun(b); err == nil {
			return run, nil
		}
	}
	if errors.Is(err, ErrNoCheckpoint) {
		return nil, err
	}
	return nil, fmt.Errorf("run checkpoint %s: %w", r.s.path, err)
}

// Save stamps run.UpdatedAt, validates it and replaces the checkpoint
// atomically (temp file, fsync, rename, fsync of the directory), as
// Session.Save does. An invalid run → ErrInvalid, nothing written.
func (r *RunSession) Save(run *Run) error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if r.s.lock == nil {
		return fmt.Errorf("run checkpoint %s: save: %w", r.s.path, errClosed)
	}
	if run != nil {
		run.UpdatedAt = time.Now().UTC()
	}
	b, err := EncodeRun(run)
	if err == nil {
		err = writeAtomic(r.s.path, b)
	}
	if err != nil {
		return fmt.Errorf("run checkpoint %s: save: %w", r.s.path, err)
	}
	return nil
}

// Remove deletes the run checkpoint (Session.Remove); the lock stays.
func (r *RunSession) Remove() error { return r.s.Remove() }

// Close releases the lock (Session.Close); the checkpoint stays.
func (r *RunSession) Close() error { return r.s.Close() }
