package meta

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/roles/meta/cluster"
	"github.com/lakedata/lake/wire"
)

// errNotLeading answers a mutation that reached a node which does not lead
// (any more): Unavailable, so clients retry elsewhere with the same
// commit_id.
var errNotLeading = fmt.Errorf("%w: this node does not lead the metadata cluster", wire.ErrNotLeader)

// canCommit is true while this node leads, can prove its lease, and has
// caught up since it won.
func (s *Service) canCommit() bool { return s.ready.Load() && s.cluster.Leading() }

// runCluster starts taking part in elections. A lone node's coordinator
// leads from the start: load has already caught up.
func (s *Service) runCluster() {
	s.wg.Add(1)
	go s.runSync()
	ctx, cancel := context.WithCancel(context.Background())
	s.clusterCancel = cancel
	go func() {
		defer close(s.clusterDone)
		s.cluster.Run(ctx, cluster.Hooks{
			Elected: s.elected,
			Deposed: func() { s.ready.Store(false) },
			Head:    s.sync.head,
			Resync:  s.sync.all,
		})
	}()
	s.cluster.Report(s.reg.counts())
}

// elected catches up every table from the stage log, so the new leader
// commits on top of everything its predecessor acknowledged.
func (s *Service) elected(ctx context.Context) error {
	if err := s.reg.sync(ctx); err != nil {
		return err
	}
	s.ready.Store(true)
	return nil
}

// reach makes sure t is at least at version min (nil: nothing to do),
// catching up from the stage log if this node is behind.
func (s *Service) reach(ctx context.Context, t *table, min *int64) error {
	if min == nil || t.row().Head >= *min {
		return nil
	}
	if err := s.reg.catchUp(ctx, t, -1); err != nil {
		return err
	}
	if head := t.row().Head; head < *min {
		return fmt.Errorf("%w: table %q has versions 0..%d, not %d", wire.ErrVersionNotFound, t.name, head, *min)
	}
	return nil
}

// syncQueue collects what a follower must catch up on, so announcements
// that arrive faster than the stage can be read are coalesced.
type syncQueue struct {
	mu      sync.Mutex
	heads   map[string]cluster.Head // table name → newest announced head
	full    bool                    // resync every table
	pending chan struct{}
}

func (q *syncQueue) init() {
	q.heads = map[string]cluster.Head{}
	q.pending = make(chan struct{}, 1)
}

func (q *syncQueue) poke() {
	select {
	case q.pending <- struct{}{}:
	default:
	}
}

func (q *syncQueue) head(h cluster.Head) {
	q.mu.Lock()
	if old, ok := q.heads[h.Name]; !ok || old.Version < h.Version {
		q.heads[h.Name] = h
	}
	q.mu.Unlock()
	q.poke()
}

func (q *syncQueue) all() {
	q.mu.Lock()
	q.full = true
	q.mu.Unlock()
	q.poke()
}

func (q *syncQueue) take() (map[string]cluster.Head, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	heads, full := q.heads, q.full
	q.heads, q.full = map[string]cluster.Head{}, false
	return heads, full
}

// runSync keeps a follower's index current with what the leader announces.
// On the leader the announced heads are already applied and cost nothing.
func (s *Service) runSync() {
	defer s.wg.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.sync.pending:
		}
		heads, full := s.sync.take()
		if full {
			if err := s.reg.sync(s.ctx); err != nil && s.ctx.Err() == nil {
				s.log.Warn("resync from the stage failed; retrying with the next announcement", "err", err)
				s.sync.all()
			}
			continue
		}
		for name, h := range heads {
			if err := s.applyHead(h); err != nil && s.ctx.Err() == nil {
				s.log.Warn("catch up an announced version", "table", name, "version", h.Version, "err", err)
			}
		}
	}
}

func (s *Service) applyHead(h cluster.Head) error {
	t := s.reg.lookup(h.Name)
	if t != nil && t.id == h.TableID && t.row().Head >= h.Version {
		return nil
	}
	if t == nil {
		var err error
		if t, err = s.reg.ensure(s.ctx, h.Name); err != nil {
			if errors.Is(err, objects.ErrNotFound) {
				return nil // announced before its catalog entry is readable
			}
			return err
		}
	}
	return s.reg.catchUp(s.ctx, t, h.Version)
}
