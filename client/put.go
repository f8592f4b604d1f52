package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"os"
	"path/filepath"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/google/uuid"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/objects"
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
	// so the client's own retries can never commit the row twice.
	CommitID string
}

// PutResult is what a put committed.
type PutResult struct {
	Table     string
	File      wire.FileValue
	Version   int64 // the table version holding the row
	Duplicate bool  // the commit id had already committed
}

// AppendOptions control one append.
type AppendOptions struct {
	// CommitID makes the append idempotent; default a fresh random UUID.
	CommitID string
	// ExpectedVersion commits only if the table is at this version
	// (wire.ErrVersionConflict otherwise).
	ExpectedVersion *int64
}

// Appends that fail ambiguously are resent this many times in all, with a
// growing pause; the commit id makes a resend harmless.
const (
	appendAttempts = 4
	appendBackoff  = 250 * time.Millisecond
)

// PutFile uploads the file at path straight to the stage, then appends one
// row for it to table through the endpoint.
func (c *Client) PutFile(ctx context.Context, table, path string, o PutOptions) (*PutResult, error) {
	abs, err := canonicalPath(path)
	if err != nil {
		return nil, fmt.Errorf("client: put %s: %w", path, err)
	}
	if o.Name == "" {
		o.Name = filepath.Base(path) // as given: a symbolic link's own name
	}
	plan, err := c.prepare(ctx, table, &o)
	if err != nil {
		return nil, err
	}
	cp := c.checkpointPath(abs, table)
	key := objects.NewObjectKey(o.Name, time.Now())
	info, err := c.store.PutPath(ctx, key, abs, cp, objects.PutOptions{ContentType: o.ContentType})
	if err != nil {
		return nil, fmt.Errorf("client: upload %s: %w", path, err)
	}
	res, err := c.commit(ctx, table, plan, info, o)
	if err != nil {
		return nil, err
	}
	// The checkpoint lives until the row is acknowledged (DESIGN §7).
	if cp != "" {
		if err := os.Remove(cp); err != nil && !errors.Is(err, fs.ErrNotExist) {
			c.log.Warn("cannot remove the upload checkpoint", "path", cp, "err", err)
		}
	}
	return res, nil
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
	key := objects.NewObjectKey(o.Name, time.Now())
	info, err := c.store.Put(ctx, key, r, objects.PutOptions{ContentType: o.ContentType})
	if err != nil {
		return nil, fmt.Errorf("client: upload %s: %w", name, err)
	}
	return c.commit(ctx, table, plan, info, o)
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
	now := time.Now().UTC()
	v := wire.FileValue{
		Key: info.Key, Size: info.Size, SHA256: info.SHA256,
		ContentType: o.ContentType, ETag: info.ETag, UploadedAt: now,
	}
	rec, err := plan.record(v, now)
	if err != nil {
		return nil, fmt.Errorf("client: put into %s: %w", table, err)
	}
	defer rec.Release()
	res, err := c.Append(ctx, table, rec, AppendOptions{CommitID: o.CommitID})
	if err != nil {
		// The object stays: a later retry of the same commit id may still
		// find it committed, and an orphan costs only space.
		return nil, fmt.Errorf("%w (uploaded object %s)", err, info.Key)
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
	for attempt := 1; ; attempt++ {
		res, err := flightrpc.Append(ctx, c.fc, cmd, rec.Schema(), []arrow.RecordBatch{rec})
		if err == nil {
			return res, nil
		}
		err = remoteError(err)
		if !retryable(err) || ctx.Err() != nil || attempt == appendAttempts {
			return nil, fmt.Errorf("client: append to %s: %w", table, err)
		}
		pause := appendBackoff << (attempt - 1)
		c.log.Warn("append failed; resending with the same commit id",
			"table", table, "commit_id", cmd.CommitId, "attempt", attempt, "pause", pause, "err", err)
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return nil, fmt.Errorf("client: append to %s: %w (after: %v)", table, ctx.Err(), err)
		}
	}
}

// canonicalPath is the absolute path with symbolic links resolved, so one
// file has one checkpoint however it is named. It must be a regular file.
func canonicalPath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return "", err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("not a regular file")
	}
	return abs, nil
}

// checkpointPath names the checkpoint of uploading the file at abs into
// table: the same put after a crash finds the same checkpoint. The stage
// is part of the name so a put of the same file to another deployment
// does not trip over it.
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
