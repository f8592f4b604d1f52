package meta

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// fakeClock is the background verifier's clock in tests: sleeping moves it.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return ctx.Err()
}

// syncBuffer is a log sink for tests.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestBackgroundVerifierRecordsAndPaces: one pass records an ok object
// and two mismatches (with the bytes' real sum), logs the mismatches,
// takes exactly the bytes it read from its token bucket and sleeps as long
// as the rate asks; a second pass reads nothing again, and a new row with a
// wrong claim on a verified object is caught from its record alone.
func TestBackgroundVerifierRecordsAndPaces(t *testing.T) {
	f := newFixture(t)
	logs := &syncBuffer{}
	f.restartWith(func(c *Config) {
		noBackground(c)
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	f.createTable("clips")
	okBytes := randomBytes(t, 3*verifyChunk+17)
	ok := f.putObject("ok.bin", okBytes)
	liarBytes := randomBytes(t, 2*verifyChunk)
	liar := f.putObject("liar.bin", liarBytes)
	liar.SHA256 = sumHex([]byte("not these bytes"))
	truncated := f.putObject("truncated.bin", randomBytes(t, verifyChunk))
	f.appendRows("clips", []string{"ok", "liar", "truncated"}, []wire.FileValue{ok, liar, truncated})
	if err := os.Truncate(f.stagePath(truncated.Key), 100); err != nil {
		t.Fatal(err)
	}

	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	const rate = 1 << 20 // bytes per second
	bucket := newTokenBucket(rate, verifyChunk)
	bucket.now, bucket.sleep, bucket.last = clock.Now, clock.Sleep, clock.Now()
	v := newBackgroundVerifier(f.svc, bucket)
	ctx := context.Background()
	if err := v.pass(ctx); err != nil {
		t.Fatal(err)
	}

	r, found := f.svc.ix.Verified(ok.Key)
	if !found || !r.Match || r.SHA256 != ok.SHA256 || r.Size != ok.Size || r.VerifiedAt.IsZero() {
		t.Errorf("ok object: record %+v (found %t)", r, found)
	}
	r, found = f.svc.ix.Verified(liar.Key)
	if !found || r.Match || r.SHA256 != sumHex(liarBytes) || r.Problem != lakepb.VerifyProblem_VERIFY_PROBLEM_SHA256_DIFFERS.String() {
		t.Errorf("liar: record %+v (found %t), want a mismatch holding the bytes' own sum", r, found)
	}
	r, found = f.svc.ix.Verified(truncated.Key)
	if !found || r.Match || r.Size != 100 || r.Problem != lakepb.VerifyProblem_VERIFY_PROBLEM_SIZE_DIFFERS.String() {
		t.Errorf("truncated: record %+v (found %t)", r, found)
	}
	if _, found := f.svc.ix.Verified("objects/never/seen"); found {
		t.Error("a record for an object never verified")
	}

	read := ok.Size + liar.Size + 100
	if bucket.taken != read {
		t.Errorf("the bucket granted %d bytes, the pass read %d", bucket.taken, read)
	}
	wantSleep := time.Duration(float64(read-verifyChunk) / rate * float64(time.Second))
	if d := bucket.slept - wantSleep; math.Abs(float64(d)) > float64(time.Millisecond) {
		t.Errorf("slept %v for %d bytes at %d B/s with a %d-byte burst, want %v", bucket.slept, read, rate, verifyChunk, wantSleep)
	}
	out := logs.String()
	for _, key := range []string{liar.Key, truncated.Key} {
		if !strings.Contains(out, "object does not match its rows") || !strings.Contains(out, key) {
			t.Errorf("no warning naming %s:\n%s", key, out)
		}
	}
	if strings.Contains(out, ok.Key) {
		t.Errorf("a warning about the healthy object:\n%s", out)
	}

	// Nothing new: nothing read.
	if err := v.pass(ctx); err != nil {
		t.Fatal(err)
	}
	if bucket.taken != read {
		t.Errorf("a second pass read %d more bytes", bucket.taken-read)
	}
	// A new row naming the verified object with a wrong sum: caught from
	// the record, without reading the object again.
	lie := ok
	lie.SHA256 = sumHex([]byte("a later lie"))
	f.appendRows("clips", []string{"ok-again"}, []wire.FileValue{lie})
	if err := v.pass(ctx); err != nil {
		t.Fatal(err)
	}
	if bucket.taken != read {
		t.Errorf("checking a new claim on a verified object read %d bytes", bucket.taken-read)
	}
	if r, _ := f.svc.ix.Verified(ok.Key); r.Match || r.SHA256 != ok.SHA256 {
		t.Errorf("after a wrong claim on it: record %+v, want a mismatch keeping the bytes' sum", r)
	}
}

// TestBackgroundVerifierRunsOnTheLeader: with a rate set, the service
// verifies new objects by itself.
func TestBackgroundVerifierRunsOnTheLeader(t *testing.T) {
	f := newFixture(t)
	f.restartWith(func(c *Config) { c.VerifyRate = 1 << 30 })
	f.createTable("clips")
	v := f.putObject("a.bin", randomBytes(t, 1000))
	f.appendRows("clips", []string{"a"}, []wire.FileValue{v})
	deadline := time.Now().Add(15 * time.Second)
	for {
		if r, ok := f.svc.ix.Verified(v.Key); ok {
			if !r.Match || r.SHA256 != v.SHA256 {
				t.Fatalf("record %+v", r)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the background verifier recorded nothing within 15 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestVerifiedRecordsGoWithTheStage: records describe one stage's objects;
// an index rebuilt for another stage has none.
func TestVerifiedRecordsGoWithTheStage(t *testing.T) {
	f := newFixture(t)
	rec := verifyRecord{Size: 1, SHA256: sumHex([]byte("x")), VerifiedAt: time.Now(), Match: true}
	if err := f.svc.ix.putVerified("objects/a", rec); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.svc.ix.Verified("objects/a"); !ok {
		t.Fatal("the record was not kept")
	}
	if err := f.svc.ix.reset("file:///another/stage"); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.svc.ix.Verified("objects/a"); ok {
		t.Error("a record survived binding the index to another stage")
	}
}

func TestTokenBucketNeverGrantsMoreThanRateTimesTimePlusBurst(t *testing.T) {
	clock := &fakeClock{now: time.Unix(0, 0)}
	b := newTokenBucket(1000, 100)
	b.now, b.sleep, b.last = clock.Now, clock.Sleep, clock.Now()
	start := clock.Now()
	ctx := context.Background()
	for _, n := range []int{50, 50, 50, 1, 999, 3000, 7, 100, 100} {
		if err := b.take(ctx, n); err != nil {
			t.Fatal(err)
		}
		elapsed := clock.Now().Sub(start).Seconds()
		if limit := 1000*elapsed + 100; float64(b.taken) > limit+1e-6 {
			t.Fatalf("granted %d bytes in %.3f s, at most %.0f allowed", b.taken, elapsed, limit)
		}
	}
	// Idle time refills up to the burst, not beyond.
	clock.Sleep(ctx, time.Hour)
	before := b.slept
	if err := b.take(ctx, 100); err != nil || b.slept != before {
		t.Errorf("a take within the burst after idling slept %v (err %v)", b.slept-before, err)
	}
	if err := b.take(ctx, 100); err != nil || b.slept-before != 100*time.Millisecond {
		t.Errorf("a take beyond the burst slept %v, want 100ms", b.slept-before)
	}
	// A cancelled context ends the wait.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.take(cctx, 1000); !errors.Is(err, context.Canceled) {
		t.Errorf("take with a cancelled context: %v", err)
	}
}

// TestBackgroundPassFailsWithoutSkipping: a data file the stage cannot
// read fails the pass without marking its table walked, so the next pass
// (after the back-off) verifies its objects once the file is back.
func TestBackgroundPassFailsWithoutSkipping(t *testing.T) {
	f := newFixture(t)
	f.restartWith(noBackground)
	f.createTable("clips")
	v := f.putObject("a.bin", randomBytes(t, 100))
	f.appendRows("clips", []string{"a"}, []wire.FileValue{v})
	data := f.stagePath(f.snapshot("clips", nil).GetFiles()[0].GetKey())
	if err := os.Rename(data, data+".away"); err != nil {
		t.Fatal(err)
	}
	bv := newBackgroundVerifier(f.svc, newTokenBucket(1<<30, verifyChunk))
	ctx := context.Background()
	if err := bv.pass(ctx); err == nil {
		t.Fatal("a pass over a missing data file succeeded")
	}
	if _, ok := f.svc.ix.Verified(v.Key); ok {
		t.Fatal("an object was recorded from a failed pass")
	}
	if err := os.Rename(data+".away", data); err != nil {
		t.Fatal(err)
	}
	if err := bv.pass(ctx); err != nil {
		t.Fatal(err)
	}
	if r, ok := f.svc.ix.Verified(v.Key); !ok || !r.Match {
		t.Fatalf("after the data file came back: %+v, %t", r, ok)
	}
}

// TestBackgroundVerifierRecordsDedup: an object the verifier read whole
// and whose rows agree becomes dedup evidence (its own read), so a grant
// of that content answers it; an object whose row claims another sha256
// does not, under either sum.
func TestBackgroundVerifierRecordsDedup(t *testing.T) {
	f := newFixture(t)
	f.restartWith(noBackground)
	f.createTable("clips")
	okBytes, liarBytes := randomBytes(t, verifyChunk+5), randomBytes(t, 1234)
	ok := f.putObject("ok.bin", okBytes)
	liar := f.putObject("liar.bin", liarBytes)
	liar.SHA256 = sumHex([]byte("not these bytes"))
	f.appendRows("clips", []string{"ok", "liar"}, []wire.FileValue{ok, liar})
	grantOf := func(size int64, sum string) *lakepb.UploadGrantRequest {
		return &lakepb.UploadGrantRequest{Table: "clips", FileName: "again.bin", Size: size, Sha256: sum}
	}
	if g := f.grant(grantOf(ok.Size, ok.SHA256)); !isFreshGrant(g) {
		t.Fatalf("before verification: %v, want an ordinary grant", g)
	}

	v := newBackgroundVerifier(f.svc, newTokenBucket(1<<40, verifyChunk))
	if err := v.pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	g := f.grant(grantOf(ok.Size, ok.SHA256))
	if e := g.GetExisting(); e.GetKey() != ok.Key || e.GetSize() != ok.Size || e.GetSha256() != ok.SHA256 || e.GetUploadedAtUnixMicros() == 0 {
		t.Fatalf("after verification: %v, want existing %s", g, ok.Key)
	}
	f.appendRows("clips", []string{"ok-again"}, []wire.FileValue{fileValue(g.GetExisting())})
	for _, sum := range []string{liar.SHA256, sumHex(liarBytes)} {
		if g := f.grant(grantOf(liar.Size, sum)); !isFreshGrant(g) {
			t.Errorf("the liar's object under %s: %v, want an ordinary grant", sum, g)
		}
	}
}
