package e2e

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/internal/freeport"
	"github.com/lakedata/lake/roles/meta"
	"github.com/lakedata/lake/wire/lakepb"
)

// TestCompactionCrashBeforeItsRecord: the meta process dies (SIGKILL, at
// the failpoint meta-compact-before-commit) after `lake table compact`
// wrote the merged file and before its log record, on a local stage and
// on versitygw. Restarted, meta has every acknowledged row once (SQL
// count(*) and count(DISTINCT name)), the versions have no gap and none
// is a compaction, and the merged file is in the table's data directory
// with every row, but no version names it: garbage for the collector,
// never rows read twice. A later compaction works and leaves it so.
func TestCompactionCrashBeforeItsRecord(t *testing.T) {
	for _, st := range compactStages {
		t.Run(st.name, func(t *testing.T) { compactionCrashBeforeItsRecord(t, st.make(t)) })
	}
}

func compactionCrashBeforeItsRecord(t *testing.T, stage compactStage) {
	const writers, each = 8, 25
	dir := t.TempDir()
	// The query role knows meta by this address, across the restart.
	metaArgs := append([]string{"serve", "--role=meta", "--listen", freeport.MustAddr(t), "--data-dir", filepath.Join(dir, "meta"),
		"--compact-min-files", "0"}, stage.flags...)
	m := startLakeEnv(t, []string{"LAKE_FAILPOINTS=" + meta.FailCompactBeforeCommit}, metaArgs...)
	q := startLake(t, "serve", "--role=query", "--listen", "127.0.0.1:0", "--meta", m.Addr(), "--data-dir", filepath.Join(dir, "query"))
	endpoint := "grpc://" + q.Addr()
	ctx := withTimeout(t, 3*time.Minute)
	seed := seedTable(t, ctx, endpoint)
	appendRows(t, ctx, endpoint, "clips", seed, writers, each)
	if t.Failed() {
		return
	}
	const rows = writers*each + 1 // and the seed
	admin, err := client.Connect(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	info, err := admin.Describe(ctx, "clips")
	if err != nil {
		t.Fatal(err)
	}
	st := stage.open(t)
	before := dataFiles(t, st, info.GetId())

	if out, stderr, code := runLakeExit(t, endpoint, "table", "compact", "clips"); code == 0 {
		t.Fatalf("lake table compact succeeded while meta was to die before the record: %s", out+stderr)
	}
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		t.Fatal("meta did not die at the failpoint")
	}
	m.kill(syscall.SIGKILL) // reaps it; it is dead already
	if ws, ok := m.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("meta ended with %v, want SIGKILL from the failpoint", m.cmd.ProcessState)
	}
	var leftover string
	for k := range dataFiles(t, st, info.GetId()) {
		if !before[k] {
			if leftover != "" {
				t.Fatalf("the compaction left %s and %s, want one merged file", leftover, k)
			}
			leftover = k
		}
	}
	if leftover == "" {
		t.Fatal("no merged file in the stage: the failpoint was not between the file and the record")
	}

	startLake(t, metaArgs...) // stopped by the test's cleanup
	waitForTable(t, admin)
	// referenced checks the table's history: versions 0..head without a
	// gap, compactions counted, rows adding up; it returns every data file
	// some version names.
	referenced := func(when string, wantCompactions int) map[string]bool {
		t.Helper()
		info, err := admin.Describe(ctx, "clips")
		if err != nil {
			t.Fatal(err)
		}
		h, err := admin.History(ctx, "clips", 0)
		if err != nil {
			t.Fatal(err)
		}
		named := map[string]bool{}
		var logRows int64
		compactions := 0
		for i, v := range h.GetVersions() {
			if want := info.GetVersion() - int64(i); v.GetVersion() != want {
				t.Fatalf("%s: history position %d is version %d, want %d", when, i, v.GetVersion(), want)
			}
			if v.GetVersion() > 0 && v.GetRows() == 0 {
				compactions++
			}
			logRows += v.GetRows()
			for _, df := range v.GetFiles() {
				named[df.GetKey()] = true
			}
		}
		count, distinct := countRows(t, ctx, admin)
		if count != rows || distinct != rows || logRows != rows || info.GetRows() != rows {
			t.Errorf("%s: SQL count %d (%d distinct), log rows %d, described rows %d; want %d", when, count, distinct, logRows, info.GetRows(), rows)
		}
		if compactions != wantCompactions {
			t.Errorf("%s: %d compactions in the history, want %d", when, compactions, wantCompactions)
		}
		if named[leftover] {
			t.Errorf("%s: a version names %s, the merged file of the compaction that died", when, leftover)
		}
		if !dataFiles(t, st, info.GetId())[leftover] {
			t.Errorf("%s: %s is gone from the stage; only the collector may free it", when, leftover)
		}
		return named
	}
	named := referenced("after the restart", 0)
	for k := range before {
		if !named[k] {
			t.Errorf("data file %s of an acknowledged append is named by no version", k)
		}
	}
	// The leftover holds every row: it is a whole merged file, garbage
	// only because its record was never written.
	got := readRows(t, st, []*lakepb.DataFile{{Key: leftover}})
	if len(got) != rows {
		t.Errorf("the leftover merged file holds %d names, want %d", len(got), rows)
	}
	for name, n := range got {
		if n != 1 {
			t.Errorf("the leftover merged file holds %s %d times", name, n)
		}
	}

	out := runLake(t, endpoint, "table", "compact", "clips")
	if info, err := admin.Describe(ctx, "clips"); err != nil || info.GetDataFiles() != 1 {
		t.Fatalf("the compaction after the restart (%q): %v %v, want 1 data file", out, info, err)
	}
	referenced("after a later compaction", 1)
}
