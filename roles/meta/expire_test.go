package meta

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

func (f *fixture) expire(req *lakepb.ExpireRequest) (*lakepb.ExpireResult, error) {
	var res lakepb.ExpireResult
	err := flightrpc.Action(context.Background(), f.fc, wire.ActionExpire, req, &res)
	return &res, err
}

func (f *fixture) trySnapshot(table string, version int64) error {
	var snap lakepb.Snapshot
	return flightrpc.Action(context.Background(), f.fc, wire.ActionSnapshot, &lakepb.SnapshotRequest{Name: table, Version: &version}, &snap)
}

// TestExpireKeepLast: an expiry that keeps the 3 newest of 11 versions is
// one version; the older ones answer FailedPrecondition, history marks
// them, and all of it survives a restart and a rebuild from a checkpoint.
// An expiry that would keep more changes nothing.
func TestExpireKeepLast(t *testing.T) {
	f, _ := checkpointFixture(t, 4, DefaultCommitRetention)
	info := f.createTable("clips")
	f.keysOf("clips", 10) // versions 1..10
	res, err := f.expire(&lakepb.ExpireRequest{Table: "clips", KeepLast: ptr[int64](3), CommitId: "exp-1"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != 11 || res.RetainFrom != 8 || res.Expired != 8 {
		t.Fatalf("expire: %v, want version 11 keeping 8.. (8 expired)", res)
	}
	check := func(when string) {
		t.Helper()
		if err := f.trySnapshot("clips", 7); !errors.Is(wire.FromStatus(err), wire.ErrVersionExpired) {
			t.Errorf("%s: snapshot of expired version 7: %v, want ErrVersionExpired", when, err)
		}
		if err := f.trySnapshot("clips", 8); err != nil {
			t.Errorf("%s: snapshot of retained version 8: %v", when, err)
		}
		if n := len(f.readNames(f.snapshot("clips", nil))); n != 10 {
			t.Errorf("%s: the current version has %d rows, want 10", when, n)
		}
		h := f.history("clips")
		for _, v := range h.Versions {
			wantKind := map[int64]string{0: "create", 11: "expire"}[v.Version]
			if wantKind == "" {
				wantKind = "append"
			}
			if v.Expired != (v.Version < 8) || v.Kind != wantKind {
				t.Errorf("%s: history version %d: kind %q expired %t; want %q, %t", when, v.Version, v.Kind, v.Expired, wantKind, v.Version < 8)
			}
		}
	}
	check("after the expiry")
	if again, err := f.expire(&lakepb.ExpireRequest{Table: "clips", KeepLast: ptr[int64](3), CommitId: "exp-1"}); err != nil || !again.Duplicate || again.Version != 11 {
		t.Errorf("retry: %v, %v; want the duplicate of version 11", again, err)
	}
	if more, err := f.expire(&lakepb.ExpireRequest{Table: "clips", KeepLast: ptr[int64](6)}); err != nil || more.Expired != 0 || more.Version != 11 {
		t.Errorf("an expiry keeping more: %v, %v; want nothing expired at version 11", more, err)
	}
	f.restart()
	check("after a restart")
	f.waitCheckpoint(info.Id, 8)
	f.rebuild()
	check("after a rebuild")
}

// TestExpireOlderThan keeps the version that was current at the cutoff.
func TestExpireOlderThan(t *testing.T) {
	f := newFixture(t)
	f.createTable("clips")
	f.keysOf("clips", 3) // versions 1..3
	time.Sleep(400 * time.Millisecond)
	f.keysOf("clips", 2) // versions 4..5, after the cutoff below
	res, err := f.expire(&lakepb.ExpireRequest{Table: "clips", OlderThanMicros: ptr((200 * time.Millisecond).Microseconds())})
	if err != nil {
		t.Fatal(err)
	}
	if res.RetainFrom != 3 || res.Expired != 3 {
		t.Fatalf("expire --older-than: %v, want versions from 3 kept (3 expired)", res)
	}
}

// TestRetentionExpiresOnASchedule: with Retention set, the leader expires
// old versions by itself.
func TestRetentionExpiresOnASchedule(t *testing.T) {
	f := newFixture(t)
	f.restartWith(func(c *Config) { c.Retention = 300 * time.Millisecond })
	f.createTable("clips")
	f.keysOf("clips", 4)
	time.Sleep(400 * time.Millisecond)
	f.keysOf("clips", 1) // version 5: current from now on
	deadline := time.Now().Add(10 * time.Second)
	for f.trySnapshot("clips", 3) == nil {
		if time.Now().After(deadline) {
			t.Fatal("version 3 did not expire within 10s of a 300ms retention")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := f.trySnapshot("clips", 5); err != nil {
		t.Errorf("the current version: %v", err)
	}
}

func TestBadExpiresChangeNothing(t *testing.T) {
	f := newFixture(t)
	f.createTable("clips")
	f.keysOf("clips", 2)
	for name, req := range map[string]*lakepb.ExpireRequest{
		"neither":        {Table: "clips"},
		"both":           {Table: "clips", KeepLast: ptr[int64](1), OlderThanMicros: ptr[int64](1)},
		"keep 0":         {Table: "clips", KeepLast: ptr[int64](0)},
		"negative":       {Table: "clips", OlderThanMicros: ptr[int64](-1)},
		"no such table":  {Table: "nope", KeepLast: ptr[int64](1)},
		"bad table name": {Table: "Nope!", KeepLast: ptr[int64](1)},
	} {
		if _, err := f.expire(req); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if v := f.snapshot("clips", nil).Version; v != 2 {
		t.Errorf("the table moved to version %d", v)
	}
	if err := f.trySnapshot("clips", 0); err != nil {
		t.Errorf("version 0 after the refused expiries: %v", err)
	}
}
