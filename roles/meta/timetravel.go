package meta

import (
	"context"
	"fmt"
	"time"

	"github.com/lakedata/lake/wire"
)

// maxClockStepBack bounds how far the commit time of a version may lie
// before that of an earlier version. Each leader stamps a version with its
// own clock (time.Now at commit), so the times are in order while one node
// leads, but a new leader whose clock is behind, or a wall clock stepped
// back, can make them go backwards across a leader change. Clocks of the
// nodes of one cluster are expected to agree far better than this.
const maxClockStepBack = time.Minute

// versionAt is the newest version of t committed at or before atMicros
// (Unix microseconds, UTC). It reads O(log versions) records plus those
// committed within maxClockStepBack after atMicros, never the whole log.
func (s *Service) versionAt(ctx context.Context, t *table, atMicros int64) (int64, error) {
	if now := time.Now(); atMicros > now.UnixMicro() {
		return 0, fmt.Errorf("%w: %s is after now (%s)", wire.ErrTimestampInFuture,
			time.UnixMicro(atMicros).UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano))
	}
	head := t.row().Head
	scan := func(from, to int64, fn func(v, committed int64) bool) error {
		return s.reg.records(ctx, t, from, to, false, func(r *logRecord) bool {
			return fn(r.Version, r.CommittedAt.UnixMicro())
		})
	}
	v, ok, err := newestAtOrBefore(head, atMicros, maxClockStepBack.Microseconds(), scan)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("%w: table %q was created at %s, after %s", wire.ErrVersionNotFound, t.name,
			t.createdAt.UTC().Format(time.RFC3339Nano), time.UnixMicro(atMicros).UTC().Format(time.RFC3339Nano))
	}
	return v, nil
}

// newestAtOrBefore returns the newest version v in [0, head] whose commit
// time is at or before at. scan calls fn for the versions from..to, in
// order, until fn returns false.
//
// Commit times are in order but for steps back of at most stepBack (see
// maxClockStepBack). A binary search finds a version c committed at or
// before at whose successor committed after it. Any newer version w
// committed at or before at lies in a run of versions committed at or
// before at+stepBack that starts right after c: every u between c and w
// committed at most stepBack after w. So scanning on from c while the
// times stay within at+stepBack finds the answer, in the common case a
// handful of records.
func newestAtOrBefore(head, at, stepBack int64, scan func(from, to int64, fn func(v, committed int64) bool) error) (int64, bool, error) {
	timeOf := func(v int64) (int64, error) {
		var got int64
		err := scan(v, v, func(_, committed int64) bool { got = committed; return false })
		return got, err
	}
	tHead, err := timeOf(head)
	if err != nil || tHead <= at {
		return head, err == nil, err
	}
	found := int64(-1)
	t0, err := timeOf(0)
	if err != nil {
		return 0, false, err
	}
	if t0 <= at {
		lo, hi := int64(0), head // committed(lo) <= at < committed(hi)
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			tm, err := timeOf(mid)
			if err != nil {
				return 0, false, err
			}
			if tm <= at {
				lo = mid
			} else {
				hi = mid
			}
		}
		found = lo
	}
	err = scan(found+1, head, func(v, committed int64) bool {
		if committed > at+stepBack {
			return false
		}
		if committed <= at {
			found = v
		}
		return true
	})
	return found, found >= 0 && err == nil, err
}

// checkRetained refuses a version whose data files expiry may have
// removed (expire.go), before any of them is read: wire.ErrVersionExpired,
// naming the table and the version.
func (s *Service) checkRetained(t *table, version int64) error {
	if retainedFrom := t.retained(); version < retainedFrom {
		return fmt.Errorf("%w: table %q version %d has expired; the oldest retained version is %d",
			wire.ErrVersionExpired, t.name, version, retainedFrom)
	}
	return nil
}

// committedAt is when version of t committed, in Unix microseconds.
func (s *Service) committedAt(ctx context.Context, t *table, version int64) (int64, error) {
	var at int64
	err := s.reg.records(ctx, t, version, version, false, func(r *logRecord) bool {
		at = r.CommittedAt.UnixMicro()
		return false
	})
	return at, err
}
