package sqlguard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// TimeTravel is one AT clause of a statement: a lake table read at a
// version (AT (VERSION => n)) or at a time (AT (TIMESTAMP => ts)).
type TimeTravel struct {
	Table string // lower-case lake table name
	// Version is n of AT (VERSION => n); meaningful when Timestamp is "".
	Version int64
	// Timestamp is the text of the time of AT (TIMESTAMP => ts), and
	// TimestampType the type it is read as: "TIMESTAMP" (UTC),
	// "TIMESTAMP WITH TIME ZONE" or "DATE".
	Timestamp, TimestampType string
}

func (tt TimeTravel) String() string {
	if tt.Timestamp != "" {
		return fmt.Sprintf("%s AT (TIMESTAMP => %s %s)", tt.Table, tt.TimestampType, quote(tt.Timestamp))
	}
	return fmt.Sprintf("%s AT (VERSION => %d)", tt.Table, tt.Version)
}

// timestampTypes are the types a time-travel time may be written as.
var timestampTypes = map[string]bool{"TIMESTAMP": true, "TIMESTAMP WITH TIME ZONE": true, "DATE": true}

// timeTravelOf reads a BASE_TABLE's at_clause. Only constants are
// allowed: VERSION => an integer literal, TIMESTAMP => a string literal,
// cast (TIMESTAMP '…', '…'::TIMESTAMPTZ, DATE '…') or not. Anything
// else (an expression, a parameter, a subquery) would need binding to know
// which files to read.
func timeTravelOf(table string, at any) (TimeTravel, error) {
	refuse := func(what string) (TimeTravel, error) {
		return TimeTravel{}, &Refusal{Kind: "construct", Name: "AT (" + what + ") on " + table + "; an AT clause takes VERSION => an integer literal or TIMESTAMP => a timestamp literal"}
	}
	clause, _ := at.(map[string]any)
	unit, _ := clause["unit"].(string)
	expr, _ := clause["expr"].(map[string]any)
	switch strings.ToUpper(unit) {
	case "VERSION":
		v, typ, ok := constant(expr)
		n, isNumber := v.(json.Number)
		if !ok || !isNumber || !integerTypes[typ] {
			return refuse("VERSION => something other than an integer literal")
		}
		version, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil {
			return refuse("VERSION => " + n.String())
		}
		return TimeTravel{Table: table, Version: version}, nil
	case "TIMESTAMP":
		typ := "TIMESTAMP"
		if expr["class"] == "CAST" && expr["type"] == "OPERATOR_CAST" {
			castType, _ := expr["cast_type"].(map[string]any)
			id, _ := castType["id"].(string)
			if expr["try_cast"] == true || !timestampTypes[id] || castType["type_info"] != nil {
				return refuse("TIMESTAMP => a cast to " + id)
			}
			typ = id
			expr, _ = expr["child"].(map[string]any)
		}
		v, valueType, ok := constant(expr)
		s, isString := v.(string)
		if !ok || !isString || valueType != "VARCHAR" || s == "" {
			return refuse("TIMESTAMP => something other than a timestamp literal")
		}
		return TimeTravel{Table: table, Timestamp: s, TimestampType: typ}, nil
	}
	return refuse(unit)
}

// integerTypes are the types DuckDB gives an integer literal.
var integerTypes = map[string]bool{"TINYINT": true, "SMALLINT": true, "INTEGER": true, "BIGINT": true, "HUGEINT": true,
	"UTINYINT": true, "USMALLINT": true, "UINTEGER": true, "UBIGINT": true, "UHUGEINT": true}

// constant is the value and type id of a non-null VALUE_CONSTANT
// expression.
func constant(expr map[string]any) (any, string, bool) {
	if expr["class"] != "CONSTANT" || expr["type"] != "VALUE_CONSTANT" {
		return nil, "", false
	}
	v, _ := expr["value"].(map[string]any)
	if v == nil || v["is_null"] != false {
		return nil, "", false
	}
	typ, _ := v["type"].(map[string]any)
	id, _ := typ["id"].(string)
	return v["value"], id, true
}

// Analyze is Check that also returns the statement's AT clauses, each
// on a lake table (an AT clause on anything else is refused). A caller
// that runs the statement must resolve them with Rewrite: DuckDB itself
// refuses AT on a view.
func Analyze(tree []byte, isTable func(name string) bool) ([]TimeTravel, error) {
	c := &checker{isTable: isTable, allowAt: true}
	err := c.check(tree)
	return c.timeTravel, err
}

// CheckRewritten checks tree, DuckDB's parse tree of a statement that
// Rewrite produced, the way Check checks a caller's: it must still pass,
// with no AT clause left, and may besides read the views in schema
// hiddenSchema that hidden accepts (those Rewrite put in). A caller can
// never name those: Check refuses every schema but main and
// information_schema.
func CheckRewritten(tree []byte, isTable func(name string) bool, hiddenSchema string, hidden func(name string) bool) error {
	c := &checker{isTable: isTable, hiddenSchema: hiddenSchema, hidden: hidden}
	return c.check(tree)
}

// Rewrite replaces, in tree (the output of json_serialize_sql without
// skip_null or skip_empty, which json_deserialize_sql needs), every
// reference with an AT clause by the view resolve names for it, keeping
// the name the rest of the statement knows the reference by. The result
// is a tree for json_deserialize_sql. Call it only on a statement Analyze
// accepted: it trusts that every AT clause is one of a lake table.
func Rewrite(tree []byte, resolve func(TimeTravel) (schema, view string, err error)) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(tree))
	d.UseNumber()
	var root any
	if err := d.Decode(&root); err != nil {
		return nil, fmt.Errorf("%w: unreadable parse tree: %v", ErrRefused, err)
	}
	if err := rewrite(root, resolve); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	e := json.NewEncoder(&out)
	e.SetEscapeHTML(false)
	if err := e.Encode(root); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func rewrite(v any, resolve func(TimeTravel) (string, string, error)) error {
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			if err := rewrite(e, resolve); err != nil {
				return err
			}
		}
	case map[string]any:
		if v["type"] == "BASE_TABLE" && v["at_clause"] != nil {
			name, _ := v["table_name"].(string)
			tt, err := timeTravelOf(strings.ToLower(name), v["at_clause"])
			if err != nil {
				return err
			}
			schema, view, err := resolve(tt)
			if err != nil {
				return err
			}
			if alias, _ := v["alias"].(string); alias == "" {
				v["alias"] = name // so that clips.col still means this reference
			}
			v["catalog_name"], v["schema_name"], v["table_name"], v["at_clause"] = "", schema, view, nil
			return nil
		}
		for _, e := range v {
			if err := rewrite(e, resolve); err != nil {
				return err
			}
		}
	}
	return nil
}
