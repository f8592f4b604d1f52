package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/google/uuid"

	"github.com/lakedata/lake/internal/failpoint"
	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/checkpoint"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// PutOptions shape the row a put appends.
type PutOptions struct {
	// Name fills a utf8 "name" column and ends the object key; default the
	// file's base name (required for PutReader).
	Name string
	// Set fills other columns, parsed as the column's type: utf8, intN,
	// uintN, floatN, bool, timestamp (RFC 3339 or unix microseconds) and
	// date32 (YYYY-MM-DD). A bad entry fails before anything is uploaded.
	Set map[string]string
	// ContentType defaults to the type registered for Name's extension.
	ContentType string
	// CommitID makes the append idempotent; default a fresh random UUID,
	// so the client's own retries can never commit the row twice. A
	// PutFile resuming an upload uses the commit id its checkpoint holds.
	CommitID string
	// Progress, when set, is told how far the upload got (see
	// objects.PutOptions.Progress).
	Progress func(objects.Progress)
	// NoDedup uploads the file even when the stage holds its content
	// already (upload grants answer no existing object).
	NoDedup bool
}

// PutResult is what a put committed.
type PutResult struct {
	Table     string
	File      wire.FileValue
	Version   int64 // the table version holding the row
	Duplicate bool  // the commit id had already committed
	// Deduplicated: the stage held the file's content already (upload
	// grants, DESIGN §12); the row names that object and nothing was
	// uploaded.
	Deduplicated bool
	// BytesSent is how many of the file's bytes this put sent to the
	// stage (a resumed or deduplicated put sends less than the file).
	BytesSent int64
}

// AppendOptions control one append.
type AppendOptions struct {
	// CommitID makes the append idempotent; default a fresh random UUID.
	CommitID string
	// ExpectedVersion commits only if the table is at this version
	// (wire.ErrVersionConflict otherwise).
	ExpectedVersion *int64
}

// Appends that fail ambiguously are resent with a growing pause for up to
// appendRetryFor, which outlasts a metadata failover (the leader's lease
// TTL, 5 s by default, plus the election); the commit id makes a resend
// harmless.
const (
	appendRetryFor   = 20 * time.Second
	appendBackoff    = 100 * time.Millisecond
	appendMaxBackoff = 500 * time.Millisecond // a new leader is used within half a second
)

// Failpoints of PutFile (internal/failpoint): LAKE_FAILPOINTS naming one
// kills the process there.
const (
	// FailBeforeAppend: the object is uploaded and the checkpoint holds its
	// commit id; the append is not sent yet.
	FailBeforeAppend = "client-before-append"
	// FailAfterAppend: the append is acknowledged; the checkpoint is not
	// removed yet.
	FailAfterAppend = "client-after-append"
)

// ErrObjectChanged: the object an interrupted put recorded is at its key
// no more as it was (another size or ETag), so the put cannot append it.
var ErrObjectChanged = errors.New("the object the interrupted put uploaded changed at its key")

// PutFile uploads the file at path straight to the stage, then appends one
// row for it to table through the endpoint.
//
// The put is resumable and commits exactly once (DESIGN §7). It holds the
// checkpoint of this file, table and stage (under the checkpoint
// directory) locked from start to end, so a second put of the same file
// into the same table fails with checkpoint.ErrInProgress while one runs.
// Before the append is sent, the checkpoint holds the object's key and the
// append's commit id: the S3 stage's checkpoint of a multipart upload gets
// them added, and where the stage wrote none (the local stage; S3 for a
// file of at most one part, uploaded in one request) PutFile saves one of
// kind checkpoint.KindSingle naming the object (key, size, SHA-256, ETag)
// — one fsync'd write per put. A put that failed or crashed is resumed by
// the same call: it reuses the checkpoint's object key, content type and
// commit id, uploads only what is missing (S3 parts) or nothing at all (a
// KindSingle object still at its key with its size), and appends with the
// same commit id, so the row commits once; a resent append that had
// committed reports Duplicate. The checkpoint is removed once the append
// is acknowledged. A file changed since the interrupted put (path, size,
// mtime) fails with checkpoint.ErrSourceChanged and a recorded object
// found changed with ErrObjectChanged, uploading nothing: `lake uploads
// cancel` forgets that put. A recorded object that is gone (collected as
// an orphan) is uploaded again under the same key, still with the same
// commit id.
//
// On an S3 stage in upload mode "presigned" the bytes go through upload
// grants (objects/presigned), with no stage credentials: the checkpoint
// is then of kind checkpoint.KindGranted, and a deduplicated answer is
// recorded as a KindSingle record of the object the stage answered. On
// the local stage a file of at least a MiB is offered for dedup the same
// way. Either way the row is the FILE value the service answered, and an
// append refused because that object is gone puts the file once more
// with no dedup.
//
// With no checkpoint directory there is no checkpoint: the commit id lives
// only in memory, and a crash between the upload and the append's
// acknowledgement makes the next call upload again under a new key — an
// orphan object, or a second row if the lost append had committed.
func (c *Client) PutFile(ctx context.Context, table, path string, o PutOptions) (*PutResult, error) {
	abs, src, err := sourceOf(path)
	if err != nil {
		return nil, fmt.Errorf("client: put %s: %w", path, err)
	}
	if o.Name == "" {
		o.Name = filepath.Base(path) // as given: a symbolic link's own name
	}
	asked := o.CommitID
	plan, err := c.prepare(ctx, table, &o)
	if err != nil {
		return nil, err
	}
	var sess *checkpoint.Session
	if cpPath := c.checkpointPath(abs, table); cpPath != "" {
		sess, err = checkpoint.Open(cpPath)
		if err != nil {
			return nil, fmt.Errorf("client: put %s into %s: %w", path, table, err)
		}
		defer func() {
			if err := sess.Close(); err != nil {
				c.log.Warn("cannot unlock the upload checkpoint", "err", err)
			}
		}()
	}
	key := objects.NewObjectKey(o.Name, time.Now())
	var single *checkpoint.Checkpoint // the record of an object uploaded in one request
	granted := c.uploadMode() == modePresigned
	if sess != nil {
		cp, err := sess.Load()
		switch {
		case errors.Is(err, checkpoint.ErrNoCheckpoint):
		case err != nil:
			return nil, fmt.Errorf("client: put %s: %w", path, err)
		default:
			if key, err = resumeFrom(cp, table, asked, &o); err != nil {
				return nil, fmt.Errorf("client: put %s: %w", path, err)
			}
			if cp.Kind == checkpoint.KindSingle {
				single = cp
			}
			granted = granted || cp.Kind == checkpoint.KindGranted
		}
	}
	putOpts := objects.PutOptions{ContentType: o.ContentType, Progress: o.Progress}
	switch {
	case granted:
		return c.putGranted(ctx, table, path, src, plan, sess, single, o, func(noDedup bool) (grantedUpload, error) {
			opts := c.grantOptions(table, o.Name, o.ContentType, o.CommitID, o.Progress)
			opts.NoDedup = noDedup || o.NoDedup
			res, err := c.uploader().PutFile(ctx, abs, sess, opts)
			return grantedUpload{file: res.File, dedup: res.Deduplicated, sent: res.BytesSent}, err
		})
	case c.uploadMode() == modeLocal && single == nil && src.Size >= localProbeMin:
		return c.putGranted(ctx, table, path, src, plan, sess, nil, o, func(noDedup bool) (grantedUpload, error) {
			lg, err := c.putLocalGranted(ctx, table, o.Name, abs, src.Size, putOpts, noDedup || o.NoDedup)
			return grantedUpload{file: lg.file, dedup: lg.dedup, sent: lg.written}, err
		})
	}
	var info objects.Info
	oneStep := single != nil // the checkpoint is a KindSingle record
	if single != nil {
		info, err = c.resumeSingle(ctx, single, src, abs, sess, putOpts)
		if err != nil {
			return nil, fmt.Errorf("client: put %s: %w", path, err)
		}
	} else {
		if info, err = c.upload(ctx, key, abs, sess, putOpts); err != nil {
			return nil, fmt.Errorf("client: upload %s: %w", path, err)
		}
		if sess != nil {
			recorded, err := recordCommit(sess, table, key, src, info, o)
			if err != nil {
				return nil, fmt.Errorf("client: put %s: %w", path, err)
			}
			oneStep = recorded
		}
	}
	failpoint.Hit(FailBeforeAppend)
	res, err := c.commit(ctx, table, plan, info, o)
	if err != nil {
		return nil, err // the checkpoint stays: the same put resumes the append
	}
	failpoint.Hit(FailAfterAppend)
	c.dropCheckpoint(sess, oneStep)
	if single == nil {
		res.BytesSent = info.Size // a resumed multipart upload sent less
	}
	return res, nil
}

// dropCheckpoint removes a put's checkpoint once its append is
// acknowledged. Harmless if it fails, or (Drop, for a one-step record) if
// a machine crash brings the record back: a next put of the file finds
// the object and its commit id already committed.
func (c *Client) dropCheckpoint(sess *checkpoint.Session, oneStep bool) {
	if sess == nil {
		return
	}
	remove := sess.Remove
	if oneStep {
		remove = sess.Drop
	}
	if err := remove(); err != nil {
		c.log.Warn("cannot remove the upload checkpoint", "err", err)
	}
}

// grantedUpload is what an upload through a grant answered: the FILE
// value to append, whether it is an object the stage held already, and
// the bytes sent.
type grantedUpload struct {
	file  *lakepb.UploadedFile
	dedup bool
	sent  int64
}

// putGranted finishes a put whose bytes go through an upload grant
// (send): it records the answered object and the commit id in the
// checkpoint before the append, as PutFile does for every put, and
// appends a row with exactly the answered FILE value. A deduplicated
// answer whose object is gone by the time of the append (collected, or
// doomed by a running gc) is put once more with no_dedup. single is a
// KindSingle record of an earlier, interrupted put: the file must be the
// one it recorded; the grant then answers the object again (or a new
// one), and the recorded commit id keeps the row single.
func (c *Client) putGranted(ctx context.Context, table, path string, src checkpoint.Source, plan *rowPlan, sess *checkpoint.Session, single *checkpoint.Checkpoint, o PutOptions, send func(noDedup bool) (grantedUpload, error)) (*PutResult, error) {
	if single != nil {
		if err := single.CheckSource(src); err != nil {
			return nil, fmt.Errorf("client: put %s: %w; `lake uploads cancel %s` forgets the interrupted put", path, err, src.Path)
		}
	}
	var sent int64
	for noDedup := false; ; noDedup = true {
		up, err := send(noDedup)
		if err != nil {
			return nil, fmt.Errorf("client: upload %s: %w", path, err)
		}
		sent += up.sent
		res, err := c.appendGranted(ctx, table, plan, sess, src, up.file, o)
		if err != nil && up.dedup && !noDedup && objectGone(err) {
			c.log.Warn("the object the stage answered for the file is gone; uploading it", "key", up.file.GetKey(), "err", err)
			continue
		}
		if err != nil {
			return nil, err
		}
		res.Deduplicated, res.BytesSent = up.dedup, sent
		return res, nil
	}
}

// appendGranted records an answered FILE value and the commit id in the
// put's checkpoint and appends its row.
func (c *Client) appendGranted(ctx context.Context, table string, plan *rowPlan, sess *checkpoint.Session, src checkpoint.Source, f *lakepb.UploadedFile, o PutOptions) (*PutResult, error) {
	v := uploadedValue(f)
	oneStep := false
	if sess != nil {
		info := objects.Info{Key: v.Key, Size: v.Size, SHA256: v.SHA256, ETag: v.ETag}
		recorded, err := recordCommit(sess, table, v.Key, src, info, o)
		if err != nil {
			return nil, fmt.Errorf("client: put %s: %w", src.Path, err)
		}
		oneStep = recorded
	}
	failpoint.Hit(FailBeforeAppend)
	res, err := c.commitValue(ctx, table, plan, v, o)
	if err != nil {
		return nil, err // the checkpoint stays: the same put resumes the append
	}
	failpoint.Hit(FailAfterAppend)
	c.dropCheckpoint(sess, oneStep)
	return res, nil
}

// upload sends the file at abs: resumably through the checkpoint session
// when the stage can resume uploads and the put has a session, else in one
// go. The session is held either way, so two puts of one file into one
// table never run at once.
func (c *Client) upload(ctx context.Context, key, abs string, sess *checkpoint.Session, opts objects.PutOptions) (objects.Info, error) {
	if r, ok := c.store.(objects.Resumer); ok && sess != nil {
		return r.PutPathResumable(ctx, key, abs, sess, opts)
	}
	return c.store.PutPath(ctx, key, abs, opts)
}

// resumeFrom takes from an existing checkpoint what the put must reuse:
// the object key (returned), the content type the object was created with
// and the commit id, if one was recorded. asked is the commit id the
// caller set, if any.
func resumeFrom(cp *checkpoint.Checkpoint, table, asked string, o *PutOptions) (string, error) {
	if cp.Table != "" && cp.Table != table {
		return "", fmt.Errorf("its upload checkpoint is for table %q, not %q", cp.Table, table)
	}
	key := cp.Binding.Key
	if p := cp.Binding.Prefix; p != "" {
		var ok bool
		if key, ok = strings.CutPrefix(key, p+"/"); !ok {
			return "", fmt.Errorf("%w: its key is outside the stage prefix", checkpoint.ErrBindingMismatch)
		}
	}
	if cp.CommitID != "" {
		if asked != "" && asked != cp.CommitID {
			return "", fmt.Errorf("commit id %q differs from the one its interrupted put used; resume without one, or cancel that upload", asked)
		}
		o.CommitID = cp.CommitID
	}
	o.ContentType = cp.ContentType
	return key, nil
}

// recordCommit writes into the upload checkpoint, before the append is
// sent, what the same put run again needs to append the same object with
// the same commit id. A checkpoint the stage left (a multipart upload)
// gets the commit id and table; where the stage wrote none, one of kind
// checkpoint.KindSingle records the object. It reports whether it wrote
// such a record.
func recordCommit(sess *checkpoint.Session, table, key string, src checkpoint.Source, info objects.Info, o PutOptions) (bool, error) {
	cp, err := sess.Load()
	if errors.Is(err, checkpoint.ErrNoCheckpoint) {
		return true, saveSingle(sess, table, key, src, info, o)
	}
	if err != nil {
		return false, err
	}
	if cp.CommitID == o.CommitID && cp.Table == table {
		return cp.Kind == checkpoint.KindSingle, nil
	}
	cp.CommitID, cp.Table = o.CommitID, table
	return cp.Kind == checkpoint.KindSingle, sess.Save(cp)
}

// saveSingle saves the KindSingle record of the object uploaded from src
// under key in one request. It holds hashes, the key and the ETag, no
// secret.
func saveSingle(sess *checkpoint.Session, table, key string, src checkpoint.Source, info objects.Info, o PutOptions) error {
	if info.SHA256 == "" {
		return fmt.Errorf("upload %s: the stage did not report a SHA-256", key)
	}
	if info.Size != src.Size {
		return fmt.Errorf("%w: size changed during the upload: %d → %d", checkpoint.ErrSourceChanged, src.Size, info.Size)
	}
	return sess.Save(&checkpoint.Checkpoint{
		Version:     checkpoint.Version,
		Kind:        checkpoint.KindSingle,
		Source:      src,
		Binding:     checkpoint.Binding{Key: key},
		SHA256:      info.SHA256,
		ContentType: o.ContentType,
		Completed:   true,
		ETag:        info.ETag,
		CommitID:    o.CommitID,
		Table:       table,
	})
}

// resumeSingle checks what a KindSingle record names before its append is
// sent again, and returns the object to append: the file must be the one
// recorded (path, size, mtime) and the object still at its key with its
// size, and its ETag when both the record and the stage know one. An
// object that is gone (collected as an orphan) is uploaded again under the
// same key, outside the stage's own checkpoints, and recorded anew; the
// commit id stays, so the row still commits once.
func (c *Client) resumeSingle(ctx context.Context, cp *checkpoint.Checkpoint, src checkpoint.Source, abs string, sess *checkpoint.Session, opts objects.PutOptions) (objects.Info, error) {
	forget := fmt.Sprintf("`lake uploads cancel %s` forgets the interrupted put", src.Path)
	if err := cp.CheckSource(src); err != nil {
		return objects.Info{}, fmt.Errorf("%w; %s", err, forget)
	}
	key := cp.Binding.Key
	st, err := c.store.Stat(ctx, key)
	switch {
	case errors.Is(err, objects.ErrNotFound):
		c.log.Warn("the object of an interrupted put is gone; uploading it again under its key", "key", key)
		info, err := c.store.PutPath(ctx, key, abs, opts)
		if err != nil {
			return objects.Info{}, fmt.Errorf("upload again: %w", err)
		}
		if err := saveSingle(sess, cp.Table, key, src, info, PutOptions{ContentType: cp.ContentType, CommitID: cp.CommitID}); err != nil {
			return objects.Info{}, err
		}
		return info, nil
	case err != nil:
		return objects.Info{}, fmt.Errorf("stat the uploaded object %s: %w", key, err)
	case st.Size != cp.Source.Size || cp.ETag != "" && st.ETag != "" && st.ETag != cp.ETag:
		return objects.Info{}, fmt.Errorf("%w (key %s: %d bytes, want %d); %s", ErrObjectChanged, key, st.Size, cp.Source.Size, forget)
	}
	if opts.Progress != nil {
		opts.Progress(objects.Progress{Done: cp.Source.Size, Total: cp.Source.Size})
	}
	return objects.Info{Key: key, Size: cp.Source.Size, SHA256: cp.SHA256, ETag: cp.ETag, ModTime: st.ModTime}, nil
}

// PutReader uploads everything r yields as an object named name, then
// appends one row for it to table. It cannot resume: use PutFile for files.
func (c *Client) PutReader(ctx context.Context, table, name string, r io.Reader, o PutOptions) (*PutResult, error) {
	if name == "" {
		return nil, fmt.Errorf("client: put: a stream needs a name")
	}
	o.Name = name
	plan, err := c.prepare(ctx, table, &o)
	if err != nil {
		return nil, err
	}
	if c.uploadMode() == modePresigned {
		// A stream cannot be read twice: a deduplicated answer whose
		// object went away before the append fails the put.
		opts := c.grantOptions(table, o.Name, o.ContentType, o.CommitID, o.Progress)
		opts.NoDedup = o.NoDedup
		res, err := c.uploader().PutReader(ctx, r, opts)
		if err != nil {
			return nil, fmt.Errorf("client: upload %s: %w", name, err)
		}
		pr, err := c.commitValue(ctx, table, plan, uploadedValue(res.File), o)
		if err != nil {
			return nil, err
		}
		pr.Deduplicated, pr.BytesSent = res.Deduplicated, res.BytesSent
		return pr, nil
	}
	key := objects.NewObjectKey(o.Name, time.Now())
	info, err := c.store.Put(ctx, key, r, objects.PutOptions{ContentType: o.ContentType, Progress: o.Progress})
	if err != nil {
		return nil, fmt.Errorf("client: upload %s: %w", name, err)
	}
	res, err := c.commit(ctx, table, plan, info, o)
	if err != nil {
		return nil, err
	}
	res.BytesSent = info.Size
	return res, nil
}

// prepare checks everything that can fail before the upload: the table,
// its schema and the row's values. It fills o's defaults.
func (c *Client) prepare(ctx context.Context, table string, o *PutOptions) (*rowPlan, error) {
	schema, err := c.schema(ctx, table)
	if err != nil {
		return nil, err
	}
	plan, err := planRow(schema, o.Name, o.Set)
	if err != nil {
		return nil, fmt.Errorf("client: put into %s: %w", table, err)
	}
	if o.ContentType == "" {
		o.ContentType = mime.TypeByExtension(filepath.Ext(o.Name))
	}
	if o.CommitID == "" {
		o.CommitID = uuid.NewString()
	}
	return plan, nil
}

// commit appends the row for an uploaded object.
func (c *Client) commit(ctx context.Context, table string, plan *rowPlan, info objects.Info, o PutOptions) (*PutResult, error) {
	if info.SHA256 == "" {
		return nil, fmt.Errorf("client: upload %s: the stage did not report a SHA-256", info.Key)
	}
	v := wire.FileValue{
		Key: info.Key, Size: info.Size, SHA256: info.SHA256,
		ContentType: o.ContentType, ETag: info.ETag, UploadedAt: time.Now().UTC(),
	}
	return c.commitValue(ctx, table, plan, v, o)
}

// commitValue appends the row naming the FILE value v.
func (c *Client) commitValue(ctx context.Context, table string, plan *rowPlan, v wire.FileValue, o PutOptions) (*PutResult, error) {
	rec, err := plan.record(v, time.Now().UTC())
	if err != nil {
		return nil, fmt.Errorf("client: put into %s: %w", table, err)
	}
	defer rec.Release()
	res, err := c.Append(ctx, table, rec, AppendOptions{CommitID: o.CommitID})
	if err != nil {
		// The object stays: a later retry of the same commit id may still
		// find it committed, and an orphan costs only space.
		return nil, fmt.Errorf("%w (uploaded object %s)", err, v.Key)
	}
	return &PutResult{Table: res.GetTable(), File: v, Version: res.GetVersion(), Duplicate: res.GetDuplicate()}, nil
}

// Append commits rec (the table's columns) as one new table version through
// the endpoint. An ambiguous failure (Unavailable, DeadlineExceeded) is
// retried with the same commit id, so the rows commit at most once.
func (c *Client) Append(ctx context.Context, table string, rec arrow.RecordBatch, o AppendOptions) (*lakepb.AppendResult, error) {
	cmd := &lakepb.Append{Table: table, CommitId: o.CommitID, ExpectedVersion: o.ExpectedVersion}
	if cmd.CommitId == "" {
		cmd.CommitId = uuid.NewString()
	}
	var res *lakepb.AppendResult
	err := c.retryAmbiguous(ctx, "append to "+table, cmd.CommitId, func() error {
		var err error
		res, err = flightrpc.Append(ctx, c.fc, cmd, rec.Schema(), []arrow.RecordBatch{rec})
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// canonicalPath is the absolute path with symbolic links resolved, so one
// file has one checkpoint however it is named. It must be a regular file.
func canonicalPath(path string) (string, error) {
	abs, _, err := sourceOf(path)
	return abs, err
}

// sourceOf is canonicalPath with the file's identity as a checkpoint
// records it (path, size, mtime).
func sourceOf(path string) (string, checkpoint.Source, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", checkpoint.Source{}, err
	}
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return "", checkpoint.Source{}, err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", checkpoint.Source{}, err
	}
	if !fi.Mode().IsRegular() {
		return "", checkpoint.Source{}, fmt.Errorf("not a regular file")
	}
	return abs, checkpoint.Source{Path: abs, Size: fi.Size(), ModTime: fi.ModTime().UTC()}, nil
}

// checkpointPath names the checkpoint of uploading the file at abs into
// table: the same put after a crash finds the same checkpoint. The stage
// is part of the name so a put of the same file to another deployment
// does not trip over it. "" (no checkpoint directory): no checkpoint, no
// resume.
func (c *Client) checkpointPath(abs, table string) string {
	if c.checkpointDir == "" {
		return ""
	}
	h := sha256.New()
	for _, s := range []string{c.stage.GetRootUri(), table, abs} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return filepath.Join(c.checkpointDir, hex.EncodeToString(h.Sum(nil))+".json")
}

// ForgetPuts drops the records of interrupted puts of the file at path
// whose object was uploaded in one request (checkpoint.KindSingle; one
// per table), which `lake uploads cancel` gives up: there is no upload to
// abort, the object is complete. A row its append committed stays; an
// object whose row never committed is an orphan for gc. It returns how
// many it dropped (0 when there are none). A put running now fails with
// checkpoint.ErrInProgress; a record of a put to another stage with
// checkpoint.ErrBindingMismatch.
func (c *Client) ForgetPuts(path string) (int, error) {
	abs, entries, err := c.uploadsOf(path)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		cp := e.Checkpoint
		if cp.Kind != checkpoint.KindSingle {
			continue
		}
		if filepath.Clean(e.Path) != filepath.Clean(c.checkpointPath(abs, cp.Table)) {
			return n, fmt.Errorf("client: forget the put of %s into %s: %w: it went to another stage", path, cp.Table, checkpoint.ErrBindingMismatch)
		}
		if err := forgetOne(e.Path); err != nil {
			return n, fmt.Errorf("client: forget the put of %s into %s: %w", path, cp.Table, err)
		}
		n++
	}
	return n, nil
}

// forgetOne removes a KindSingle record under its lock, if it still is
// one.
func forgetOne(cpPath string) error {
	sess, err := checkpoint.Open(cpPath)
	if err != nil {
		return err
	}
	defer sess.Close()
	cp, err := sess.Load()
	switch {
	case errors.Is(err, checkpoint.ErrNoCheckpoint):
		return nil
	case err != nil:
		return err
	case cp.Kind != checkpoint.KindSingle:
		return fmt.Errorf("%w: it is a multipart upload now", checkpoint.ErrBindingMismatch)
	}
	return sess.Remove()
}
