package cluster

import (
	"context"
	"sync"
	"time"
)

// Single is the Coordinator of a lone metadata node: it is the leader from
// the start and for as long as it runs.
type Single struct {
	started time.Time

	mu      sync.Mutex
	addr    string
	leading bool
	report  Report
	updated time.Time
}

var _ Coordinator = (*Single)(nil)

// NewSingle returns the Coordinator of a node that leads from the start:
// its caller has caught up before creating it, so Run never calls Elected.
func NewSingle(addr string) *Single {
	return &Single{addr: addr, started: time.Now().UTC(), leading: true}
}

// Run leads until ctx ends.
func (s *Single) Run(ctx context.Context, _ Hooks) {
	<-ctx.Done()
	s.mu.Lock()
	s.leading = false
	s.mu.Unlock()
}

func (s *Single) Leading() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leading
}

// SetAddr names the node once its listener is bound: the service builds
// its coordinator before it loads its index, and binds the port only after
// that, so no caller's connection hangs on a node that is still loading.
func (s *Single) SetAddr(addr string) {
	s.mu.Lock()
	s.addr = addr
	s.mu.Unlock()
}

func (s *Single) Leader() string { return s.Self() }

func (s *Single) Self() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

func (s *Single) PublishHead(Head) {}
func (s *Single) Close(context.Context) error {
	s.mu.Lock()
	s.leading = false
	s.mu.Unlock()
	return nil
}

func (s *Single) Report(r Report) {
	s.mu.Lock()
	s.report, s.updated = r, time.Now().UTC()
	s.mu.Unlock()
}

func (s *Single) Members(context.Context) ([]Member, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return []Member{{Addr: s.addr, Leader: s.leading, Report: s.report, Started: s.started, Updated: s.updated}}, nil
}
