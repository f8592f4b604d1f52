package sqlguard

import (
	"database/sql"
	"encoding/json"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"
)

// seeds are statements the fuzzer starts from and mutates.
var seeds = []string{
	"SELECT 1",
	"SELECT name, file.size FROM clips WHERE file.sha256 LIKE 'a%' ORDER BY 1 LIMIT 3",
	"WITH c AS (SELECT * FROM clips) SELECT count(*) FROM c JOIN range(3) r ON true",
	"SELECT * FROM read_text('/etc/passwd')",
	"SELECT (SELECT content FROM read_text('x'))",
	"SELECT * FROM clips, LATERAL (SELECT * FROM glob(clips.name))",
	"SELECT * FROM enable_logging('QueryLog')",
	"SELECT * FROM 'x.parquet'",
	`WITH "a.json" AS (SELECT 1) SELECT * FROM "a.json"`,
	"SELECT * FROM (WITH c AS (SELECT 1) SELECT * FROM c), c",
	"SELECT list_transform([1], x -> upper(x::VARCHAR)), row_number() OVER (ORDER BY name) FROM clips",
	"SELECT * FROM main.read_text('a') UNION ALL SELECT current_setting('threads')",
	"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r",
	"DESCRIBE clips",
	"SELECT * FROM clips PIVOT (count(*) FOR name IN ('a'))",
}

// FuzzCheck mutates SQL, has DuckDB parse it, and checks that whatever
// Check accepts holds, anywhere in its tree, only listed functions, lake
// tables or CTE names, and known node kinds. The oracle is deliberately
// blunt: it does not follow Check's walk, it scans every object.
func FuzzCheck(f *testing.F) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	for _, s := range seeds {
		f.Add(s)
	}
	isTable := func(name string) bool { return name == "clips" }
	f.Fuzz(func(t *testing.T, q string) {
		var tree string
		// The same call as the query role's parser (roles/query/guard.go).
		if err := db.QueryRow("SELECT json_serialize_sql($1::VARCHAR, skip_null := true, skip_empty := true)::VARCHAR", q).Scan(&tree); err != nil {
			t.Skip() // DuckDB could not even serialize the text
		}
		if Check([]byte(tree), isTable) != nil {
			return
		}
		var v any
		if err := json.Unmarshal([]byte(tree), &v); err != nil {
			t.Fatalf("accepted an unreadable tree: %v", err)
		}
		ctes := map[string]bool{}
		collect(v, func(o map[string]any) {
			if m, ok := o["cte_map"].(map[string]any); ok {
				entries, _ := m["map"].([]any)
				for _, e := range entries {
					if e, ok := e.(map[string]any); ok {
						ctes[strings.ToLower(e["key"].(string))] = true
					}
				}
			}
			if name, ok := o["cte_name"].(string); ok {
				ctes[strings.ToLower(name)] = true
			}
		})
		collect(v, func(o map[string]any) {
			if name, ok := o["function_name"].(string); ok {
				n := strings.ToLower(name)
				if !scalarFunctions[n] && !windowFunctions[n] && !tableFunctions[n] {
					t.Fatalf("accepted %q, whose tree calls %q", q, name)
				}
			}
			if o["type"] == "BASE_TABLE" {
				name, _ := o["table_name"].(string)
				schema, _ := o["schema_name"].(string)
				n, schema := strings.ToLower(name), strings.ToLower(schema)
				if !isTable(n) && !ctes[n] && !(schema == "information_schema" && infoSchemaViews[n]) {
					t.Fatalf("accepted %q, whose tree reads table %q", q, o["table_name"])
				}
			}
			if c, ok := o["class"].(string); ok && !allowedClasses[c] {
				t.Fatalf("accepted %q, whose tree holds an expression of class %s", q, c)
			}
		})
	})
}

// collect calls fn on every object of the tree.
func collect(v any, fn func(map[string]any)) {
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			collect(e, fn)
		}
	case map[string]any:
		fn(v)
		for _, e := range v {
			collect(e, fn)
		}
	}
}
