package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/internal/memcg"
)

// memoryLimit and memoryMargin are lake's --memory-limit in this test and
// the margin roles/query documents for it (a quarter of the limit, at
// least 512 MiB).
const (
	memoryLimit  = 1_000_000_000
	memoryMargin = 512 << 20
	// overshoot is what a statement may allocate past the ceiling before
	// DuckDB honours the interrupt: DuckDB looks at it between calls, not
	// inside one, so it is the largest value one call builds here (the
	// 2 GiB repeat), as docs/architecture.md says.
	overshoot = 2 << 30
)

// TestMemoryAndTimeBombsAreStopped runs statements that grow the query
// role far past its memory limit, or run far past the statement timeout,
// against a real `lake serve` in a 4 GiB memory cgroup (so a failure is a
// killed process, never a machine out of memory). Each must end with
// ResourceExhausted or DeadlineExceeded, the process's peak RSS must stay
// within limit + margin + overshoot, and a second client's SELECT 1 must
// keep being answered throughout.
func TestMemoryAndTimeBombsAreStopped(t *testing.T) {
	group, err := memcg.New("lake-e2e-bombs", 4<<30)
	if errors.Is(err, memcg.ErrUnavailable) {
		t.Skip("no memory cgroup can be created here (needs root and a memory controller)")
	}
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := startLakeHook(t, nil, group.Add, "serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0",
		"--data-dir", filepath.Join(dir, "lake-data"), "--memory-limit", "1GB", "--statement-timeout", "15s")
	t.Cleanup(func() {
		p.kill(9)
		group.Close()
	})
	ctx := withTimeout(t, 10*time.Minute)
	c, err := client.Connect(ctx, "grpc://"+p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prober, err := client.Connect(ctx, "grpc://"+p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer prober.Close()

	// The second client: SELECT 1 every 100 ms, each within 5 s.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var probeMu sync.Mutex
	var probes, probeFailures int
	var worstProbe time.Duration
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			start := time.Now()
			_, err := queryCount(pctx, prober, "SELECT 1")
			cancel()
			probeMu.Lock()
			probes++
			if err != nil {
				probeFailures++
				t.Errorf("concurrent SELECT 1: %v", err)
			}
			worstProbe = max(worstProbe, time.Since(start))
			probeMu.Unlock()
		}
	}()

	bombs := []string{
		// Constant lists that DuckDB turns into one Value per element
		// while binding or folding, in calls that never look at an
		// interrupt (17 GB before the allocation cap).
		"SELECT len(range(200000000))",
		"SELECT length(range(200000000))",
		"SELECT count(*) FROM (SELECT unnest(range(200000000)))",
		"SELECT len(string_split(repeat('a,', 100000000), ','))",
		"SELECT length(repeat('x', 2147483648))",
		"SELECT len(range(n)) FROM (SELECT 200000000 + (random() * 0)::BIGINT n)",
		"SELECT length(repeat('x', 1000000000))",
		"SELECT length(string_agg(repeat('x', 1000), '')) FROM range(5000000)",
		"SELECT len(list(a.range)) FROM range(100000) a, range(100000) b",
		"SELECT max(a.range * b.range) FROM range(1000000) a, range(1000000) b",
		"SELECT count(*) FROM (SELECT a.range, b.range, c.range FROM range(100000) a, range(100000) b, range(1000) c ORDER BY 1 DESC, 2, 3)",
	}
	for _, q := range bombs {
		start := time.Now()
		_, err := queryCount(ctx, c, q)
		took := time.Since(start)
		code := status.Code(err)
		t.Logf("%s: %v after %v (%v)", q, code, took.Round(time.Millisecond), err)
		if code != codes.ResourceExhausted && code != codes.DeadlineExceeded {
			t.Errorf("%s: %v, want ResourceExhausted or DeadlineExceeded", q, err)
		}
		// The slack is for a loaded machine: with two cores shared by a
		// parallel test run, a stopped statement was seen to take 31 s to
		// unwind; alone it takes well under a second past the deadline.
		if took > 15*time.Second+20*time.Second {
			t.Errorf("%s: stopped after %v, statement timeout 15s", q, took)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("concurrent SELECT 1: %d probes, %d failed, slowest %v", probes, probeFailures, worstProbe.Round(time.Millisecond))
	if probes == 0 {
		t.Error("the concurrent client ran no probe")
	}

	peak := peakRSS(t, p.cmd.Process.Pid)
	cgPeak, _ := group.Peak()
	t.Logf("peak RSS %d MiB (cgroup peak %d MiB); bound %d MiB", peak>>20, cgPeak>>20, (memoryLimit+memoryMargin+overshoot)>>20)
	if peak > memoryLimit+memoryMargin+overshoot {
		t.Errorf("peak RSS %d MiB, above limit + margin + overshoot %d MiB", peak>>20, (memoryLimit+memoryMargin+overshoot)>>20)
	}
	// The role still answers, and a lake table still works.
	if n, err := queryCount(ctx, c, "SELECT 42"); err != nil || n != 1 {
		t.Fatalf("after the bombs: %d rows, %v", n, err)
	}
}

// queryCount runs q and counts its rows.
func queryCount(ctx context.Context, c *client.Client, q string) (int64, error) {
	rdr, err := c.Query(ctx, q)
	if err != nil {
		return 0, err
	}
	defer rdr.Release()
	var n int64
	for rdr.Next() {
		n += rdr.RecordBatch().NumRows()
	}
	return n, rdr.Err()
}

// peakRSS is VmHWM of a running process.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}
