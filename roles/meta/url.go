package meta

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"path"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// Read URLs (DESIGN §12): lake.table.url hands out a URL that reads one
// object a row of the table names (at its current version or a past
// one), with the row's FILE value, signed with the stage's
// credentials, which never leave this service. Any node answers; none
// logs a URL or puts one in an error.

// DefaultURLExpiry is how long a read URL works when the caller does not
// say; DefaultURLMaxExpiry is the default of Config.URLMaxExpiry, the
// longest an S3 presigned URL can work.
const (
	DefaultURLExpiry    = 15 * time.Minute
	DefaultURLMaxExpiry = 7 * 24 * time.Hour
)

// errKeyFound stops a scan of the rows once the key is found.
var errKeyFound = errors.New("meta: key found")

// URL returns a URL that reads the object at req.key, which a row of the
// table's current version (or of req.version, time travel) must name
// (wire.ErrRowNotFound otherwise), with that row's FILE value to check a
// download by. A version never committed is wire.ErrVersionNotFound, an
// expired one wire.ErrVersionExpired, as for a snapshot. An expiry above
// Config.URLMaxExpiry is wire.ErrInvalidRequest, not shortened. On a
// stage without presigning (local) the answer is the object's file://
// URL, which does not expire.
func (s *Service) URL(ctx context.Context, req *lakepb.ObjectUrlRequest) (*lakepb.ObjectUrl, error) {
	expires, err := s.urlCheck(req)
	if err != nil {
		return nil, err
	}
	t, err := s.table(ctx, req.GetTable())
	if err != nil {
		return nil, err
	}
	files, err := s.urlFiles(ctx, t, req.Version)
	if err != nil {
		return nil, err
	}
	v, found, err := s.rowsName(ctx, t, files, req.GetKey())
	if err != nil {
		return nil, fmt.Errorf("meta: url of %s in %q: %w", req.GetKey(), t.name, err)
	}
	if !found {
		at := ""
		if req.Version != nil {
			at = fmt.Sprintf(" at version %d", *req.Version)
		}
		return nil, fmt.Errorf("%w: table %q%s, key %s", wire.ErrRowNotFound, t.name, at, req.GetKey())
	}
	file := uploadedFileOf(v)
	if p, ok := s.store.(objects.Presigner); ok {
		at := time.Now().Add(expires)
		var o objects.GetURLOptions
		if name := req.GetDownloadName(); name != "" {
			o.ContentDisposition = mime.FormatMediaType("attachment", map[string]string{"filename": name})
		}
		u, err := p.PresignGet(ctx, req.GetKey(), expires, o)
		if err != nil {
			return nil, fmt.Errorf("meta: url of %s in %q: %w", req.GetKey(), t.name, err)
		}
		return &lakepb.ObjectUrl{Url: u, ExpiresAtUnixMicros: at.UnixMicro(), File: file}, nil
	}
	if d := s.cfg.Discover; d.GetKind() == objects.KindLocal && d.GetLocalPath() != "" {
		u := url.URL{Scheme: "file", Path: path.Join(d.GetLocalPath(), req.GetKey())}
		return &lakepb.ObjectUrl{Url: u.String(), File: file}, nil
	}
	return nil, fmt.Errorf("%w: the stage %s hands out no URLs; use lake get", wire.ErrUnsupported, s.cfg.Discover.GetRootUri())
}

// urlFiles returns the data files of t at version, or at the latest when
// version is nil. A past version goes through Snapshot, so it is refused
// exactly as time travel refuses it (never committed, expired).
func (s *Service) urlFiles(ctx context.Context, t *table, version *int64) ([]*lakepb.DataFile, error) {
	if version == nil {
		t.mu.Lock()
		defer t.mu.Unlock()
		return slices.Clone(t.files), nil
	}
	snap, err := s.Snapshot(ctx, &lakepb.SnapshotRequest{Name: t.name, Version: version})
	if err != nil {
		return nil, err
	}
	return snap.GetFiles(), nil
}

// uploadedFileOf is the wire form of a row's FILE value.
func uploadedFileOf(v wire.FileValue) *lakepb.UploadedFile {
	f := &lakepb.UploadedFile{Key: v.Key, Size: v.Size, Sha256: v.SHA256, Etag: v.ETag, ContentType: v.ContentType}
	if !v.UploadedAt.IsZero() {
		f.UploadedAtUnixMicros = v.UploadedAt.UnixMicro()
	}
	return f
}

// urlCheck refuses a malformed request and returns the URL's expiry.
func (s *Service) urlCheck(req *lakepb.ObjectUrlRequest) (time.Duration, error) {
	if err := wire.ValidateTableName(req.GetTable()); err != nil {
		return 0, err
	}
	if err := wire.ValidateObjectKey(req.GetKey()); err != nil {
		return 0, err
	}
	if err := checkDownloadName(req.GetDownloadName()); err != nil {
		return 0, err
	}
	limit := s.cfg.URLMaxExpiry
	e := req.ExpiresMicros
	if e == nil {
		return min(DefaultURLExpiry, limit), nil
	}
	if *e < int64(time.Second/time.Microsecond) || *e > int64(limit/time.Microsecond) {
		return 0, fmt.Errorf("%w: a URL may work between 1s and %v (--url-max-expiry), not %v", wire.ErrInvalidRequest, limit, time.Duration(*e)*time.Microsecond)
	}
	return time.Duration(*e) * time.Microsecond, nil
}

// checkDownloadName refuses a download name that is not one plain file
// name: it ends up in a response header.
func checkDownloadName(name string) error {
	if len(name) > maxUploadNameLen {
		return fmt.Errorf("%w: a download name of at most %d bytes", wire.ErrInvalidRequest, maxUploadNameLen)
	}
	for _, c := range name {
		if c < 0x20 || c == 0x7f || c == '/' || c == '\\' {
			return fmt.Errorf("%w: a download name is one file name, without control characters or slashes", wire.ErrInvalidRequest)
		}
	}
	return nil
}

// rowsName returns the FILE value with key in one of the FILE columns of
// a row of files (data files of t), and whether there is one. It reads the
// data files until it finds it.
func (s *Service) rowsName(ctx context.Context, t *table, files []*lakepb.DataFile, key string) (wire.FileValue, bool, error) {
	var found wire.FileValue
	for _, f := range files {
		err := s.eachFileValue(ctx, t, f.GetKey(), func(_ arrow.RecordBatch, _, _ int, v wire.FileValue) error {
			if v.Key == key {
				found = v
				return errKeyFound
			}
			return nil
		})
		if errors.Is(err, errKeyFound) {
			return found, true, nil
		}
		if err != nil {
			return wire.FileValue{}, false, fmt.Errorf("data file %s: %w", f.GetKey(), err)
		}
	}
	return wire.FileValue{}, false, nil
}
