package wire

import (
	"strings"
	"testing"
)

// TestActionNames: the action types are part of the protocol between the
// roles and clients; they must be distinct and stay in lake's namespace.
func TestActionNames(t *testing.T) {
	names := []string{ActionCreateTable, ActionListTables, ActionDescribeTable, ActionHistory, ActionSnapshot, ActionDiscover, ActionStatus, ActionVerify}
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
}
