package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/google/uuid"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// BenchmarkFailover measures, on three meta nodes with the default 5 s
// lease, the time from signalling the leader to the first append that a
// query node acknowledges again: after SIGKILL (the lease must expire) and
// after SIGTERM (the leader resigns). A probe appends through the query
// node every 10 ms. Each signalled node rejoins as a follower before the
// next run. Run with -benchtime 1x; LAKE_BENCH_FAILOVER_RUNS sets the runs
// per signal (default 5).
func BenchmarkFailover(b *testing.B) {
	runs := envInt(b, "LAKE_BENCH_FAILOVER_RUNS", 5)
	c := newHACluster(b, 3, 5*time.Second)
	c.startLeader()
	q := c.startQuery()
	ctx := withTimeout(b, 30*time.Minute)
	seed := seedTable(b, ctx, "grpc://"+q.Addr())
	fc, err := flightrpc.Dial(q.Addr())
	if err != nil {
		b.Fatal(err)
	}
	defer fc.Close()
	probe := func() error {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		rec := wiretest.FileRow("probe", seed)
		defer rec.Release()
		_, err := flightrpc.Append(actx, fc, &lakepb.Append{Table: "clips", CommitId: uuid.NewString()}, rec.Schema(), []arrow.RecordBatch{rec})
		return err
	}
	for range b.N {
		for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
			var took []time.Duration
			for range runs {
				leader := c.waitLeader("", 30*time.Second)
				idx := slices.IndexFunc(c.metas, func(m *metaNode) bool { return m.addr == leader })
				if err := probe(); err != nil {
					b.Fatalf("append before the failover: %v", err)
				}
				start := time.Now()
				if err := c.metas[idx].p.cmd.Process.Signal(sig); err != nil {
					b.Fatal(err)
				}
				for probe() != nil {
					if time.Since(start) > time.Minute {
						b.Fatal("no append accepted a minute after the failover began")
					}
					time.Sleep(10 * time.Millisecond)
				}
				took = append(took, time.Since(start))
				c.metas[idx].p.kill(sig) // wait for the exit
				c.start(idx)
			}
			slices.Sort(took)
			name := map[syscall.Signal]string{syscall.SIGKILL: "kill", syscall.SIGTERM: "term"}[sig]
			b.ReportMetric(took[len(took)/2].Seconds(), "s-median-"+name)
			b.Logf("failover after SIG%s, %d runs: median %v, min %v, max %v, all %v", strings.ToUpper(name), runs,
				took[len(took)/2].Round(time.Millisecond), took[0].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), roundAll(took))
		}
	}
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

// BenchmarkAppendsThroughFollowers compares appends/s of 16 clients through
// a query node whose --meta lists only the two followers of a three-node
// cluster (every append is forwarded to the leader) with a query node on a
// lone meta node, on the same gateway, alternating 3 rounds of
// LAKE_BENCH_SECONDS (default 3) each. Run with -benchtime 1x.
func BenchmarkAppendsThroughFollowers(b *testing.B) {
	seconds := envInt(b, "LAKE_BENCH_SECONDS", 3)
	c := newHACluster(b, 3, 5*time.Second)
	c.startLeader()
	followers := c.metas[1].addr + "," + c.metas[2].addr
	qCluster := c.startQueryOn(followers)
	soloBucket := c.gw.NewBucket(b)
	solo := startLake(b, "serve", "--role=meta", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(c.dir, "solo"),
		"--stage", "s3://"+soloBucket+"/lake", "--s3-endpoint", c.gw.Endpoint)
	qSolo := c.startQueryOn(solo.Addr())
	ctx := withTimeout(b, 30*time.Minute)
	setups := []struct {
		name     string
		endpoint string
		seed     wire.FileValue
		rates    []float64
	}{
		{name: "1 node", endpoint: "grpc://" + qSolo.Addr()},
		{name: "3 nodes via followers", endpoint: "grpc://" + qCluster.Addr()},
	}
	for i := range setups {
		setups[i].seed = seedTable(b, ctx, setups[i].endpoint)
	}
	for range b.N {
		for round := 0; round < 3; round++ {
			for i := range setups {
				s := &setups[i]
				n := appendFor(b, ctx, s.endpoint, s.seed, 16, time.Duration(seconds)*time.Second)
				s.rates = append(s.rates, float64(n)/float64(seconds))
			}
		}
	}
	med := func(xs []float64) float64 {
		ys := slices.Clone(xs)
		slices.Sort(ys)
		return ys[len(ys)/2]
	}
	for _, s := range setups {
		b.Logf("%s: appends/s per round %.0f (median %.0f)", s.name, s.rates, med(s.rates))
	}
	for r := range setups[0].rates {
		b.Logf("round %d: 3 nodes via followers ÷ 1 node = %.2f", r+1, setups[1].rates[r]/setups[0].rates[r])
	}
	b.ReportMetric(med(setups[0].rates), "appends/s-1node")
	b.ReportMetric(med(setups[1].rates), "appends/s-3nodes")
}

// seedTable creates table clips through endpoint and puts one object, whose
// FILE value the benchmark's rows then name.
func seedTable(tb testing.TB, ctx context.Context, endpoint string) wire.FileValue {
	tb.Helper()
	cl, err := client.Connect(ctx, endpoint)
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.CreateTable(ctx, "clips", nil, true); err != nil {
		tb.Fatal(err)
	}
	put, err := cl.PutReader(ctx, "clips", "seed", strings.NewReader("seed object"), client.PutOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return put.File
}

// appendFor runs clients goroutines appending one-row records for d and
// returns how many were acknowledged.
func appendFor(tb testing.TB, ctx context.Context, endpoint string, seed wire.FileValue, clients int, d time.Duration) int {
	tb.Helper()
	var (
		mu    sync.Mutex
		total int
		wg    sync.WaitGroup
		errs  []error
	)
	end := time.Now().Add(d)
	for i := range clients {
		cl, err := client.Connect(ctx, endpoint)
		if err != nil {
			tb.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			n := 0
			for time.Now().Before(end) {
				rec := wiretest.FileRow(fmt.Sprintf("c%02d-%d", i, n), seed)
				_, err := cl.Append(ctx, "clips", rec, client.AppendOptions{})
				rec.Release()
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				n++
			}
			mu.Lock()
			total += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		tb.Fatalf("append failed: %v", errs[0])
	}
	return total
}

// envInt reads a positive integer from the environment, or def.
func envInt(tb testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		tb.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}
