package meta

import (
	"context"
	"fmt"
	"time"

	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// Expiry (DESIGN §11) is a kind of version too: its record says that the
// versions before RetainFrom can no longer be read, so that garbage
// collection may free the data files and objects only they reference.
// Nothing is deleted by the expiry itself. RetainFrom only grows: a
// second expiry that would keep more is a no-op.

// kindExpire is the Kind of an expiry's log record.
const kindExpire = "expire"

var expireKind = &commitKind{name: kindExpire, build: buildExpire}

func buildExpire(_ context.Context, c *committer, rec *logRecord, group []*commitReq) (staged, error) {
	rec.Format, rec.Kind, rec.Rows = removesFormat, kindExpire, 0
	rec.RetainFrom = c.t.retained()
	for _, r := range group {
		rec.RetainFrom = max(rec.RetainFrom, r.retainFrom)
	}
	// The expiry's own version, one past the head, is never expired.
	rec.RetainFrom = min(rec.RetainFrom, rec.Version-1)
	return nothingStaged, nil
}

// retained is the oldest version of t that can be read.
func (t *table) retained() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.retainFrom
}

// Expire makes the versions of a table before the ones req keeps
// unreadable, as one new version. An expiry that keeps everything that is
// kept already commits nothing and answers the head.
func (s *Service) Expire(ctx context.Context, req *lakepb.ExpireRequest) (*lakepb.ExpireResult, error) {
	if err := expireCheck(req); err != nil {
		return nil, err
	}
	t, err := s.leaderTable(ctx, req.GetTable())
	if err != nil {
		return nil, err
	}
	before := t.retained()
	if res, ok, err := t.commits.committed(req.GetCommitId()); err != nil || ok {
		if err != nil {
			return nil, err
		}
		return &lakepb.ExpireResult{Table: t.name, Version: res.version, RetainFrom: t.retained(), Expired: res.rows, Duplicate: true}, nil
	}
	from, err := s.retainFrom(ctx, t, req, time.Now())
	if err != nil {
		return nil, err
	}
	if from <= before {
		return &lakepb.ExpireResult{Table: t.name, Version: t.row().Head, RetainFrom: before}, nil
	}
	resp := t.commits.submit(ctx, &commitReq{kind: expireKind, commitID: req.GetCommitId(), retainFrom: from, rows: from - before})
	if resp.err != nil {
		return nil, resp.err
	}
	after := t.retained()
	s.log.Info("expired versions", "table", t.name, "version", resp.version, "retain_from", after)
	return &lakepb.ExpireResult{Table: t.name, Version: resp.version, RetainFrom: after, Expired: after - before}, nil
}

// retainFrom is the oldest version req keeps, at now.
func (s *Service) retainFrom(ctx context.Context, t *table, req *lakepb.ExpireRequest, now time.Time) (int64, error) {
	head := t.row().Head
	if req.KeepLast != nil {
		return max(0, head-req.GetKeepLast()+1), nil
	}
	cutoff := now.Add(-time.Duration(req.GetOlderThanMicros()) * time.Microsecond)
	if cutoff.Before(t.createdAt) {
		return 0, nil
	}
	// The version current at the cutoff is kept, so time travel to the
	// cutoff still reads it.
	return s.versionAt(ctx, t, cutoff.UnixMicro())
}

func expireCheck(req *lakepb.ExpireRequest) error {
	if err := wire.ValidateTableName(req.GetTable()); err != nil {
		return err
	}
	switch {
	case (req.KeepLast == nil) == (req.OlderThanMicros == nil):
		return fmt.Errorf("%w: an expiry takes keep_last or older_than, one of them", wire.ErrInvalidRequest)
	case req.KeepLast != nil && req.GetKeepLast() < 1:
		return fmt.Errorf("%w: keep_last %d; the current version is always kept, so at least 1", wire.ErrInvalidRequest, req.GetKeepLast())
	case req.OlderThanMicros != nil && req.GetOlderThanMicros() < 0:
		return fmt.Errorf("%w: older_than %v is negative", wire.ErrInvalidRequest, time.Duration(req.GetOlderThanMicros())*time.Microsecond)
	case len(req.GetCommitId()) > wire.MaxCommitIDLen:
		return fmt.Errorf("%w: %d bytes, at most %d", wire.ErrInvalidCommitID, len(req.GetCommitId()), wire.MaxCommitIDLen)
	}
	return nil
}

// startExpirer expires, every so often, the versions of every table that
// stopped being current more than Config.Retention ago (0: never).
func (s *Service) startExpirer() {
	if s.cfg.Retention <= 0 {
		return
	}
	every := min(max(s.cfg.Retention/10, time.Second), time.Hour)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-tick.C:
			}
			if !s.canCommit() {
				continue
			}
			for _, t := range s.reg.all() {
				req := &lakepb.ExpireRequest{Table: t.name, OlderThanMicros: new(s.cfg.Retention.Microseconds())}
				if _, err := s.Expire(s.ctx, req); err != nil && s.ctx.Err() == nil {
					s.log.Warn("scheduled expiry failed", "table", t.name, "err", err)
				}
			}
		}
	}()
}
