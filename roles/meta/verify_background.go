package meta

import (
	"context"
	"fmt"
	"time"

	"github.com/lakedata/lake/wire/lakepb"
)

// DefaultVerifyRate is the background verifier's default pace, 64 MiB/s.
// Hashing that costs about 6 % of one core here (SHA-256 ran at 1.1-1.2
// GB/s in BenchmarkVerify), it is a small share of a disk's or a bucket's
// bandwidth, and it still gets through a terabyte in under five hours, so
// a new object is verified long before anyone could plausibly want to
// deduplicate onto it at scale. Busy stages on slow disks can lower it; 0
// turns it off.
const DefaultVerifyRate = 64 << 20

// verifyPoll is how often an idle background verifier looks for tables
// that moved.
const verifyPoll = time.Second

// backgroundVerifier reads, on the leader, every object that the tables'
// rows point to, at a bounded rate, and records in the index what it read
// (index.Verified). It walks each table's log once per process: the data
// files a version adds are walked once, and an object read whole before
// (a record with its SHA-256) is never read again, because objects never
// change; rows that name it later are compared with the record instead.
// Objects that could not be read whole are read again after a restart or
// when this node leads again.
type backgroundVerifier struct {
	s      *Service
	bucket *tokenBucket
	walked map[string]int64 // table id → the version whose files were walked
	buf    []byte
}

func newBackgroundVerifier(s *Service, b *tokenBucket) *backgroundVerifier {
	return &backgroundVerifier{s: s, bucket: b, walked: map[string]int64{}, buf: make([]byte, verifyChunk)}
}

// startVerifier starts the background verifier when a rate is set; it
// stops with the service's committers.
func (s *Service) startVerifier() {
	if s.cfg.VerifyRate <= 0 {
		return
	}
	v := newBackgroundVerifier(s, newTokenBucket(float64(s.cfg.VerifyRate), verifyChunk))
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		v.run(s.ctx)
	}()
}

// verifyRetryMax bounds the wait after a failed pass (a data file the
// stage cannot read, say), which doubles from verifyPoll on each failure
// so a lasting fault logs a few lines an hour, not one a second.
const verifyRetryMax = 10 * time.Minute

func (v *backgroundVerifier) run(ctx context.Context) {
	wait := verifyPoll
	for {
		if v.s.canCommit() {
			if err := v.pass(ctx); err != nil && ctx.Err() == nil {
				wait = min(2*wait, verifyRetryMax)
				v.s.log.Warn("background verification failed; trying again later", "err", err, "retry_in", wait)
			} else {
				wait = verifyPoll
			}
		}
		if sleepCtx(ctx, wait) != nil {
			return
		}
	}
}

// pass checks the objects of every version added since the last pass. It
// returns early, without error, when this node stops leading: the new
// leader verifies.
func (v *backgroundVerifier) pass(ctx context.Context) error {
	for _, t := range v.s.reg.all() {
		head, from := t.row().Head, v.walked[t.id]
		if head <= from {
			continue
		}
		// The first pass over a table reads its current version's files,
		// not every version's: after a start from a checkpoint the log
		// before it is in the stage only.
		var files []fileAt
		var err error
		if from == 0 {
			files, err = v.s.verifyFiles(ctx, t, head, false)
		} else {
			files, err = v.s.addedFiles(ctx, t, from+1, head)
		}
		if err != nil {
			return err
		}
		objs, err := v.s.objectsOf(ctx, t, files)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if !v.s.canCommit() {
				return nil
			}
			if err := v.check(ctx, t, o); err != nil {
				return err
			}
		}
		v.walked[t.id] = head
	}
	return nil
}

// check verifies one object and records the result.
func (v *backgroundVerifier) check(ctx context.Context, t *table, o verifyObject) error {
	prev, had := v.s.ix.Verified(o.key)
	if had && prev.SHA256 != "" {
		// Read whole before: only new claims can disagree.
		if !prev.Match {
			return nil
		}
		r := objectRead{size: prev.Size, sha256: prev.SHA256}
		if p, c := firstProblem(o, r); p != lakepb.VerifyProblem_VERIFY_PROBLEM_UNSPECIFIED {
			prev.Match, prev.Problem = false, p.String()
			v.warn(t, o, c, r, p)
			return v.put(o.key, prev)
		}
		return nil
	}
	r, err := v.s.readObject(ctx, o.key, nil, v.buf, readLimits{pace: v.bucket.take})
	if err != nil {
		return err
	}
	rec := verifyRecord{Size: r.size, SHA256: r.sha256, VerifiedAt: time.Now().UTC(), Match: true}
	if p, c := firstProblem(o, r); p != lakepb.VerifyProblem_VERIFY_PROBLEM_UNSPECIFIED {
		rec.Match, rec.Problem = false, p.String()
		if !had || prev.Problem != rec.Problem {
			v.warn(t, o, c, r, p)
		}
	}
	if err := v.put(o.key, rec); err != nil {
		return err
	}
	if rec.Match {
		v.recordDedup(ctx, o.key, rec)
	}
	return nil
}

// recordDedup adds read evidence for an object read whole whose rows all
// agree with the read (dedup.go). A failure costs a later dedup only.
func (v *backgroundVerifier) recordDedup(ctx context.Context, key string, rec verifyRecord) {
	e, err := readEvidence(rec.Size, rec.SHA256)
	if err != nil {
		return
	}
	f, err := v.s.verifiedValue(ctx, key, rec.Size, rec.SHA256)
	if err != nil {
		v.s.log.Debug("not recording a verified object for dedup", "key", key, "err", err)
		return
	}
	v.s.recordDedup(e, f)
}

func (v *backgroundVerifier) put(key string, r verifyRecord) error {
	if err := v.s.ix.putVerified(key, r); err != nil {
		return fmt.Errorf("meta: record the verification of %s: %w", key, err)
	}
	return nil
}

// warn logs a mismatch: the table, the key and what is wrong, nothing
// from the stage's configuration.
func (v *backgroundVerifier) warn(t *table, o verifyObject, c verifyClaim, r objectRead, p lakepb.VerifyProblem) {
	args := []any{"table", t.name, "key", o.key, "problem", p.String(), "rows", len(o.claims),
		"claimed_size", c.size, "claimed_sha256", c.sha256}
	if r.problem == lakepb.VerifyProblem_VERIFY_PROBLEM_UNSPECIFIED {
		args = append(args, "size", r.size, "sha256", r.sha256)
	}
	if r.detail != "" {
		args = append(args, "detail", r.detail)
	}
	v.s.log.Warn("object does not match its rows", args...)
}

// firstProblem returns what r finds wrong with the first claim of o it
// contradicts, and that claim.
func firstProblem(o verifyObject, r objectRead) (lakepb.VerifyProblem, verifyClaim) {
	for _, c := range o.claims {
		if p := r.problemFor(c); p != lakepb.VerifyProblem_VERIFY_PROBLEM_UNSPECIFIED {
			return p, c
		}
	}
	return lakepb.VerifyProblem_VERIFY_PROBLEM_UNSPECIFIED, verifyClaim{}
}

// tokenBucket paces reads to rate bytes per second, in bursts of up to
// burst bytes. A take may overdraw it; the taker then sleeps until the
// bucket is back at zero, so over any stretch at most rate × time + burst
// bytes are granted, whatever the sizes of the takes. It is used by one
// goroutine.
type tokenBucket struct {
	rate, burst float64
	now         func() time.Time
	sleep       func(ctx context.Context, d time.Duration) error

	tokens float64
	last   time.Time
	// Accounting: bytes granted and time slept so far.
	taken int64
	slept time.Duration
}

func newTokenBucket(rate, burst float64) *tokenBucket {
	return &tokenBucket{rate: rate, burst: burst, tokens: burst, now: time.Now, last: time.Now(), sleep: sleepCtx}
}

// take accounts for n bytes read and waits as long as the rate requires.
func (b *tokenBucket) take(ctx context.Context, n int) error {
	now := b.now()
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	b.tokens -= float64(n)
	b.taken += int64(n)
	if b.tokens >= 0 {
		return nil
	}
	d := time.Duration(-b.tokens / b.rate * float64(time.Second))
	b.slept += d
	return b.sleep(ctx, d)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
