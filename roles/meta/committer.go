package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lakedata/lake/internal/failpoint"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/roles/meta/cluster"
	"github.com/lakedata/lake/wire"
)

// maxCommitAttempts bounds retries after losing the put-if-absent race for
// a version; losing that often means another node is committing, so we are
// not the leader any more.
const maxCommitAttempts = 8

// commitKind is one kind of change to a table. Appends are the first
// (appendKind, append.go); every kind commits the same way (DESIGN §3):
// admitted against the head, built into the next log record on top of
// it, put if absent, applied to the index and memory, then acknowledged.
//
// Compaction (compactKind, compact.go) is the second: its record removes
// files, which logRecord.Removes says and table.advance applies.
//
// To add a kind (delete, expire: DESIGN §11): write a
// commitKind whose build turns a group of its requests and the head (t's
// files and rows, under t.writeMu) into the next record, give commitReq
// the fields that kind's requests carry, and have the Service method
// that takes the request validate it and submit it with that kind. The
// committer gives it what appends have: one version at a time on top of
// the head, commit_id idempotency and expected_version, group commit of
// consecutive requests of the kind, catch-up and retry after a lost race,
// Unavailable once leadership is lost. A kind whose record removes files
// also teaches logRecord to say so and table.advance to apply it.
type commitKind struct {
	name string
	// build completes rec, the next version of t, from t's head for
	// group. rec comes with Format, TableID, Version, CommittedAt and the
	// group's commit marks; build sets what the kind changes (Files,
	// Rows). What it returns is written before the record is published.
	build func(ctx context.Context, c *committer, rec *logRecord, group []*commitReq) (staged, error)
}

// staged is what a record refers to and must exist before the record
// does (a data file), written by write while the record is prepared, and
// removed by discard when another writer took the version (nothing refers
// to it then).
type staged struct {
	write   func() error
	discard func()
	// settle, when set, runs once the record committed and is applied:
	// what write wrote is referenced from then on (gc.go's holds).
	settle func()
}

// nothingStaged is what a kind that writes nothing with its record
// stages: a compaction or delete wrote its files before it asked, an
// expiry has none.
var nothingStaged = staged{write: func() error { return nil }, discard: func() {}}

// commitReq asks a table's committer for one change.
type commitReq struct {
	kind     *commitKind
	ctx      context.Context
	commitID string
	expected *int64
	rows     int64           // rows the change brings, recorded with its commit_id
	done     chan commitResp // buffered: the committer never blocks on it

	recs    []arrow.RecordBatch // appendKind: the validated records
	compact *compaction         // compactKind: the files it swaps
	delete  *deletion           // deleteKind: the files it rewrites
	// expireKind: the oldest version to keep
	retainFrom int64
}

// commitResp is a request's answer: the version that holds it.
type commitResp struct {
	version   int64
	rows      int64
	duplicate bool // the commit_id had committed before
	err       error
}

func (r *commitReq) reply(res commitResp) { r.done <- res }
func (r *commitReq) fail(err error)       { r.reply(commitResp{err: err}) }

// committer is the single writer of one table: it takes the requests that
// queued up while the previous commit was in flight and commits each run
// of one kind as one version.
type committer struct {
	t        *table
	queue    chan *commitReq
	maxGroup int
	stop     context.Context // the service's: ends the committer

	reg     *registry
	stage   stageLog
	store   objects.Store
	ix      *index
	leading func() bool // canCommit
	holds   *dataHolds  // the service's: data files being written
	publish func(cluster.Head)
	// afterCommit hears of every version this committer made, after its
	// callers were answered (the background compactor listens).
	afterCommit func(*table, *commitKind)
	log         *slog.Logger
	metrics     *metrics // nil: not recorded
}

// submit queues req and waits for its answer, or for ctx. A caller that
// leaves may still have its change committed: a retry with the same
// commit_id finds it.
func (c *committer) submit(ctx context.Context, req *commitReq) commitResp {
	req.ctx, req.done = ctx, make(chan commitResp, 1)
	select {
	case c.queue <- req:
	case <-ctx.Done():
		return commitResp{err: ctx.Err()}
	case <-c.stop.Done():
		return commitResp{err: fmt.Errorf("%w: %w", wire.ErrNotLeader, ErrClosed)}
	}
	select {
	case resp := <-req.done:
		return resp
	case <-ctx.Done():
		return commitResp{err: ctx.Err()}
	}
}

func (c *committer) run() {
	for {
		var first *commitReq
		select {
		case first = <-c.queue:
		case <-c.stop.Done():
			c.drainClosed()
			return
		}
		group := []*commitReq{first}
	gather:
		for len(group) < c.maxGroup {
			select {
			case r := <-c.queue:
				group = append(group, r)
			default:
				break gather
			}
		}
		// Consecutive requests of one kind share a version; kinds
		// commit one after another in the order they came.
		for len(group) > 0 {
			n := 1
			for n < len(group) && group[n].kind == group[0].kind {
				n++
			}
			c.commitGroup(group[:n])
			group = group[n:]
		}
	}
}

func (c *committer) drainClosed() {
	for {
		select {
		case r := <-c.queue:
			r.fail(fmt.Errorf("%w: %w", wire.ErrNotLeader, ErrClosed))
		default:
			return
		}
	}
}

// commitGroup commits a group of one kind as one version (DESIGN §3).
func (c *committer) commitGroup(group []*commitReq) {
	t := c.t
	pending := make([]*commitReq, 0, len(group))
	for _, r := range group {
		if err := r.ctx.Err(); err != nil {
			r.fail(err) // the caller left before its commit started
			continue
		}
		pending = append(pending, r)
	}
	// The commit runs to the end even if callers leave: their retries with
	// the same commit_id then find it.
	ctx := context.WithoutCancel(c.stop)
	for attempt := 0; len(pending) > 0; attempt++ {
		if attempt == maxCommitAttempts {
			for _, r := range pending {
				r.fail(fmt.Errorf("%w: lost the race for the next version %d times", wire.ErrNotLeader, attempt))
			}
			return
		}
		// A deposed leader commits nothing more: this is what keeps a
		// node that was frozen past its lease from writing on wake-up.
		if !c.leading() {
			for _, r := range pending {
				r.fail(errNotLeading)
			}
			return
		}
		// writeMu covers admitting against the head and committing on top
		// of it; it is released for the catch-up, which takes it itself.
		t.writeMu.Lock()
		commit, twins := c.admit(pending)
		if len(commit) == 0 {
			t.writeMu.Unlock()
			return
		}
		began := time.Now()
		version, err := c.commitOnce(ctx, commit)
		t.writeMu.Unlock()
		if err == nil {
			c.metrics.committed(commit[0].kind.name, time.Since(began), len(commit))
		}
		if errors.Is(err, objects.ErrExists) {
			c.metrics.logConflict()
			// Another writer took the version: learn what it wrote, then
			// retry on top of it (its commits may include ours).
			if cerr := c.reg.catchUp(ctx, t, -1); cerr != nil {
				err = cerr
			} else {
				pending = append(commit, twinList(twins)...)
				continue
			}
		}
		if err != nil {
			c.log.Error("commit failed", "table", t.name, "kind", commit[0].kind.name, "err", err)
			failAll(commit, twins, err)
			return
		}
		if !c.leading() {
			// Committed, but leadership was lost meanwhile: stop
			// acknowledging at once. A retry with the same commit_id
			// gets this version from the new leader.
			failAll(commit, twins, errNotLeading)
			return
		}
		for _, r := range commit {
			r.reply(commitResp{version: version, rows: r.rows})
			for _, tw := range twins[r] {
				tw.reply(commitResp{version: version, rows: r.rows, duplicate: true})
			}
		}
		if c.afterCommit != nil {
			c.afterCommit(t, commit[0].kind)
		}
		return
	}
}

func failAll(commit []*commitReq, twins map[*commitReq][]*commitReq, err error) {
	for _, r := range commit {
		r.fail(err)
		for _, tw := range twins[r] {
			tw.fail(err)
		}
	}
}

func twinList(twins map[*commitReq][]*commitReq) []*commitReq {
	var out []*commitReq
	for _, ts := range twins {
		out = append(out, ts...)
	}
	return out
}

// committed answers a request whose commit_id already committed.
func (c *committer) committed(commitID string) (commitResp, bool, error) {
	if commitID == "" {
		return commitResp{}, false, nil
	}
	t := c.t
	v, rows, rowsKnown, ok, err := c.ix.committedVersion(t.id, commitID)
	if err != nil || !ok {
		return commitResp{}, false, err
	}
	res := commitResp{version: v, rows: rows, duplicate: true}
	if rowsKnown {
		return res, true, nil
	}
	// An index of an earlier release keeps the version only: the rows
	// are in its log record.
	err = c.reg.records(c.stop, t, v, v, false, func(r *logRecord) bool {
		for _, m := range r.Commits {
			if m.ID == commitID {
				res.rows = m.Rows
			}
		}
		return false
	})
	return res, true, err
}

// admit answers the requests that need no commit (already committed,
// expected_version differs) and returns the rest. Requests that repeat a
// commit_id of another in the group become its twins: they get the same
// version with duplicate = true. The caller holds t.writeMu.
func (c *committer) admit(pending []*commitReq) (commit []*commitReq, twins map[*commitReq][]*commitReq) {
	t := c.t
	head := t.row().Head
	byID := make(map[string]*commitReq)
	twins = make(map[*commitReq][]*commitReq)
	expectedTaken := false
	for _, r := range pending {
		if r.commitID != "" {
			if res, ok, err := c.committed(r.commitID); err != nil || ok {
				res.err = err
				r.reply(res)
				continue
			}
			if first, ok := byID[r.commitID]; ok {
				twins[first] = append(twins[first], r)
				continue
			}
		}
		if r.expected != nil {
			// Only one conditional request per version: after the first
			// commits, the table is no longer at the expected version.
			if *r.expected != head || expectedTaken {
				r.fail(fmt.Errorf("%w: table %q is at version %d, expected %d", wire.ErrVersionConflict, t.name, head, *r.expected))
				continue
			}
			expectedTaken = true
		}
		if r.commitID != "" {
			byID[r.commitID] = r
		}
		commit = append(commit, r)
	}
	return commit, twins
}

// commitOnce builds the next record of the group's kind on top of the
// head and puts it if absent, then applies it. It returns
// objects.ErrExists when another writer took the version. The caller
// holds t.writeMu.
func (c *committer) commitOnce(ctx context.Context, commit []*commitReq) (int64, error) {
	t := c.t
	version := t.row().Head + 1
	rec := &logRecord{Format: recordFormat, TableID: t.id, Version: version, CommittedAt: time.Now().UTC()}
	for _, r := range commit {
		if r.commitID != "" {
			rec.Commits = append(rec.Commits, commitMark{ID: r.commitID, Rows: r.rows})
		}
	}
	st, err := commit[0].kind.build(ctx, c, rec, commit)
	if err != nil {
		return 0, err
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		return 0, err
	}
	failpoint.Hit("meta-before-log-put")
	err = c.stage.putRecordAfter(ctx, rec, raw, st.write)
	if errors.Is(err, objects.ErrExists) {
		st.discard()
		return 0, err
	}
	if err != nil {
		// Ambiguous: the record may exist. Keep what was staged; the next
		// commit's put-if-absent tells which it was.
		return 0, fmt.Errorf("meta: commit version %d: %w", version, err)
	}
	if err := c.ix.apply(t.row(), [][]byte{raw}, []*logRecord{rec}); err != nil {
		// Durable in the stage but not indexed: the next commit loses the
		// race for this version and catches up; report it as ambiguous.
		return 0, fmt.Errorf("%w: version %d committed to the stage but not indexed: %v", wire.ErrNotLeader, version, err)
	}
	c.reg.advance(t, []*logRecord{rec})
	if st.settle != nil {
		st.settle()
	}
	c.publish(cluster.Head{TableID: t.id, Name: t.name, Version: version})
	return version, nil
}
