package client

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/checkpoint"
	"github.com/lakedata/lake/objects/presigned"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// ErrNoUpload: no pending upload of that file is known.
var ErrNoUpload = errors.New("no pending upload of this file")

// ListUploads lists the checkpoints of pending uploads in dir (the client's
// checkpoint directory when dir is ""): interrupted puts that the same
// `lake put` resumes, and puts running now (Locked).
func ListUploads(dir string) ([]checkpoint.Entry, error) {
	if dir == "" {
		d, err := checkpoint.DefaultDir()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	return checkpoint.List(dir)
}

// CancelUpload gives up the pending uploads of the file at path (one per
// table it was being put into): for each it takes the checkpoint's lock,
// checks the upload belongs to this client's stage, aborts the multipart
// upload and removes the checkpoint. It returns the number cancelled. An
// upload that is running now fails with checkpoint.ErrInProgress.
//
// Every checkpoint of the file is tried, not only those of this stage
// (objects.Resumer.Uploads): one of another stage fails with
// checkpoint.ErrBindingMismatch rather than pass for no upload at all.
func (c *Client) CancelUpload(ctx context.Context, path string) (int, error) {
	_, entries, err := c.uploadsOf(path)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if err := c.cancelOne(ctx, e.Path); err != nil {
			return n, fmt.Errorf("client: cancel the upload of %s: %w", path, err)
		}
		n++
	}
	if n == 0 {
		return 0, fmt.Errorf("client: %s: %w", path, ErrNoUpload)
	}
	return n, nil
}

// uploadsOf returns the file at path as checkpoints name it (absolute,
// symbolic links resolved when it still exists; else as given) and the
// readable checkpoints of this client's directory that are of that file.
func (c *Client) uploadsOf(path string) (string, []checkpoint.Entry, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", nil, err
	}
	if canon, err := filepath.EvalSymlinks(abs); err == nil {
		abs = canon // the file may be gone; then its path as given
	}
	entries, err := ListUploads(c.checkpointDir)
	if err != nil {
		return "", nil, fmt.Errorf("client: list uploads: %w", err)
	}
	var of []checkpoint.Entry
	for _, e := range entries {
		if e.Checkpoint != nil && e.Checkpoint.Source.Path == abs {
			of = append(of, e)
		}
	}
	return abs, of, nil
}

// cancelOne: load and lock → validate the binding → abort → remove.
func (c *Client) cancelOne(ctx context.Context, cpPath string) error {
	sess, err := checkpoint.Open(cpPath)
	if err != nil {
		return err
	}
	defer sess.Close()
	cp, err := sess.Load()
	if err != nil {
		return err
	}
	if cp.Kind == checkpoint.KindSingle {
		// A record of an object uploaded in one request: nothing is
		// pending in the stage, so cancelling drops the record; the
		// object stays for gc if no row names it.
		return sess.Remove()
	}
	if cp.Kind == checkpoint.KindGranted {
		// The service holds the stage's credentials: it aborts.
		key, ok := presigned.GrantedKey(cp.Binding)
		if !ok {
			return fmt.Errorf("%w: its key is outside the stage prefix", checkpoint.ErrBindingMismatch)
		}
		req := &lakepb.UploadAbortRequest{Table: cp.Table, Key: key, UploadId: cp.Binding.UploadID}
		if err := c.action(ctx, wire.ActionUploadAbort, req, &lakepb.UploadAborted{}); err != nil {
			return err
		}
		return sess.Remove()
	}
	r, ok := c.store.(objects.Resumer)
	if !ok {
		return fmt.Errorf("the stage %s has no resumable uploads to cancel", c.stage.GetRootUri())
	}
	if err := r.Cancel(ctx, cp); err != nil {
		return err
	}
	return sess.Remove()
}
