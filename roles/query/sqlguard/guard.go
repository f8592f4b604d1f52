package sqlguard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/lakedata/lake/wire"
)

// Sentinel errors; every error Check returns wraps one of them.
var (
	// ErrRefused: the statement uses a function, table or construct that
	// lake SQL does not allow. The error is a *Refusal naming it. It is
	// wire.ErrSQLNotAllowed (InvalidArgument, SQL_NOT_ALLOWED).
	ErrRefused = wire.ErrSQLNotAllowed
	// ErrNotSelect: the text is not exactly one SELECT statement.
	ErrNotSelect = errors.New("not a single SELECT statement")
	// ErrSyntax: DuckDB could not parse the text.
	ErrSyntax = errors.New("SQL syntax error")
)

// Refusal names the first thing in a statement that lake SQL does not
// allow.
type Refusal struct {
	Kind string // "function", "table function", "table", "construct", "CTE name"
	Name string
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("%s %s is not allowed in lake SQL", r.Kind, quote(r.Name))
}

// Unwrap makes errors.Is(err, ErrRefused) true.
func (r *Refusal) Unwrap() error { return ErrRefused }

// NotSelect is ErrNotSelect with DuckDB's reason.
type NotSelect struct{ Statements int }

func (e *NotSelect) Error() string {
	if e.Statements > 1 {
		return fmt.Sprintf("the text holds %d statements", e.Statements)
	}
	if e.Statements == 0 {
		return "the text holds no statement"
	}
	return "the text holds a statement that is not a SELECT"
}

func (e *NotSelect) Unwrap() error { return ErrNotSelect }

func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// Check decides from tree, the output of DuckDB's json_serialize_sql for
// the caller's text, whether the statement may run. isTable reports
// whether a lower-case name is a lake table (a view of the role). An AT
// clause (time travel) is refused: see Analyze.
func Check(tree []byte, isTable func(name string) bool) error {
	c := &checker{isTable: isTable}
	return c.check(tree)
}

func (c *checker) check(tree []byte) error {
	var top struct {
		Error      bool              `json:"error"`
		ErrorType  string            `json:"error_type"`
		Message    string            `json:"error_message"`
		Statements []json.RawMessage `json:"statements"`
	}
	if err := json.Unmarshal(tree, &top); err != nil {
		return fmt.Errorf("%w: unreadable parse tree: %v", ErrRefused, err)
	}
	if top.Error {
		if top.ErrorType == "parser" {
			return fmt.Errorf("%w: %s", ErrSyntax, top.Message)
		}
		// "Only SELECT statements can be serialized": some statement of
		// the text is not a SELECT.
		return &NotSelect{Statements: 1}
	}
	if len(top.Statements) != 1 {
		return &NotSelect{Statements: len(top.Statements)}
	}
	d := json.NewDecoder(bytes.NewReader(top.Statements[0]))
	d.UseNumber()
	var stmt any
	if err := d.Decode(&stmt); err != nil {
		return fmt.Errorf("%w: unreadable parse tree: %v", ErrRefused, err)
	}
	return c.walk(stmt, nil)
}

// scope is the CTE names visible at a point of the tree, innermost first.
type scope struct {
	name   string
	parent *scope
}

func (s *scope) has(name string) bool {
	for ; s != nil; s = s.parent {
		if s.name == name {
			return true
		}
	}
	return false
}

type checker struct {
	isTable func(string) bool
	// allowAt accepts AT clauses on lake tables and collects them in
	// timeTravel (Analyze).
	allowAt    bool
	timeTravel []TimeTravel
	// hidden accepts views of hiddenSchema (CheckRewritten).
	hiddenSchema string
	hidden       func(string) bool
}

// walk visits every value of the tree. Nothing is skipped: a field this
// package does not know is still walked, so a function call can hide in
// no corner of the tree.
func (c *checker) walk(v any, sc *scope) error {
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			if err := c.walk(e, sc); err != nil {
				return err
			}
		}
	case map[string]any:
		return c.object(v, sc)
	}
	return nil
}

func (c *checker) object(o map[string]any, sc *scope) error {
	if class, ok := o["class"]; ok {
		return c.expression(o, class, sc)
	}
	typ, isString := o["type"].(string)
	if !isString {
		if _, ok := o["function_name"]; ok {
			return &Refusal{Kind: "construct", Name: "function call outside an expression"}
		}
		return c.fields(o, sc, nil)
	}
	switch typ {
	case "SELECT_NODE", "SET_OPERATION_NODE", "CTE_NODE":
		return c.queryNode(o, sc)
	case "RECURSIVE_CTE_NODE":
		name, _ := o["cte_name"].(string)
		if err := checkCTEName(name); err != nil {
			return err
		}
		return c.queryNode(o, &scope{name: strings.ToLower(name), parent: sc})
	case "BASE_TABLE":
		if err := c.baseTable(o, sc); err != nil {
			return err
		}
	case "TABLE_FUNCTION":
		return c.tableFunction(o, sc)
	case "SHOW_REF":
		// DESCRIBE of a query; SUMMARIZE and SHOW of other kinds are not
		// needed and not allowed.
		if o["show_type"] != "DESCRIBE" {
			return &Refusal{Kind: "construct", Name: fmt.Sprint(o["show_type"])}
		}
		if name, _ := o["table_name"].(string); name != "" {
			return &Refusal{Kind: "construct", Name: "DESCRIBE " + name}
		}
	default:
		if !allowedTypes[typ] {
			return &Refusal{Kind: "construct", Name: typ}
		}
	}
	if _, ok := o["function_name"]; ok {
		return &Refusal{Kind: "construct", Name: typ}
	}
	return c.fields(o, sc, nil)
}

// fields walks every field of o but those in skip.
func (c *checker) fields(o map[string]any, sc *scope, skip map[string]bool) error {
	for k, v := range o {
		if skip[k] {
			continue
		}
		if err := c.walk(v, sc); err != nil {
			return err
		}
	}
	return nil
}

// queryNode brings the node's CTEs into scope the way DuckDB binds them:
// each CTE sees the ones before it (and a recursive one itself, through
// its RECURSIVE_CTE_NODE), the rest of the node sees them all.
func (c *checker) queryNode(o map[string]any, sc *scope) error {
	if cm, ok := o["cte_map"].(map[string]any); ok {
		entries, _ := cm["map"].([]any)
		for _, e := range entries {
			entry, ok := e.(map[string]any)
			if !ok {
				return &Refusal{Kind: "construct", Name: "CTE"}
			}
			name, _ := entry["key"].(string)
			if err := checkCTEName(name); err != nil {
				return err
			}
			if err := c.walk(entry["value"], sc); err != nil {
				return err
			}
			sc = &scope{name: strings.ToLower(name), parent: sc}
		}
	} else if o["cte_map"] != nil {
		return &Refusal{Kind: "construct", Name: "CTE"}
	}
	return c.fields(o, sc, map[string]bool{"cte_map": true})
}

// checkCTEName keeps CTE names to plain identifiers. Scoping is followed
// exactly, but should it ever be wrong, a name that DuckDB then looked up
// elsewhere could still never be a file path (DuckDB's replacement scans
// read 'dir/x.parquet' as a file).
func checkCTEName(name string) error {
	if name == "" || len(name) > 128 {
		return &Refusal{Kind: "CTE name", Name: name}
	}
	for i, r := range name {
		ok := r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9')
		if !ok {
			return &Refusal{Kind: "CTE name", Name: name}
		}
	}
	return nil
}

// infoSchemaViews are the information_schema views a caller may read:
// they list the lake tables and their columns.
var infoSchemaViews = map[string]bool{"schemata": true, "tables": true, "columns": true}

func (c *checker) baseTable(o map[string]any, sc *scope) error {
	name, _ := o["table_name"].(string)
	schema, _ := o["schema_name"].(string)
	catalog, _ := o["catalog_name"].(string)
	lname, lschema := strings.ToLower(name), strings.ToLower(schema)
	var lakeTable bool
	switch {
	case catalog == "" && schema == "" && sc.has(lname):
	case catalog == "" && (lschema == "" || lschema == "main") && c.isTable(lname):
		lakeTable = true
	case catalog == "" && lschema == "information_schema" && infoSchemaViews[lname]:
	case catalog == "" && c.hidden != nil && schema == c.hiddenSchema && c.hidden(name):
	default:
		full := name
		if schema != "" {
			full = schema + "." + full
		}
		if catalog != "" {
			full = catalog + "." + full
		}
		return &Refusal{Kind: "table", Name: full}
	}
	if at := o["at_clause"]; at != nil {
		if !c.allowAt || !lakeTable {
			return &Refusal{Kind: "construct", Name: "AT clause on " + name + ", which is not a lake table"}
		}
		tt, err := timeTravelOf(lname, at)
		if err != nil {
			return err
		}
		c.timeTravel = append(c.timeTravel, tt)
	}
	return nil
}

func (c *checker) tableFunction(o map[string]any, sc *scope) error {
	fn, ok := o["function"].(map[string]any)
	if !ok || fn["class"] != "FUNCTION" {
		return &Refusal{Kind: "construct", Name: "table function"}
	}
	name, err := functionName(fn)
	if err != nil {
		return err
	}
	if !tableFunctions[name] {
		return &Refusal{Kind: "table function", Name: name}
	}
	// The arguments are ordinary expressions.
	if err := c.fields(fn, sc, map[string]bool{"class": true, "type": true, "function_name": true, "schema": true, "catalog": true}); err != nil {
		return err
	}
	return c.fields(o, sc, map[string]bool{"function": true, "type": true})
}

// functionName is the lower-case name of a FUNCTION or WINDOW node, which
// may be qualified only by the schema main.
func functionName(o map[string]any) (string, error) {
	name, _ := o["function_name"].(string)
	schema, _ := o["schema"].(string)
	catalog, _ := o["catalog"].(string)
	if catalog != "" || (schema != "" && !strings.EqualFold(schema, "main")) {
		full := schema + "." + name
		if catalog != "" {
			full = catalog + "." + full
		}
		return "", &Refusal{Kind: "function", Name: full}
	}
	return strings.ToLower(name), nil
}

func (c *checker) expression(o map[string]any, class any, sc *scope) error {
	cl, _ := class.(string)
	if !allowedClasses[cl] {
		return &Refusal{Kind: "construct", Name: fmt.Sprint(class)}
	}
	typ, _ := o["type"].(string)
	if !allowedExprTypes[typ] {
		return &Refusal{Kind: "construct", Name: typ}
	}
	switch cl {
	case "FUNCTION":
		name, err := functionName(o)
		if err != nil {
			return err
		}
		if !scalarFunctions[name] {
			return &Refusal{Kind: "function", Name: name}
		}
	case "WINDOW":
		name, err := functionName(o)
		if err != nil {
			return err
		}
		if !windowFunctions[name] && !scalarFunctions[name] {
			return &Refusal{Kind: "function", Name: name}
		}
	default:
		if _, ok := o["function_name"]; ok {
			return &Refusal{Kind: "construct", Name: cl}
		}
	}
	return c.fields(o, sc, map[string]bool{"class": true, "type": true})
}
