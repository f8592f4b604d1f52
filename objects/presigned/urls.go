package presigned

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/lakedata/lake/wire/lakepb"
)

// Part PUTs that fail on the network or with a 5xx are tried this often
// in all, pausing putBackoff, then twice that, between tries.
const (
	putAttempts = 4
	putBackoff  = 200 * time.Millisecond
)

// renewBatch is the most part URLs one renewal asks for.
const renewBatch = 16

// minURLLeft is the least time a URL must have left to be used; a
// quarter of its lifetime when that is more.
const minURLLeft = time.Second

// urlCache holds the part URLs of one upload, in memory only, and renews
// them: before use when they are close to expiring, and on request after
// S3 said one had. With the sums of the parts known ahead (the file was
// hashed before its grant), a renewal asks for the next parts' URLs too.
type urlCache struct {
	up    *upload
	known [][32]byte // part sums by number−1; nil when hashing overlaps

	mu   sync.Mutex // held across a renewal, so one part is renewed once
	urls map[int32]cachedURL
}

type cachedURL struct {
	url             *lakepb.PartUrl
	sum             string // the SHA-256 it was signed for
	issued, expires time.Time
}

func newURLCache(up *upload, known [][32]byte) *urlCache {
	return &urlCache{up: up, known: known, urls: make(map[int32]cachedURL)}
}

// knownSum is part n's sum hashed before the grant, if it was.
func (c *urlCache) knownSum(n int32) ([32]byte, bool) {
	if c.known == nil || int(n) > len(c.known) {
		return [32]byte{}, false
	}
	return c.known[n-1], true
}

// add keeps urls, signed for the sums parts name, until expiresAt (unix
// µs; a minute from now when the service gave none).
func (c *urlCache) add(urls []*lakepb.PartUrl, expiresAt int64, parts []*lakepb.UploadPart) {
	now := time.Now()
	exp := now.Add(time.Minute)
	if expiresAt > 0 {
		exp = time.UnixMicro(expiresAt)
	}
	sums := make(map[int32]string, len(parts))
	for _, p := range parts {
		sums[p.GetNumber()] = p.GetSha256()
	}
	for _, u := range urls {
		if s, ok := sums[u.GetNumber()]; ok {
			c.urls[u.GetNumber()] = cachedURL{url: u, sum: s, issued: now, expires: exp}
		}
	}
}

// fresh reports whether e has enough time left to be used now.
func (e cachedURL) fresh(now time.Time) bool {
	return e.expires.Sub(now) >= max(minURLLeft, e.expires.Sub(e.issued)/4)
}

// get returns a URL of part n signed for sum, renewing it unless one
// with enough time left is at hand.
func (c *urlCache) get(ctx context.Context, n int32, sum string) (*lakepb.PartUrl, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if e, ok := c.urls[n]; ok && e.sum == sum && e.fresh(now) {
		return e.url, nil
	}
	parts := []*lakepb.UploadPart{{Number: n, Sha256: sum}}
	for m := int(n) + 1; m <= len(c.known) && len(parts) < renewBatch; m++ {
		if e, ok := c.urls[int32(m)]; ok && e.fresh(now) {
			continue
		}
		parts = append(parts, &lakepb.UploadPart{Number: int32(m), Sha256: hex.EncodeToString(c.known[m-1][:])})
	}
	up := c.up
	req := &lakepb.UploadRenewRequest{
		Table: up.o.Table, Key: up.key, UploadId: up.id, Parts: parts, ExpiresMicros: up.expires(),
	}
	if n == 0 {
		req.ContentType = up.o.ContentType // a single PUT's URL binds it
	}
	res, err := up.u.act.Renew(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("presigned: renew the URL of part %d: %w", n, err)
	}
	c.add(res.GetUrls(), res.GetExpiresAtUnixMicros(), parts)
	e, ok := c.urls[n]
	if !ok || e.sum != sum {
		return nil, fmt.Errorf("presigned: the service signed no URL for part %d", n)
	}
	return e.url, nil // used as it came, however short its lifetime
}

// drop forgets part n's URL, which S3 said has expired.
func (c *urlCache) drop(n int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.urls, n)
}

// putPart PUTs part n's bytes to its URL with every signed header and
// returns the part's ETag; part 0 is a single PUT of the whole file. Network failures and 5xx answers are tried
// again (putAttempts in all); a 403 saying the URL expired is renewed
// and tried again once. Errors never carry the URL.
func (up *upload) putPart(ctx context.Context, urls *urlCache, n int32, data []byte, sum string) (string, error) {
	renewed := false
	pause := putBackoff
	var last error
	for attempt := 1; attempt <= putAttempts; attempt++ {
		u, err := urls.get(ctx, n, sum)
		if err != nil {
			return "", err
		}
		etag, status, s3err, err := up.put(ctx, u, data)
		switch {
		case err == nil && status == http.StatusOK:
			return etag, nil
		case ctx.Err() != nil:
			return "", context.Cause(ctx)
		case err == nil && status == http.StatusPreconditionFailed && n == 0:
			// A single PUT (put-if-absent) finds the key written: an
			// earlier try of it landed, its answer lost. Completion checks
			// that the object there is this file.
			return "", nil
		case err == nil && status == http.StatusForbidden && s3err.expired() && !renewed:
			renewed = true
			urls.drop(n)
			continue
		case err == nil && status < 500 && status != http.StatusTooManyRequests:
			return "", fmt.Errorf("presigned: PUT part %d: %w", n, &PartError{Status: status, Code: s3err.Code})
		case err == nil:
			last = &PartError{Status: status, Code: s3err.Code}
		default:
			last = err
		}
		if attempt < putAttempts {
			if err := sleep(ctx, pause); err != nil {
				return "", err
			}
			pause *= 2
		}
	}
	return "", fmt.Errorf("presigned: PUT part %d: %d attempts: %w", n, putAttempts, last)
}

// PartError is S3's refusal of a part PUT: the HTTP status and the code
// of its XML error, never the URL.
type PartError struct {
	Status int
	Code   string
}

func (e *PartError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("S3 answered %d %s", e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("S3 answered %d %s (%s)", e.Status, http.StatusText(e.Status), e.Code)
}

// s3Error is the body of an S3 error answer.
type s3Error struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

// expired reports whether S3 refused the request because its URL expired.
func (e s3Error) expired() bool {
	switch e.Code {
	case "ExpiredToken", "RequestExpired":
		return true
	case "AccessDenied":
		return strings.Contains(strings.ToLower(e.Message), "expired")
	}
	return false
}

// put sends one PUT of data to u. It returns the ETag of a 200, or the
// status and S3's error of another answer; a failure to get an answer is
// err, stripped of the URL.
func (up *upload) put(ctx context.Context, u *lakepb.PartUrl, data []byte) (string, int, s3Error, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u.GetUrl(), bytes.NewReader(data))
	if err != nil {
		return "", 0, s3Error{}, errors.New("the part URL does not parse")
	}
	req.ContentLength = int64(len(data))
	for k, v := range u.GetHeaders() {
		req.Header.Set(k, v)
	}
	resp, err := up.u.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error quotes the URL
		}
		return "", 0, s3Error{}, fmt.Errorf("PUT: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode == http.StatusOK {
		return resp.Header.Get("ETag"), resp.StatusCode, s3Error{}, nil
	}
	var e s3Error
	_ = xml.Unmarshal(body, &e) // no XML: the status says enough
	return "", resp.StatusCode, e, nil
}
