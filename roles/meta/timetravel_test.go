package meta

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

func (f *fixture) snapshotAt(table string, atMicros int64) (*lakepb.Snapshot, error) {
	var snap lakepb.Snapshot
	err := flightrpc.Action(context.Background(), f.fc, wire.ActionSnapshot, &lakepb.SnapshotRequest{Name: table, AtUnixMicros: &atMicros}, &snap)
	return &snap, wire.FromStatus(err)
}

// expectedAt is, by brute force over the history, the newest version
// committed at or before at, or -1.
func expectedAt(h *lakepb.History, at int64) int64 {
	best := int64(-1)
	for _, v := range h.Versions {
		if v.CommittedAtUnixMicros <= at && v.Version > best {
			best = v.Version
		}
	}
	return best
}

// checkTimeTravel asks for the snapshot at, just before and just after
// every version's commit time and compares it with the snapshot of the
// version the history says was current then.
func checkTimeTravel(t *testing.T, f *fixture, table string) {
	t.Helper()
	h := f.history(table)
	for _, vi := range h.Versions {
		for _, at := range []int64{vi.CommittedAtUnixMicros - 1, vi.CommittedAtUnixMicros, vi.CommittedAtUnixMicros + 1} {
			want := expectedAt(h, at)
			got, err := f.snapshotAt(table, at)
			if want < 0 {
				if !errors.Is(err, wire.ErrVersionNotFound) {
					t.Fatalf("at %d, before the creation: %v, want ErrVersionNotFound", at, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("at %d: %v", at, err)
			}
			byVersion := f.snapshot(table, &want)
			if got.Version != want || !proto.Equal(got, byVersion) {
				t.Fatalf("at %d: version %d with %d files, want version %d with %d files", at, got.Version, len(got.Files), want, len(byVersion.Files))
			}
		}
	}
}

func TestSnapshotAtTimestamp(t *testing.T) {
	f := newFixture(t)
	info := f.createTable("clips")
	for i := range 12 {
		if _, err := f.appendOne("clips", nameN(i), ""); err != nil {
			t.Fatal(err)
		}
	}
	checkTimeTravel(t, f, "clips")

	h := f.history("clips")
	for _, vi := range h.Versions {
		snap := f.snapshot("clips", &vi.Version)
		if snap.CommittedAtUnixMicros != vi.CommittedAtUnixMicros {
			t.Errorf("version %d: snapshot says committed at %d, history %d", vi.Version, snap.CommittedAtUnixMicros, vi.CommittedAtUnixMicros)
		}
	}
	if latest := f.snapshot("clips", nil); latest.CommittedAtUnixMicros != h.Versions[0].CommittedAtUnixMicros {
		t.Errorf("latest snapshot committed at %d, history %d", latest.CommittedAtUnixMicros, h.Versions[0].CommittedAtUnixMicros)
	}
	if n := len(f.readNames(f.snapshot("clips", ptr[int64](5)))); n != 5 {
		t.Errorf("version 5 reads %d rows, want 5", n)
	}

	t.Run("before the creation is NotFound", func(t *testing.T) {
		_, err := f.snapshotAt("clips", info.CreatedAtUnixMicros-1)
		if !errors.Is(err, wire.ErrVersionNotFound) {
			t.Fatalf("got %v, want ErrVersionNotFound", err)
		}
	})
	t.Run("the future is InvalidArgument", func(t *testing.T) {
		_, err := f.snapshotAt("clips", time.Now().Add(time.Hour).UnixMicro())
		if !errors.Is(err, wire.ErrTimestampInFuture) {
			t.Fatalf("got %v, want ErrTimestampInFuture", err)
		}
	})
	t.Run("a time and a version at once is InvalidArgument", func(t *testing.T) {
		at := time.Now().UnixMicro()
		err := flightrpc.Action(context.Background(), f.fc, wire.ActionSnapshot,
			&lakepb.SnapshotRequest{Name: "clips", AtUnixMicros: &at, Version: ptr[int64](1)}, &lakepb.Snapshot{})
		if err = wire.FromStatus(err); !errors.Is(err, wire.ErrInvalidRequest) {
			t.Fatalf("got %v, want ErrInvalidRequest", err)
		}
	})
	t.Run("a version never committed is NotFound", func(t *testing.T) {
		for _, v := range []int64{-1, 13, 1 << 40} {
			err := flightrpc.Action(context.Background(), f.fc, wire.ActionSnapshot,
				&lakepb.SnapshotRequest{Name: "clips", Version: &v}, &lakepb.Snapshot{})
			if err = wire.FromStatus(err); !errors.Is(err, wire.ErrVersionNotFound) {
				t.Errorf("version %d: got %v, want ErrVersionNotFound", v, err)
			}
		}
	})
}

// TestSnapshotAtTimestampAfterRebuild: a node that learned the table from
// a checkpoint holds no records before it, yet finds versions at any time,
// before the checkpoint (from the stage log) and after. (How few records
// the search reads is TestNewestAtOrBefore's: here every version commits
// within maxClockStepBack, so the search rightly looks at all of them.)
func TestSnapshotAtTimestampAfterRebuild(t *testing.T) {
	f, _ := checkpointFixture(t, 8, DefaultCommitRetention)
	info := f.createTable("clips")
	for i := range 35 {
		if _, err := f.appendOne("clips", nameN(i), fmt.Sprintf("c-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	f.waitCheckpoint(info.Id, 32)
	h := f.history("clips")
	f.rebuild()
	at := h.Versions[len(h.Versions)-4].CommittedAtUnixMicros // version 3, below the base
	got, err := f.snapshotAt("clips", at)
	if err != nil {
		t.Fatal(err)
	}
	if want := expectedAt(h, at); got.Version != want {
		t.Fatalf("at version 3's time: version %d, want %d", got.Version, want)
	}
	checkTimeTravel(t, f, "clips")
}

// TestNewestAtOrBefore runs the search over commit times that step back
// by up to the bound, against a scan of every version, and counts the
// records it reads.
func TestNewestAtOrBefore(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const stepBack = 50
	for round := range 300 {
		n := 1 + rng.IntN(200)
		times := make([]int64, n)
		times[0] = 1000
		for i := 1; i < n; i++ {
			times[i] = times[i-1] + rng.Int64N(30)
			if rng.IntN(10) == 0 { // a leader whose clock is behind
				times[i] = times[i-1] - rng.Int64N(stepBack+1)
			}
		}
		// The bound holds against every earlier version, not only the
		// previous one.
		for i := 1; i < n; i++ {
			for j := range i {
				if times[i] < times[j]-stepBack {
					times[i] = times[j] - stepBack
				}
			}
		}
		scan := func(from, to int64, fn func(v, committed int64) bool) error {
			for v := from; v <= to; v++ {
				if !fn(v, times[v]) {
					return nil
				}
			}
			return nil
		}
		for range 20 {
			at := 900 + rng.Int64N(times[n-1]-900+100)
			want := int64(-1)
			for v := range times {
				if times[v] <= at {
					want = int64(v)
				}
			}
			got, ok, err := newestAtOrBefore(int64(n-1), at, stepBack, scan)
			if err != nil || (want < 0) == ok || (ok && got != want) {
				t.Fatalf("round %d, times %v, at %d: got %d %v %v, want %d", round, times, at, got, ok, err, want)
			}
		}
	}

	// In order, 20,000 versions a second apart: a binary search, not a
	// scan of the log.
	const versions = 20000
	reads := 0
	scan := func(from, to int64, fn func(v, committed int64) bool) error {
		for v := from; v <= to; v++ {
			reads++
			if !fn(v, v*1_000_000) {
				return nil
			}
		}
		return nil
	}
	got, ok, err := newestAtOrBefore(versions-1, 12345*1_000_000+7, time.Minute.Microseconds(), scan)
	if err != nil || !ok || got != 12345 {
		t.Fatalf("got %d %v %v, want 12345", got, ok, err)
	}
	if reads > 2*15+61 {
		t.Errorf("the search read %d of %d records", reads, versions)
	}
}
