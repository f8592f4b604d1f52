package meta

import (
	"context"
	"errors"
	"fmt"
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
// object the table's current version names, signed with the stage's
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
// table's current version must name (wire.ErrRowNotFound otherwise). An
// expiry above Config.URLMaxExpiry is wire.ErrInvalidRequest, not
// shortened. On a stage without presigning (local) the answer is the
// object's file:// URL, which does not expire.
func (s *Service) URL(ctx context.Context, req *lakepb.ObjectUrlRequest) (*lakepb.ObjectUrl, error) {
	expires, err := s.urlCheck(req)
	if err != nil {
		return nil, err
	}
	t, err := s.table(ctx, req.GetTable())
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	files := slices.Clone(t.files)
	t.mu.Unlock()
	found, err := s.rowsName(ctx, t, files, req.GetKey())
	if err != nil {
		return nil, fmt.Errorf("meta: url of %s in %q: %w", req.GetKey(), t.name, err)
	}
	if !found {
		return nil, fmt.Errorf("%w: table %q, key %s", wire.ErrRowNotFound, t.name, req.GetKey())
	}
	if p, ok := s.store.(objects.Presigner); ok {
		at := time.Now().Add(expires)
		u, err := p.PresignGet(ctx, req.GetKey(), expires)
		if err != nil {
			return nil, fmt.Errorf("meta: url of %s in %q: %w", req.GetKey(), t.name, err)
		}
		return &lakepb.ObjectUrl{Url: u, ExpiresAtUnixMicros: at.UnixMicro()}, nil
	}
	if d := s.cfg.Discover; d.GetKind() == objects.KindLocal && d.GetLocalPath() != "" {
		u := url.URL{Scheme: "file", Path: path.Join(d.GetLocalPath(), req.GetKey())}
		return &lakepb.ObjectUrl{Url: u.String()}, nil
	}
	return nil, fmt.Errorf("%w: the stage %s hands out no URLs; use lake get", wire.ErrUnsupported, s.cfg.Discover.GetRootUri())
}

// urlCheck refuses a malformed request and returns the URL's expiry.
func (s *Service) urlCheck(req *lakepb.ObjectUrlRequest) (time.Duration, error) {
	if err := wire.ValidateTableName(req.GetTable()); err != nil {
		return 0, err
	}
	if err := wire.ValidateObjectKey(req.GetKey()); err != nil {
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

// rowsName reports whether a row of files (data files of t) has key in
// one of its FILE columns. It reads the data files until it finds one.
func (s *Service) rowsName(ctx context.Context, t *table, files []*lakepb.DataFile, key string) (bool, error) {
	fileCols := t.fileCols
	if len(fileCols) == 0 {
		return false, nil
	}
	for _, f := range files {
		err := s.readRows(ctx, t, f.GetKey(), func(rec arrow.RecordBatch) error {
			for _, c := range fileCols {
				values, valid, err := wire.FileValues(rec.Column(c))
				if err != nil {
					return err
				}
				for i, v := range values {
					if valid[i] && v.Key == key {
						return errKeyFound
					}
				}
			}
			return nil
		})
		if errors.Is(err, errKeyFound) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("data file %s: %w", f.GetKey(), err)
		}
	}
	return false, nil
}
