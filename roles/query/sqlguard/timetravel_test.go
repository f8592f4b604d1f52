package sqlguard

import (
	"errors"
	"strings"
	"testing"
)

// Trees as DuckDB 1.5's json_serialize_sql gives them (skip_null and
// skip_empty), cut to what the walk looks at.
const (
	atVersion   = `{"error":false,"statements":[{"node":{"type":"SELECT_NODE","select_list":[{"class":"STAR","type":"STAR"}],"from_table":{"type":"BASE_TABLE","table_name":"Clips","at_clause":{"unit":"VERSION","expr":{"class":"CONSTANT","type":"VALUE_CONSTANT","value":{"type":{"id":"INTEGER"},"is_null":false,"value":3}}}}}}]}`
	atTimestamp = `{"error":false,"statements":[{"node":{"type":"SELECT_NODE","select_list":[{"class":"STAR","type":"STAR"}],"from_table":{"type":"BASE_TABLE","alias":"c","table_name":"clips","at_clause":{"unit":"TIMESTAMP","expr":{"class":"CAST","type":"OPERATOR_CAST","child":{"class":"CONSTANT","type":"VALUE_CONSTANT","value":{"type":{"id":"VARCHAR"},"is_null":false,"value":"2026-12-01 10:00:00"}},"cast_type":{"id":"TIMESTAMP WITH TIME ZONE"},"try_cast":false}}}}}]}`
	atDecimal   = `{"error":false,"statements":[{"node":{"type":"SELECT_NODE","select_list":[{"class":"STAR","type":"STAR"}],"from_table":{"type":"BASE_TABLE","table_name":"clips","at_clause":{"unit":"VERSION","expr":{"class":"CONSTANT","type":"VALUE_CONSTANT","value":{"type":{"id":"DECIMAL","type_info":{"width":2,"scale":1}},"is_null":false,"value":15}}}}}}]}`
	hiddenRef   = `{"error":false,"statements":[{"node":{"type":"SELECT_NODE","select_list":[{"class":"STAR","type":"STAR"}],"from_table":{"type":"BASE_TABLE","schema_name":"lake_versions","table_name":"clips@3","alias":"clips"}}}]}`
)

func isClips(name string) bool { return name == "clips" }

func TestAnalyzeTimeTravel(t *testing.T) {
	got, err := Analyze([]byte(atVersion), isClips)
	if err != nil || len(got) != 1 || got[0] != (TimeTravel{Table: "clips", Version: 3}) {
		t.Errorf("AT (VERSION => 3): %+v, %v", got, err)
	}
	got, err = Analyze([]byte(atTimestamp), isClips)
	want := TimeTravel{Table: "clips", Timestamp: "2026-12-01 10:00:00", TimestampType: "TIMESTAMP WITH TIME ZONE"}
	if err != nil || len(got) != 1 || got[0] != want {
		t.Errorf("AT (TIMESTAMP => …): %+v, %v", got, err)
	}
	for name, tree := range map[string]string{"a decimal": atDecimal} {
		if _, err := Analyze([]byte(tree), isClips); !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v, want refused", name, err)
		}
	}
	// Check (any caller but the time-travel path) refuses AT outright,
	// and an AT on a name that is not a lake table is refused.
	if err := Check([]byte(atVersion), isClips); !errors.Is(err, ErrRefused) {
		t.Errorf("Check of an AT clause: %v", err)
	}
	if _, err := Analyze([]byte(atVersion), func(string) bool { return false }); !errors.Is(err, ErrRefused) {
		t.Errorf("AT on an unknown table: %v", err)
	}
	// The hidden views pass only CheckRewritten, and only those named.
	if err := Check([]byte(hiddenRef), isClips); !errors.Is(err, ErrRefused) {
		t.Errorf("Check of a hidden view: %v", err)
	}
	if err := CheckRewritten([]byte(hiddenRef), isClips, "lake_versions", func(v string) bool { return v == "clips@3" }); err != nil {
		t.Errorf("CheckRewritten of the view it put in: %v", err)
	}
	if err := CheckRewritten([]byte(hiddenRef), isClips, "lake_versions", func(v string) bool { return v == "clips@4" }); !errors.Is(err, ErrRefused) {
		t.Errorf("CheckRewritten of another view: %v", err)
	}
	if err := CheckRewritten([]byte(atVersion), isClips, "lake_versions", func(string) bool { return true }); !errors.Is(err, ErrRefused) {
		t.Errorf("CheckRewritten of an AT clause left: %v", err)
	}
}

func TestRewrite(t *testing.T) {
	full := `{"error":false,"statements":[{"node":{"type":"SELECT_NODE","from_table":{"type":"BASE_TABLE","alias":"","schema_name":"","catalog_name":"","table_name":"Clips","sample":null,"at_clause":{"unit":"VERSION","expr":{"class":"CONSTANT","type":"VALUE_CONSTANT","value":{"type":{"id":"INTEGER"},"is_null":false,"value":3}}},"query_location":18446744073709551615}}}]}`
	var asked []TimeTravel
	out, err := Rewrite([]byte(full), func(tt TimeTravel) (string, string, error) {
		asked = append(asked, tt)
		return "lake_versions", "clips@3", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"schema_name":"lake_versions"`, `"table_name":"clips@3"`, `"alias":"Clips"`, `"at_clause":null`, `"query_location":18446744073709551615`, `"sample":null`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("rewritten tree lacks %s: %s", want, out)
		}
	}
	if len(asked) != 1 || asked[0].Version != 3 || asked[0].Table != "clips" {
		t.Errorf("resolve was asked %+v", asked)
	}
	boom := errors.New("boom")
	if _, err := Rewrite([]byte(full), func(TimeTravel) (string, string, error) { return "", "", boom }); !errors.Is(err, boom) {
		t.Errorf("a resolve error: %v", err)
	}
}
