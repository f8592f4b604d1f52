package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/local"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// TestMetaSurvivesSIGKILLDuringAppends kills a real meta process while
// clients append, restarts it on the same data dir and checks that every
// acknowledged version is there with its row, and that appends continue.
func TestMetaSurvivesSIGKILLDuringAppends(t *testing.T) {
	dir := t.TempDir()
	dataDir, stageDir := filepath.Join(dir, "data"), filepath.Join(dir, "stage")
	args := []string{"serve", "--role=meta", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--stage", "file://" + stageDir}
	stage, err := local.Open(stageDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stage.Close()

	m := startLake(t, args...)
	fc := dial(t, m.Addr())
	ctx := withTimeout(t, 2*time.Minute)
	create := &lakepb.CreateTableRequest{Name: "clips", Schema: wire.EncodeSchema(wire.DefaultSchema())}
	if err := flightrpc.Action(ctx, fc, wire.ActionCreateTable, create, &lakepb.TableInfo{}); err != nil {
		t.Fatal(err)
	}

	type ack struct {
		version int64
		name    string
	}
	var mu sync.Mutex
	var acks []ack
	const clients = 8
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Bounded: the process dies long before a client runs out.
			for i := range 10000 {
				name := fmt.Sprintf("c%d-%05d.mp4", c, i)
				res, err := appendFile(ctx, fc, stage, name)
				if err != nil {
					return // the kill ends every client
				}
				mu.Lock()
				acks = append(acks, ack{res.Version, name})
				mu.Unlock()
			}
		}()
	}
	// Kill once a good number of appends were acknowledged.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(acks)
		mu.Unlock()
		if n >= 200 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	m.kill(syscall.SIGKILL)
	wg.Wait()
	fc.Close()
	if len(acks) == 0 {
		t.Fatal("no append was acknowledged before the kill")
	}

	m2 := startLake(t, args...)
	fc2 := dial(t, m2.Addr())
	defer fc2.Close()
	var snap lakepb.Snapshot
	if err := flightrpc.Action(ctx, fc2, wire.ActionSnapshot, &lakepb.SnapshotRequest{Name: "clips"}, &snap); err != nil {
		t.Fatal(err)
	}
	var hist lakepb.History
	if err := flightrpc.Action(ctx, fc2, wire.ActionHistory, &lakepb.HistoryRequest{Name: "clips"}, &hist); err != nil {
		t.Fatal(err)
	}
	// Versions are gapless: snap.Version appends plus the creation.
	if int64(len(hist.Versions)) != snap.Version+1 {
		t.Fatalf("history has %d versions, head is %d", len(hist.Versions), snap.Version)
	}
	rowsByName := readRows(t, stage, snap.Files)
	for _, a := range acks {
		if a.version > snap.Version {
			t.Errorf("acknowledged version %d is beyond the head %d after restart", a.version, snap.Version)
		}
		if rowsByName[a.name] != 1 {
			t.Errorf("acknowledged row %s (version %d) appears %d times", a.name, a.version, rowsByName[a.name])
		}
	}
	for name, n := range rowsByName {
		if n != 1 {
			t.Errorf("row %s appears %d times", name, n)
		}
	}
	res, err := appendFile(ctx, fc2, stage, "after-restart.mp4")
	if err != nil {
		t.Fatalf("append after restart: %v", err)
	}
	if res.Version != snap.Version+1 {
		t.Fatalf("append after restart got version %d, want %d", res.Version, snap.Version+1)
	}
	t.Logf("%d acknowledged appends before the kill; head %d after restart", len(acks), snap.Version)
}

func dial(t *testing.T, addr string) flight.Client {
	t.Helper()
	fc, err := flightrpc.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	return fc
}

// appendFile uploads a small object to the stage and appends its row.
func appendFile(ctx context.Context, fc flight.Client, stage objects.Store, name string) (*lakepb.AppendResult, error) {
	content := []byte("bytes of " + name)
	key := objects.NewObjectKey(name, time.Now())
	info, err := stage.Put(ctx, key, bytes.NewReader(content), objects.PutOptions{})
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(content)
	rec := wiretest.FileRow(name, wire.FileValue{Key: key, Size: info.Size, SHA256: hex.EncodeToString(sum[:])})
	defer rec.Release()
	return flightrpc.Append(ctx, fc, &lakepb.Append{Table: "clips"}, rec.Schema(), []arrow.RecordBatch{rec})
}
