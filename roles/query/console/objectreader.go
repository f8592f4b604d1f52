package console

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/lakedata/lake/objects"
)

// objectReader is an io.ReadSeeker over one object of a Store, for
// http.ServeContent: a Seek only moves the offset, and the next Read
// opens the object there (objects.Store.Open with an offset), so a Range
// request reads only its bytes.
type objectReader struct {
	ctx   context.Context
	store objects.Store
	key   string
	size  int64
	off   int64
	rc    io.ReadCloser // open at off, nil until the next Read
}

func newObjectReader(ctx context.Context, store objects.Store, key string, size int64) *objectReader {
	return &objectReader{ctx: ctx, store: store, key: key, size: size}
}

func (r *objectReader) Read(p []byte) (int, error) {
	if r.off >= r.size {
		return 0, io.EOF
	}
	if r.rc == nil {
		rc, err := r.store.Open(r.ctx, r.key, r.off, -1)
		if err != nil {
			return 0, err
		}
		r.rc = rc
	}
	n, err := r.rc.Read(p)
	r.off += int64(n)
	return n, err
}

func (r *objectReader) Seek(offset int64, whence int) (int64, error) {
	var to int64
	switch whence {
	case io.SeekStart:
		to = offset
	case io.SeekCurrent:
		to = r.off + offset
	case io.SeekEnd:
		to = r.size + offset
	default:
		return 0, fmt.Errorf("console: seek whence %d", whence)
	}
	if to < 0 {
		return 0, errors.New("console: seek before the start")
	}
	if to != r.off {
		r.closeReader()
		r.off = to
	}
	return to, nil
}

func (r *objectReader) closeReader() {
	if r.rc != nil {
		r.rc.Close()
		r.rc = nil
	}
}

// Close releases the open reader, if any.
func (r *objectReader) Close() error {
	r.closeReader()
	return nil
}
