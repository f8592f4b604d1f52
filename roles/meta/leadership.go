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
			Head:    s.heardHead,
			Resync:  s.sync.all,
		})
	}()
	s.cluster.Report(s.reg.counts())
}

// heardHead notes an announced head, for the follower's lag, and queues
// its catch-up.
func (s *Service) heardHead(h cluster.Head) {
	s.heard.note(h)
	s.sync.head(h)
}

// Ready is nil when this node can do its part, else why not (one line,
// for /readyz): a leader once it has caught up since it won; a follower
// while it knows the leader and has applied every head the leader
// announced.
func (s *Service) Ready() error {
	switch {
	case s.ctx.Err() != nil:
		return errors.New("closing")
	case s.canCommit():
		return nil
	case s.cluster.Leading():
		return errors.New("won the election; catching up from the stage log")
	case s.cluster.Leader() == "":
		return errors.New("no leader known")
	}
	if n := s.lag(); n > 0 {
		return fmt.Errorf("catching up: %d versions behind the leader", n)
	}
	return nil
}

// lag is how many announced versions this node has not applied yet; 0 on
// the leader, which announces what it applied.
func (s *Service) lag() int64 {
	if s.canCommit() {
		return 0
	}
	return s.heard.behind(func(name string) int64 {
		if t := s.reg.lookup(name); t != nil {
			return t.row().Head
		}
		return -1
	})
}

// heardHeads remembers the newest head announced for each table, so a
// follower knows how far behind the leader it is without asking anyone.
type heardHeads struct {
	mu    sync.Mutex
	heads map[string]int64 // table name → newest announced version
}

func (h *heardHeads) note(head cluster.Head) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.heads == nil {
		h.heads = map[string]int64{}
	}
	if v, ok := h.heads[head.Name]; !ok || v < head.Version {
		h.heads[head.Name] = head.Version
	}
}

// behind sums, over the announced tables, the versions past applied(name).
func (h *heardHeads) behind(applied func(name string) int64) int64 {
	h.mu.Lock()
	heads := make(map[string]int64, len(h.heads))
	for k, v := range h.heads {
		heads[k] = v
	}
	h.mu.Unlock()
	var n int64
	for name, v := range heads {
		if a := applied(name); a < v {
			n += v - a
		}
	}
	return n
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
