package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// procKiB reads a "Name:   N kB" line of /proc/<pid>/status.
func procKiB(t *testing.T, pid int, name string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", name, line, err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", name, pid)
	return 0
}

// Eight clients append ~100 MB each, all at once, to a table that does
// not exist. The query node refuses every one from its first message, so
// its resident set stays where it was; before, it buffered every append
// (up to 256 MiB each) until meta said NotFound.
func TestRelayRefusesMissingTableWithoutBuffering(t *testing.T) {
	const (
		clients  = 8
		batches  = 10        // per append
		rows     = 40        // per batch
		nameSize = 256 << 10 // bytes per row: batches of ~10 MiB
		maxGrow  = 64 << 20
	)
	dir := t.TempDir()
	env := []string{"AWS_EC2_METADATA_DISABLED=true"}
	m := startLakeEnv(t, env, "serve", "--role=meta", "--listen", "127.0.0.1:0",
		"--data-dir", filepath.Join(dir, "meta"), "--stage", "file://"+filepath.Join(dir, "stage"))
	q := startLakeEnv(t, env, "serve", "--role=query", "--listen", "127.0.0.1:0", "--meta", m.Addr(),
		"--data-dir", filepath.Join(dir, "query"))
	pid := q.cmd.Process.Pid
	ctx := withTimeout(t, 3*time.Minute)

	v := wire.FileValue{Key: "objects/none/x.bin", Size: 1, SHA256: strings.Repeat("ab", 32)}
	names := make([]string, rows)
	values := make([]wire.FileValue, rows)
	for i := range rows {
		names[i], values[i] = strings.Repeat("n", nameSize), v
	}
	// One small refused append first, so what the code path loads once
	// is resident before the measurement.
	warm, err := flightrpc.Dial(q.Addr())
	if err != nil {
		t.Fatal(err)
	}
	small := wiretest.FileRow("warm", v)
	defer small.Release()
	_, err = flightrpc.Append(ctx, warm, &lakepb.Append{Table: "missing"}, small.Schema(), []arrow.RecordBatch{small})
	warm.Close()
	if status.Code(err) != codes.NotFound {
		t.Fatalf("warm-up append: %v, want NotFound", err)
	}

	rssBefore, hwmBefore := procKiB(t, pid, "VmRSS"), procKiB(t, pid, "VmHWM")
	// Writing 5 to clear_refs resets VmHWM to the current RSS, so the peak
	// read afterwards is the peak of the appends alone.
	reset := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) == nil

	var wg sync.WaitGroup
	errs := make([]error, clients)
	start := time.Now()
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fc, err := flightrpc.Dial(q.Addr())
			if err != nil {
				errs[i] = err
				return
			}
			defer fc.Close()
			rec := wiretest.FileRows(names, values)
			defer rec.Release()
			recs := make([]arrow.RecordBatch, batches)
			for j := range recs {
				recs[j] = rec
			}
			_, errs[i] = flightrpc.Append(ctx, fc, &lakepb.Append{Table: "missing"}, rec.Schema(), recs)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	for i, err := range errs {
		if status.Code(err) != codes.NotFound {
			t.Errorf("append %d to the missing table: %v, want NotFound", i, err)
		}
	}
	rssAfter, hwmAfter := procKiB(t, pid, "VmRSS"), procKiB(t, pid, "VmHWM")
	base := rssBefore
	if !reset {
		base = max(rssBefore, hwmBefore)
	}
	grow := (hwmAfter - base) << 10
	t.Logf("%d appends of %d MiB refused in %v; query node VmRSS %d → %d KiB, VmHWM %d → %d KiB (reset: %v): peak grew %.1f MiB",
		clients, batches*rows*nameSize>>20, elapsed.Round(time.Millisecond), rssBefore, rssAfter, hwmBefore, hwmAfter, reset, float64(grow)/(1<<20))
	if grow >= maxGrow {
		t.Fatalf("the query node's peak RSS grew by %.1f MiB refusing appends to a missing table, want < %d MiB",
			float64(grow)/(1<<20), maxGrow>>20)
	}
}
