package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lakedata/lake/client"
)

// TestCompactionBesideAppends: against meta and query as processes, on a
// local stage and on versitygw, eight writers append one row at a time
// while `lake table compact` runs again and again and the leader compacts
// in the background (past 16 small files). Every acknowledged row is
// there exactly once through SQL, the versions have no gap, the log's
// rows add up to count(*), and after meta restarts with its index rebuilt
// from the stage the same holds.
func TestCompactionBesideAppends(t *testing.T) {
	for _, st := range compactStages {
		t.Run(st.name, func(t *testing.T) { compactionBesideAppends(t, st.make(t)) })
	}
}

func compactionBesideAppends(t *testing.T, stage compactStage) {
	dir := t.TempDir()
	metaArgs := append([]string{"serve", "--role=meta", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "meta"),
		"--compact-min-files", "16"}, stage.flags...)
	m := startLake(t, metaArgs...)
	q := startLake(t, "serve", "--role=query", "--listen", "127.0.0.1:0", "--meta", m.Addr(), "--data-dir", filepath.Join(dir, "query"))
	endpoint := "grpc://" + q.Addr()
	ctx := withTimeout(t, 3*time.Minute)
	admin, err := client.Connect(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.CreateTable(ctx, "clips", nil, false); err != nil {
		t.Fatal(err)
	}
	put, err := admin.PutReader(ctx, "clips", "seed", strings.NewReader("one object for every row"), client.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}

	const writers, each = 8, 100
	stop := make(chan struct{})
	compacted := make(chan int)
	go func() {
		merged := 0
		re := regexp.MustCompile(`(\d+) data files → (\d+)`)
		for {
			select {
			case <-stop:
				compacted <- merged
				return
			default:
			}
			out, stderr, code := runLakeExit(t, endpoint, "table", "compact", "clips")
			if code != 0 {
				t.Errorf("lake table compact exited %d: %s%s", code, out, stderr)
			}
			if re.MatchString(out) {
				merged++
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	appendRows(t, ctx, endpoint, "clips", put.File, writers, each)
	close(stop)
	if n := <-compacted; n < 2 {
		t.Errorf("lake table compact merged files %d times beside the appends", n)
	}
	out := runLake(t, endpoint, "table", "compact", "clips")
	if !strings.Contains(out, "→ 1") && !strings.Contains(out, "(data files: 1)") {
		t.Errorf("the last compaction left more than one file: %q", out)
	}

	check := func(when string) {
		t.Helper()
		count, distinct := countRows(t, ctx, admin)
		info, err := admin.Describe(ctx, "clips")
		if err != nil {
			t.Fatal(err)
		}
		h, err := admin.History(ctx, "clips", 0)
		if err != nil {
			t.Fatal(err)
		}
		var rows int64
		for i, v := range h.GetVersions() {
			if want := info.GetVersion() - int64(i); v.GetVersion() != want {
				t.Fatalf("%s: history position %d is version %d, want %d", when, i, v.GetVersion(), want)
			}
			rows += v.GetRows()
		}
		want := int64(writers*each + 1) // and the seed
		if count != want || distinct != want || rows != want || info.GetRows() != want {
			t.Errorf("%s: SQL count %d (%d distinct), log rows %d, described rows %d; want %d", when, count, distinct, rows, info.GetRows(), want)
		}
		if info.GetDataFiles() > 2 {
			t.Errorf("%s: %d data files after compaction", when, info.GetDataFiles())
		}
		t.Logf("%s: version %d, %d rows in %d files", when, info.GetVersion(), count, info.GetDataFiles())
	}
	check("after the appends")

	// Restarted without its index, meta rebuilds it from the stage log
	// alone, compaction records included.
	m.kill(syscall.SIGTERM)
	if err := os.Remove(filepath.Join(dir, "meta", "meta.db")); err != nil {
		t.Fatal(err)
	}
	metaArgs[3] = "127.0.0.1:" + strconv.Itoa(portOf(t, m.Addr())) // the query role knows this address
	// The restarted meta is stopped by the test's cleanup.
	startLake(t, metaArgs...)
	waitForTable(t, admin)
	check("after meta rebuilt its index")
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	i := strings.LastIndexByte(addr, ':')
	p, err := strconv.Atoi(addr[i+1:])
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return p
}

// waitForTable waits until the query role reaches the metadata service
// again.
func waitForTable(t *testing.T, c *client.Client) {
	t.Helper()
	ctx := withTimeout(t, 30*time.Second)
	for {
		if _, err := c.Describe(ctx, "clips"); err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatal("the metadata service did not come back")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
