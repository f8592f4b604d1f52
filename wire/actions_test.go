package wire

import (
	"strings"
	"testing"
)

// TestActionNames: the action types are part of the protocol between the
// roles and clients; they must be distinct and stay in lake's namespace.
func TestActionNames(t *testing.T) {
	names := []string{ActionCreateTable, ActionListTables, ActionDescribeTable, ActionHistory, ActionSnapshot, ActionDiscover, ActionStatus, ActionVerify, ActionCompact, ActionDelete, ActionExpire, ActionGC, ActionURL, ActionUploadGrant, ActionUploadRenew, ActionUploadComplete, ActionUploadAbort}
	seen := make(map[string]bool)
	for _, n := range names {
		if !strings.HasPrefix(n, "lake.") || strings.ContainsAny(n, " \t\n") {
			t.Errorf("action %q is outside the lake. namespace", n)
		}
		if seen[n] {
			t.Errorf("action %q defined twice", n)
		}
		seen[n] = true
	}
	// Every name has exactly one table entry, and the table nothing else.
	table := Actions()
	if len(table) != len(names) {
		t.Errorf("the action table has %d entries for %d action names", len(table), len(names))
	}
	for _, n := range names {
		if a, ok := LookupAction(n); !ok || a.Name != n {
			t.Errorf("LookupAction(%q) = %+v, %t", n, a, ok)
		}
	}
	if _, ok := LookupAction("lake.table.drop"); ok {
		t.Error("LookupAction found an action that does not exist")
	}
}

// TestActionTable pins what the roles decide from the table: who answers,
// who forwards, the scope a token needs (DESIGN §12) and the body types.
func TestActionTable(t *testing.T) {
	want := map[string]struct {
		req, resp       string
		stream, mutates bool
		byQuery         bool
		scope           Scope
	}{
		ActionCreateTable:    {"CreateTableRequest", "TableInfo", false, true, false, ScopeAdmin},
		ActionListTables:     {"ListTablesRequest", "TableList", false, false, false, ScopeRead},
		ActionDescribeTable:  {"DescribeTableRequest", "TableInfo", false, false, false, ScopeRead},
		ActionHistory:        {"HistoryRequest", "History", false, false, false, ScopeRead},
		ActionSnapshot:       {"SnapshotRequest", "Snapshot", false, false, false, ScopeRead},
		ActionDiscover:       {"DiscoverRequest", "StageDescriptor", false, false, true, ScopeRead},
		ActionStatus:         {"StatusRequest", "ClusterStatus", false, false, false, ScopeRead},
		ActionVerify:         {"VerifyRequest", "VerifyResult", true, false, false, ScopeRead},
		ActionCompact:        {"CompactRequest", "CompactResult", false, true, false, ScopeAdmin},
		ActionDelete:         {"DeleteRequest", "DeleteResult", false, true, false, ScopeWrite},
		ActionExpire:         {"ExpireRequest", "ExpireResult", false, true, false, ScopeAdmin},
		ActionGC:             {"GcRequest", "GcResult", false, true, false, ScopeAdmin},
		ActionURL:            {"ObjectUrlRequest", "ObjectUrl", false, false, false, ScopeRead},
		ActionUploadGrant:    {"UploadGrantRequest", "UploadGrant", false, true, false, ScopeWrite},
		ActionUploadRenew:    {"UploadRenewRequest", "UploadUrls", false, true, false, ScopeWrite},
		ActionUploadComplete: {"UploadCompleteRequest", "UploadedFile", false, true, false, ScopeWrite},
		ActionUploadAbort:    {"UploadAbortRequest", "UploadAborted", false, true, false, ScopeWrite},
	}
	seen := map[string]bool{}
	for _, a := range Actions() {
		t.Run(a.Name, func(t *testing.T) {
			if seen[a.Name] {
				t.Fatal("listed twice")
			}
			seen[a.Name] = true
			w, ok := want[a.Name]
			if !ok {
				t.Fatal("an entry this test does not know; add it to want")
			}
			if a.Request == nil || a.Response == nil {
				t.Fatal("no body types")
			}
			if got := string(a.Request.Descriptor().Name()); got != w.req {
				t.Errorf("request %s, want %s", got, w.req)
			}
			if got := string(a.Response.Descriptor().Name()); got != w.resp {
				t.Errorf("response %s, want %s", got, w.resp)
			}
			if a.Stream != w.stream || a.Mutates != w.mutates || a.AnsweredByQuery != w.byQuery {
				t.Errorf("stream, mutates, answered by query = %t, %t, %t; want %t, %t, %t", a.Stream, a.Mutates, a.AnsweredByQuery, w.stream, w.mutates, w.byQuery)
			}
			if a.Scope != w.scope {
				t.Errorf("scope %v, want %v", a.Scope, w.scope)
			}
			if a.Mutates && !a.Scope.Allows(ScopeWrite) {
				t.Errorf("a mutation open to %v tokens", a.Scope)
			}
			if a.Mutates && a.AnsweredByQuery {
				t.Error("the query role cannot answer a mutation itself")
			}
			d := a.Description
			if d == "" || strings.ContainsAny(d, "\n\t") || strings.HasSuffix(d, ".") || strings.Contains(d, "→") {
				t.Errorf("description %q: want one line, no final period, no signature", d)
			}
		})
	}
	for n := range want {
		if !seen[n] {
			t.Errorf("%s is missing from the table", n)
		}
	}
}

// TestActionSummary: ListActions shows the body types, so a client can
// find the messages to send without reading the source.
func TestActionSummary(t *testing.T) {
	for name, want := range map[string]string{
		ActionCreateTable: "Create a table (CreateTableRequest → TableInfo).",
		ActionVerify:      "Check a table's objects against their rows' size and sha256, a few seconds per call (VerifyRequest → VerifyResult stream).",
	} {
		a, _ := LookupAction(name)
		if got := a.Summary(); got != want {
			t.Errorf("%s: Summary() = %q, want %q", name, got, want)
		}
	}
}

// TestActionsIsACopy: a caller cannot change the table for everyone.
func TestActionsIsACopy(t *testing.T) {
	Actions()[0].Mutates = false
	if a, _ := LookupAction(Actions()[0].Name); a.Name == ActionCreateTable && !a.Mutates {
		t.Fatal("changing the result of Actions changed the table")
	}
}

func TestScopeAllows(t *testing.T) {
	for _, c := range []struct {
		have, need Scope
		ok         bool
	}{
		{ScopeRead, ScopeRead, true}, {ScopeRead, ScopeWrite, false}, {ScopeRead, ScopeAdmin, false},
		{ScopeWrite, ScopeRead, true}, {ScopeWrite, ScopeWrite, true}, {ScopeWrite, ScopeAdmin, false},
		{ScopeAdmin, ScopeRead, true}, {ScopeAdmin, ScopeWrite, true}, {ScopeAdmin, ScopeAdmin, true},
		{0, ScopeRead, false}, {ScopeAdmin, 0, false}, {ScopeAdmin + 1, ScopeRead, false},
	} {
		if got := c.have.Allows(c.need); got != c.ok {
			t.Errorf("%v.Allows(%v) = %t, want %t", c.have, c.need, got, c.ok)
		}
	}
	if ScopeRead.String() != "read" || ScopeWrite.String() != "write" || ScopeAdmin.String() != "admin" {
		t.Errorf("scope names %v %v %v", ScopeRead, ScopeWrite, ScopeAdmin)
	}
}
