package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// URL returns a URL that reads the object at key without lake and
// without stage credentials (lake.table.url, read scope): on an S3 stage a
// presigned GET URL that works until the answer's expires_at, on a local
// stage the object's file:// URL. A key that no row of the table's current
// version has is wire.ErrRowNotFound. expires 0 takes the service's
// default (15 minutes); one above its --url-max-expiry is
// wire.ErrInvalidRequest. The answer's file is the FILE value of the row.
//
// The URL is a secret while it works: whoever holds it reads the object.
// Do not log it.
func (c *Client) URL(ctx context.Context, table, key string, expires time.Duration) (*lakepb.ObjectUrl, error) {
	return c.objectURL(ctx, table, key, expires, nil)
}

// URLAt is URL at a version of the table (time travel): a row of that
// version must hold the key, though it may have been deleted since. A
// version never committed is wire.ErrVersionNotFound, an expired one
// wire.ErrVersionExpired.
func (c *Client) URLAt(ctx context.Context, table, key string, expires time.Duration, version int64) (*lakepb.ObjectUrl, error) {
	return c.objectURL(ctx, table, key, expires, &version)
}

func (c *Client) objectURL(ctx context.Context, table, key string, expires time.Duration, version *int64) (*lakepb.ObjectUrl, error) {
	req := &lakepb.ObjectUrlRequest{Table: table, Key: key, Version: version}
	if expires != 0 {
		us := expires.Microseconds()
		req.ExpiresMicros = &us
	}
	var res lakepb.ObjectUrl
	if err := c.action(ctx, wire.ActionURL, req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// URLReadOptions tune OpenURL.
type URLReadOptions struct {
	// Version is the table version whose rows must hold the key (time
	// travel); nil is the latest.
	Version *int64
	// HTTPClient makes the GET requests; nil is a plain client of its
	// own. It never gets AWS credentials: the URL is signed already.
	HTTPClient *http.Client
}

// maxURLResumes bounds how often one OpenURL download resumes after a
// broken connection.
const maxURLResumes = 3

// OpenURL reads the object of the row of table whose FILE value has key
// through a read URL the metadata service signs, so it needs no stage
// credentials, only read scope. It returns the row's FILE value and a
// reader that, like Open's, checks size and SHA-256 at the end (an error
// wrapping ErrIntegrity instead of io.EOF). A connection that breaks
// mid-download resumes where it stopped with a Range request, at most
// maxURLResumes times.
//
// A key no row has (at opts.Version) is ErrFileNotFound, and also
// wire.ErrRowNotFound; a version never committed wire.ErrVersionNotFound,
// an expired one wire.ErrVersionExpired. No error names the URL.
func (c *Client) OpenURL(ctx context.Context, table, key string, opts URLReadOptions) (io.ReadCloser, wire.FileValue, error) {
	res, err := c.objectURL(ctx, table, key, 0, opts.Version)
	if errors.Is(err, wire.ErrRowNotFound) {
		return nil, wire.FileValue{}, fmt.Errorf("client: %w: %w", ErrFileNotFound, err)
	}
	if err != nil {
		return nil, wire.FileValue{}, fmt.Errorf("client: read URL of %s in %s: %w", key, table, err)
	}
	v := uploadedValue(res.GetFile())
	if err := v.Validate(); err != nil || v.Key != key {
		return nil, wire.FileValue{}, fmt.Errorf("client: read URL of %s in %s: the answer's FILE value is not the key's: %v", key, table, err)
	}
	body, err := c.urlBody(ctx, res, table, v, opts)
	if err != nil {
		return nil, wire.FileValue{}, err
	}
	return newVerifier(body, v), v, nil
}

// urlBody opens the bytes an ObjectUrl answer names: a file:// URL from
// the file system, any other with HTTP GETs that resume on a broken
// connection.
func (c *Client) urlBody(ctx context.Context, res *lakepb.ObjectUrl, table string, v wire.FileValue, opts URLReadOptions) (io.ReadCloser, error) {
	u, err := url.Parse(res.GetUrl())
	if err != nil {
		return nil, fmt.Errorf("client: read URL of %s: it does not parse", v.Key)
	}
	if u.Scheme == "file" {
		f, err := os.Open(u.Path)
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("client: open %s: %w", v.Key, objects.ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("client: open %s: %w", v.Key, err)
		}
		return f, nil
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	b := &urlReader{ctx: ctx, hc: hc, key: v.Key, size: v.Size, url: res.GetUrl(), expiresAt: res.GetExpiresAtUnixMicros()}
	b.renew = func() error {
		fresh, err := c.objectURL(ctx, table, v.Key, 0, opts.Version)
		if err != nil {
			return fmt.Errorf("client: a fresh read URL of %s: %w", v.Key, err)
		}
		b.url, b.expiresAt = fresh.GetUrl(), fresh.GetExpiresAtUnixMicros()
		return nil
	}
	if err := b.get(); err != nil {
		return nil, err
	}
	return b, nil
}

// urlReader reads an object with HTTP GETs of a read URL. When the
// connection breaks it GETs the rest (Range: bytes=off-) with the same URL,
// or with a fresh one when that is about to expire.
type urlReader struct {
	ctx       context.Context
	hc        *http.Client
	key       string
	size      int64
	url       string // a secret: never in an error
	expiresAt int64  // Unix micros; 0 = never
	renew     func() error

	body    io.ReadCloser
	off     int64 // bytes read so far
	broken  error // the connection broke with it; resume before reading on
	resumes int
}

// get starts a GET of the object from off.
func (r *urlReader) get() error {
	req, err := http.NewRequestWithContext(r.ctx, http.MethodGet, r.url, nil)
	if err != nil {
		return fmt.Errorf("client: GET of %s: the read URL is malformed", r.key)
	}
	want := http.StatusOK
	if r.off > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", r.off))
		want = http.StatusPartialContent
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return fmt.Errorf("client: GET of %s: %w", r.key, withoutURL(err))
	}
	if resp.StatusCode != want {
		resp.Body.Close()
		// The answer's body is not shown: an S3 error may quote the
		// request it refused.
		switch resp.StatusCode {
		case http.StatusNotFound:
			return fmt.Errorf("client: GET of %s: %w", r.key, objects.ErrNotFound)
		case http.StatusForbidden:
			return fmt.Errorf("client: GET of %s: the stage refused the read URL (403; expired?)", r.key)
		}
		return fmt.Errorf("client: GET of %s: status %s, want %d", r.key, resp.Status, want)
	}
	if r.off > 0 && !strings.HasPrefix(resp.Header.Get("Content-Range"), fmt.Sprintf("bytes %d-", r.off)) {
		resp.Body.Close()
		return fmt.Errorf("client: GET of %s from byte %d: the answer starts elsewhere", r.key, r.off)
	}
	r.body = resp.Body
	return nil
}

func (r *urlReader) Read(p []byte) (int, error) {
	for {
		if r.broken == nil {
			n, err := r.body.Read(p)
			r.off += int64(n)
			if err == nil || err == io.EOF {
				return n, err
			}
			r.broken = withoutURL(err)
			if n > 0 {
				return n, nil
			}
		}
		if r.off >= r.size {
			// Every byte came before the break; the verifier judges them.
			return 0, io.EOF
		}
		if r.resumes >= maxURLResumes || r.ctx.Err() != nil {
			return 0, fmt.Errorf("client: read %s: %w", r.key, r.broken)
		}
		if err := r.resume(); err != nil {
			return 0, fmt.Errorf("client: read %s: %w; resuming: %w", r.key, r.broken, err)
		}
		r.broken = nil
	}
}

// resume GETs the rest of the object after a broken connection.
func (r *urlReader) resume() error {
	r.body.Close()
	r.resumes++
	if r.expiresAt != 0 && time.Until(time.UnixMicro(r.expiresAt)) < time.Minute {
		if err := r.renew(); err != nil {
			return err
		}
	}
	return r.get()
}

func (r *urlReader) Close() error { return r.body.Close() }

// withoutURL strips the URL net/http quotes in its errors (*url.Error):
// a read URL is a secret.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
