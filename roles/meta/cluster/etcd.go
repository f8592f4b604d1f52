package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/lakedata/lake/wire"
)

// EtcdConfig configures an Etcd coordinator.
type EtcdConfig struct {
	// Endpoints are etcd's client URLs.
	Endpoints []string
	// Advertise is the address other nodes and query nodes reach this
	// node's Flight service at; it is the election value.
	Advertise string
	// TTL is the lease TTL: how long a dead leader keeps its leadership.
	// etcd counts it in whole seconds.
	TTL time.Duration
	// Prefix is the root of lake's keys in etcd.
	Prefix string
	// DialTimeout bounds each attempt to reach etcd.
	DialTimeout time.Duration
	Logger      *slog.Logger
}

// DefaultEtcdConfig returns an EtcdConfig with every tunable at its default.
func DefaultEtcdConfig() EtcdConfig {
	return EtcdConfig{TTL: 5 * time.Second, Prefix: "/lake", DialTimeout: 2 * time.Second}
}

// Validate returns every field error at once.
func (c EtcdConfig) Validate() error {
	var errs []error
	if len(c.Endpoints) == 0 {
		errs = append(errs, errors.New("cluster: at least one etcd endpoint is required"))
	}
	if c.Advertise == "" {
		errs = append(errs, errors.New("cluster: Advertise is required"))
	}
	if c.TTL < time.Second || c.TTL%time.Second != 0 {
		errs = append(errs, fmt.Errorf("cluster: TTL must be a whole number of seconds, at least 1s; got %v", c.TTL))
	}
	if c.Prefix == "" || !strings.HasPrefix(c.Prefix, "/") || strings.HasSuffix(c.Prefix, "/") {
		errs = append(errs, fmt.Errorf("cluster: Prefix must start with / and not end with it; got %q", c.Prefix))
	}
	if c.DialTimeout <= 0 {
		errs = append(errs, fmt.Errorf("cluster: DialTimeout must be positive, got %v", c.DialTimeout))
	}
	return errors.Join(errs...)
}

// Etcd is a Coordinator backed by etcd: leadership through a
// concurrency.Election under <prefix>/leader, members under
// <prefix>/members/<addr> (bound to the node's lease, so a dead node
// disappears with it), announced heads under <prefix>/heads/<table-id>.
type Etcd struct {
	cfg     EtcdConfig
	cli     *clientv3.Client
	log     *slog.Logger
	base    time.Time // origin of the monotonic clock readings below
	started time.Time

	leading    atomic.Bool
	validUntil atomic.Int64 // ns since base before which the lease is provably alive
	leader     atomic.Pointer[string]

	mu      sync.Mutex
	lease   clientv3.LeaseID // of the current term, 0 between terms
	fence   *clientv3.Cmp    // true while this node's election key is the leader's
	heads   map[string]Head  // announcements not yet published
	report  Report
	dirty   bool // report not yet published
	notify  chan struct{}
	resign  chan struct{} // closed by Close
	stopRun context.CancelFunc
	runDone chan struct{}
}

var _ Coordinator = (*Etcd)(nil)

// NewEtcd connects to etcd lazily: it does not wait for etcd to answer, so
// a node starts (and serves reads) while etcd is down.
func NewEtcd(cfg EtcdConfig) (*Etcd, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: cfg.Endpoints, DialTimeout: cfg.DialTimeout,
		DialKeepAliveTime: cfg.TTL / 2, DialKeepAliveTimeout: cfg.DialTimeout,
		Logger: zap.NewNop(), // failures reach the caller as errors
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: etcd client: %w", err)
	}
	e := &Etcd{
		cfg: cfg, cli: cli, log: logger, base: time.Now(), started: time.Now().UTC(),
		heads: map[string]Head{}, notify: make(chan struct{}, 1), resign: make(chan struct{}),
		runDone: make(chan struct{}),
	}
	empty := ""
	e.leader.Store(&empty)
	return e, nil
}

func (e *Etcd) now() int64 { return int64(time.Since(e.base)) }

func (e *Etcd) key(parts ...string) string { return e.cfg.Prefix + "/" + strings.Join(parts, "/") }

// Leading is true while this node leads and its lease is provably alive.
func (e *Etcd) Leading() bool { return e.leading.Load() && e.now() < e.validUntil.Load() }

// Leader is the address of the current leader as last observed.
func (e *Etcd) Leader() string {
	if e.Leading() {
		return e.cfg.Advertise
	}
	return *e.leader.Load()
}

func (e *Etcd) Self() string { return e.cfg.Advertise }

func (e *Etcd) poke() {
	select {
	case e.notify <- struct{}{}:
	default:
	}
}

// PublishHead queues h for the followers; only a leader announces.
func (e *Etcd) PublishHead(h Head) {
	if !e.leading.Load() {
		return
	}
	e.mu.Lock()
	if old, ok := e.heads[h.TableID]; !ok || old.Version < h.Version {
		e.heads[h.TableID] = h
	}
	e.mu.Unlock()
	e.poke()
}

func (e *Etcd) Report(r Report) {
	e.mu.Lock()
	e.report, e.dirty = r, true
	e.mu.Unlock()
	e.poke()
}

// Run campaigns, term after term, until ctx ends or Close is called.
func (e *Etcd) Run(ctx context.Context, h Hooks) {
	ctx, cancel := context.WithCancel(ctx)
	e.mu.Lock()
	e.stopRun = cancel
	e.mu.Unlock()
	defer close(e.runDone)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); e.observeLeader(ctx) }()
	go func() { defer wg.Done(); e.watchHeads(ctx, h) }()
	go func() { defer wg.Done(); e.publish(ctx) }()
	defer wg.Wait()
	pause := 100 * time.Millisecond
	for ctx.Err() == nil {
		began := time.Now()
		err := e.term(ctx, h)
		if ctx.Err() != nil {
			return
		}
		if time.Since(began) > e.cfg.TTL {
			pause = 100 * time.Millisecond
		}
		e.log.Warn("not in the election; joining it again", "err", err, "pause", pause)
		if !wait(ctx, &pause) {
			return
		}
	}
}

// wait sleeps *pause, then doubles it (up to 2 s) for the next failure. It
// returns false when ctx ended first.
func wait(ctx context.Context, pause *time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(*pause):
	}
	*pause = min(2**pause, 2*time.Second)
	return true
}

// term is one lease: register, campaign, lead until the lease is lost.
func (e *Etcd) term(ctx context.Context, h Hooks) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sent := e.now()
	gctx, gcancel := context.WithTimeout(ctx, e.cfg.DialTimeout)
	grant, err := e.cli.Grant(gctx, int64(e.cfg.TTL/time.Second))
	gcancel()
	if err != nil {
		return fmt.Errorf("grant a lease: %w", err)
	}
	e.validUntil.Store(sent + e.validity())
	sess, err := concurrency.NewSession(e.cli, concurrency.WithLease(grant.ID), concurrency.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("session: %w", err)
	}
	defer func() {
		// Revoking the lease deletes our election and member keys: a
		// follower takes over now instead of after the TTL.
		rctx, rcancel := context.WithTimeout(context.Background(), e.cfg.DialTimeout)
		defer rcancel()
		if _, err := e.cli.Revoke(rctx, grant.ID); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			e.log.Warn("revoke the lease", "err", err)
		}
		sess.Close()
	}()
	e.mu.Lock()
	e.lease, e.dirty = grant.ID, true
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.lease = 0
		e.mu.Unlock()
	}()
	e.poke()
	lost := make(chan error, 1)
	go e.keepAlive(ctx, grant.ID, lost)

	election := concurrency.NewElection(sess, e.key("leader"))
	campaign := make(chan error, 1)
	go func() { campaign <- election.Campaign(ctx, e.cfg.Advertise) }()
	select {
	case err := <-campaign:
		if err != nil {
			return fmt.Errorf("campaign: %w", err)
		}
	case err := <-lost:
		return err
	case <-e.resign:
		return errors.New("closing")
	}
	fence := clientv3.Compare(clientv3.CreateRevision(election.Key()), "=", election.Rev())
	e.log.Info("won the election; catching up from the stage log", "addr", e.cfg.Advertise, "rev", election.Rev())
	if h.Elected != nil {
		if err := h.Elected(ctx); err != nil {
			return fmt.Errorf("catch up after winning: %w", err)
		}
	}
	e.mu.Lock()
	e.fence = &fence
	e.mu.Unlock()
	e.leading.Store(true)
	e.log.Info("leading", "addr", e.cfg.Advertise)
	select {
	case err = <-lost:
	case <-ctx.Done():
		err = ctx.Err()
	case <-e.resign:
		err = errors.New("resigned")
	}
	e.leading.Store(false)
	e.mu.Lock()
	e.fence = nil
	clear(e.heads)
	e.mu.Unlock()
	e.log.Warn("stopped leading", "addr", e.cfg.Advertise, "reason", err)
	if h.Deposed != nil {
		h.Deposed()
	}
	return err
}

// validity is how long after a keep-alive was sent the lease is surely
// still alive in etcd: its TTL counts from when etcd received it, which is
// later; the 10 % margin covers clock rate differences.
func (e *Etcd) validity() int64 { return int64(e.cfg.TTL) * 9 / 10 }

// keepAlive renews the lease every TTL/3 and records, for Leading, how
// long it provably lives. It reports on lost when the lease is gone or can
// no longer be proven alive.
func (e *Etcd) keepAlive(ctx context.Context, id clientv3.LeaseID, lost chan<- error) {
	interval := e.cfg.TTL / 3
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sent := e.now()
		kctx, cancel := context.WithTimeout(ctx, interval)
		_, err := e.cli.KeepAliveOnce(kctx, id)
		cancel()
		switch {
		case err == nil:
			e.validUntil.Store(sent + e.validity())
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			e.validUntil.Store(0)
			lost <- errors.New("the lease expired")
			return
		case e.now() >= e.validUntil.Load():
			lost <- fmt.Errorf("the lease cannot be renewed: %w", err)
			return
		}
	}
}

// observeLeader keeps Leader current: the leader is the election key with
// the lowest create revision.
func (e *Etcd) observeLeader(ctx context.Context) {
	prefix := e.key("leader") + "/"
	pause := 100 * time.Millisecond
	for ctx.Err() == nil {
		gctx, cancel := context.WithTimeout(ctx, e.cfg.DialTimeout)
		resp, err := e.cli.Get(gctx, prefix, clientv3.WithFirstCreate()...)
		cancel()
		if err != nil {
			empty := ""
			e.leader.Store(&empty)
			if !wait(ctx, &pause) {
				return
			}
			continue
		}
		pause = 100 * time.Millisecond
		addr := ""
		if len(resp.Kvs) > 0 {
			addr = string(resp.Kvs[0].Value)
		}
		e.leader.Store(&addr)
		// Wait for any change of the election keys, then read again.
		wctx, wcancel := context.WithCancel(ctx)
		wch := e.cli.Watch(clientv3.WithRequireLeader(wctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
		for wr := range wch {
			if wr.Err() != nil || len(wr.Events) > 0 {
				break
			}
		}
		wcancel()
	}
}

// watchHeads hands every announced head to h.Head, resuming where it left
// off; after a gap it asks for a full resync.
func (e *Etcd) watchHeads(ctx context.Context, h Hooks) {
	prefix := e.key("heads") + "/"
	pause := 100 * time.Millisecond
	for ctx.Err() == nil {
		gctx, cancel := context.WithTimeout(ctx, e.cfg.DialTimeout)
		resp, err := e.cli.Get(gctx, prefix, clientv3.WithPrefix())
		cancel()
		if err != nil {
			if !wait(ctx, &pause) {
				return
			}
			continue
		}
		pause = 100 * time.Millisecond
		if h.Resync != nil {
			h.Resync()
		}
		for _, kv := range resp.Kvs {
			e.deliver(h, kv.Value)
		}
		wch := e.cli.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
		for wr := range wch {
			if err := wr.Err(); err != nil {
				e.log.Warn("head watch ended; resyncing", "err", err)
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypePut {
					e.deliver(h, ev.Kv.Value)
				}
			}
		}
	}
}

func (e *Etcd) deliver(h Hooks, raw []byte) {
	head, err := DecodeHead(raw)
	if err != nil {
		e.log.Warn("ignoring a head announcement", "err", err)
		return
	}
	if h.Head != nil {
		h.Head(head)
	}
}

// ErrMalformed: a value read from etcd is not what lake writes there.
var ErrMalformed = errors.New("cluster: malformed value in etcd")

// DecodeHead decodes and checks a head announcement: anyone who can write
// to etcd can put bytes there, and a follower acts on them.
func DecodeHead(raw []byte) (Head, error) {
	var h Head
	if err := json.Unmarshal(raw, &h); err != nil {
		return Head{}, fmt.Errorf("%w: head: %v", ErrMalformed, err)
	}
	if err := wire.ValidateTableName(h.Name); err != nil {
		return Head{}, fmt.Errorf("%w: head: %v", ErrMalformed, err)
	}
	if _, err := uuid.Parse(h.TableID); err != nil || h.Version < 0 {
		return Head{}, fmt.Errorf("%w: head of %q: table id %q, version %d", ErrMalformed, h.Name, h.TableID, h.Version)
	}
	return h, nil
}

// decodeMember decodes a member key's value.
func decodeMember(raw []byte) (member, error) {
	var m member
	if err := json.Unmarshal(raw, &m); err != nil {
		return member{}, fmt.Errorf("%w: member: %v", ErrMalformed, err)
	}
	if m.Addr == "" || m.Report.Tables < 0 || m.Report.Versions < 0 {
		return member{}, fmt.Errorf("%w: member %q", ErrMalformed, m.Addr)
	}
	return m, nil
}

// member is the value of a node's member key.
type member struct {
	Addr    string    `json:"addr"`
	Report  Report    `json:"report"`
	Started time.Time `json:"started"`
	Updated time.Time `json:"updated"`
}

// Announcements go out at most every headEvery, coalesced; a node's report
// at most every reportEvery (each is an fsync'd etcd write, and a report
// only feeds lake status).
const (
	headEvery   = 20 * time.Millisecond
	reportEvery = 500 * time.Millisecond
)

// publish writes queued heads (fenced by the leader's election key, so a
// deposed leader's announcement never lands) and this node's report.
func (e *Etcd) publish(ctx context.Context) {
	tick := time.NewTicker(reportEvery)
	defer tick.Stop()
	var reported time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.notify:
		case <-tick.C:
		}
		e.mu.Lock()
		var heads []Head
		for _, h := range e.heads {
			heads = append(heads, h)
		}
		clear(e.heads)
		fence, lease, report := e.fence, e.lease, e.report
		sendReport := e.dirty && lease != 0 && time.Since(reported) >= reportEvery
		if sendReport {
			e.dirty = false
		}
		e.mu.Unlock()
		if fence != nil {
			e.putHeads(ctx, *fence, heads)
		}
		if sendReport {
			e.putMember(ctx, lease, report)
			reported = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(headEvery):
		}
	}
}

func (e *Etcd) putHeads(ctx context.Context, fence clientv3.Cmp, heads []Head) {
	const perTxn = 100 // etcd refuses transactions of more than 128 operations
	for len(heads) > 0 {
		n := min(len(heads), perTxn)
		ops := make([]clientv3.Op, 0, n)
		for _, h := range heads[:n] {
			raw, _ := json.Marshal(h)
			ops = append(ops, clientv3.OpPut(e.key("heads", h.TableID), string(raw)))
		}
		heads = heads[n:]
		tctx, cancel := context.WithTimeout(ctx, e.cfg.DialTimeout)
		resp, err := e.cli.Txn(tctx).If(fence).Then(ops...).Commit()
		cancel()
		if err != nil {
			e.log.Warn("announce heads", "err", err)
			return
		}
		if !resp.Succeeded {
			return // no longer the leader: the new one announces
		}
	}
}

func (e *Etcd) putMember(ctx context.Context, lease clientv3.LeaseID, r Report) {
	raw, _ := json.Marshal(member{Addr: e.cfg.Advertise, Report: r, Started: e.started, Updated: time.Now().UTC()})
	pctx, cancel := context.WithTimeout(ctx, e.cfg.DialTimeout)
	defer cancel()
	if _, err := e.cli.Put(pctx, e.key("members", e.cfg.Advertise), string(raw), clientv3.WithLease(lease)); err != nil {
		e.log.Warn("publish membership", "err", err)
		e.mu.Lock()
		e.dirty = true // try again with the next report
		e.mu.Unlock()
	}
}

// Members reads the member keys and the election's current leader.
func (e *Etcd) Members(ctx context.Context) ([]Member, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.DialTimeout)
	defer cancel()
	resp, err := e.cli.Get(ctx, e.key("members")+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("cluster: read members from etcd: %w", err)
	}
	lresp, err := e.cli.Get(ctx, e.key("leader")+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return nil, fmt.Errorf("cluster: read the leader from etcd: %w", err)
	}
	leader := ""
	if len(lresp.Kvs) > 0 {
		leader = string(lresp.Kvs[0].Value)
	}
	out := make([]Member, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		m, err := decodeMember(kv.Value)
		if err != nil {
			e.log.Warn("ignoring a member entry", "key", string(kv.Key), "err", err)
			continue
		}
		out = append(out, Member{Addr: m.Addr, Leader: m.Addr == leader, Report: m.Report, Started: m.Started, Updated: m.Updated})
	}
	return out, nil
}

// Close resigns (by revoking the lease) and stops Run, then closes the
// etcd client.
func (e *Etcd) Close(ctx context.Context) error {
	e.leading.Store(false)
	e.mu.Lock()
	select {
	case <-e.resign:
	default:
		close(e.resign)
	}
	stop := e.stopRun
	e.mu.Unlock()
	if stop != nil {
		stop()
		select {
		case <-e.runDone:
		case <-ctx.Done():
		}
	}
	return e.cli.Close()
}
