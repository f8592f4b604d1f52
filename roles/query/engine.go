package query

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/duckdb/duckdb-go/v2"
)

// ErrNotReadOnly: the statement is not a single SELECT.
var ErrNotReadOnly = errors.New("only a single read-only SELECT statement is allowed")

// engine is the locked-down DuckDB instance.
type engine struct {
	db      *sql.DB
	timeout time.Duration
}

type engineConfig struct {
	allowedDirs []string // absolute directories DuckDB may read
	memoryLimit string   // DuckDB memory_limit, e.g. "2GB"
	threads     int      // 0 = DuckDB's default
	timeout     time.Duration
}

func openEngine(ctx context.Context, cfg engineConfig) (*engine, error) {
	connector, err := duckdb.NewConnector("", nil)
	if err != nil {
		return nil, fmt.Errorf("query: open duckdb: %w", err)
	}
	db := sql.OpenDB(connector)
	if err := lockDown(ctx, db, cfg); err != nil {
		db.Close()
		return nil, err
	}
	return &engine{db: db, timeout: cfg.timeout}, nil
}

// lockDown applies the global settings on one connection, in the order
// DuckDB requires: allowed_directories can only be set while external
// access is on, and nothing can change once the configuration is locked.
func lockDown(ctx context.Context, db *sql.DB, cfg engineConfig) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	quoted := make([]string, len(cfg.allowedDirs))
	for i, d := range cfg.allowedDirs {
		if !strings.HasSuffix(d, "/") {
			d += "/"
		}
		quoted[i] = sqlString(d)
	}
	stmts := []string{
		"SET GLOBAL TimeZone = 'UTC'",
		"SET GLOBAL autoinstall_known_extensions = false",
		"SET GLOBAL autoload_known_extensions = false",
		"SET GLOBAL allowed_directories = [" + strings.Join(quoted, ", ") + "]",
		"SET GLOBAL enable_external_access = false",
	}
	if cfg.memoryLimit != "" {
		stmts = append(stmts, "SET GLOBAL memory_limit = "+sqlString(cfg.memoryLimit))
	}
	if cfg.threads > 0 {
		stmts = append(stmts, fmt.Sprintf("SET GLOBAL threads = %d", cfg.threads))
	}
	stmts = append(stmts, "SET GLOBAL lock_configuration = true")
	for _, s := range stmts {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("query: duckdb %q: %w", s, err)
		}
	}
	return nil
}

// sqlString quotes s as a SQL string literal.
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// sqlIdent quotes s as a SQL identifier.
func sqlIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// checkReadOnly prepares query with the non-context Prepare, which refuses
// more than one statement (PrepareContext would run all but the last!),
// and accepts only what DuckDB types as SELECT.
func checkReadOnly(conn *duckdb.Conn, query string) error {
	stmt, err := conn.Prepare(query)
	if err != nil {
		if strings.Contains(err.Error(), "PrepareContext") || strings.Contains(err.Error(), "multiple") {
			return fmt.Errorf("%w: the text holds more than one statement", ErrNotReadOnly)
		}
		return fmt.Errorf("%w: %v", errSQL, err)
	}
	defer stmt.Close()
	ds := stmt.(*duckdb.Stmt)
	t, err := ds.StatementType()
	if err != nil {
		return fmt.Errorf("%w: %v", errSQL, err)
	}
	if t != duckdb.STATEMENT_TYPE_SELECT {
		return fmt.Errorf("%w: this is a %s statement", ErrNotReadOnly, stmtTypeName(t))
	}
	if ds.NumInput() > 0 {
		return fmt.Errorf("%w: statement parameters are not supported", errUnsupported)
	}
	return nil
}

var (
	errSQL         = errors.New("SQL error")
	errUnsupported = errors.New("not supported")
)

func stmtTypeName(t duckdb.StmtType) string {
	names := map[duckdb.StmtType]string{
		duckdb.STATEMENT_TYPE_INSERT: "INSERT", duckdb.STATEMENT_TYPE_UPDATE: "UPDATE",
		duckdb.STATEMENT_TYPE_CREATE: "CREATE", duckdb.STATEMENT_TYPE_DELETE: "DELETE",
		duckdb.STATEMENT_TYPE_DROP: "DROP", duckdb.STATEMENT_TYPE_COPY: "COPY",
		duckdb.STATEMENT_TYPE_ATTACH: "ATTACH", duckdb.STATEMENT_TYPE_DETACH: "DETACH",
		duckdb.STATEMENT_TYPE_SET: "SET", duckdb.STATEMENT_TYPE_PRAGMA: "PRAGMA",
		duckdb.STATEMENT_TYPE_LOAD: "LOAD/INSTALL", duckdb.STATEMENT_TYPE_EXPORT: "EXPORT",
		duckdb.STATEMENT_TYPE_ALTER: "ALTER", duckdb.STATEMENT_TYPE_TRANSACTION: "transaction",
		duckdb.STATEMENT_TYPE_EXPLAIN: "EXPLAIN", duckdb.STATEMENT_TYPE_CALL: "CALL",
	}
	if n, ok := names[t]; ok {
		return n
	}
	return "non-SELECT"
}

// result is a running query: a RecordReader and the connection it holds.
type result struct {
	array.RecordReader
	conn   *sql.Conn
	cancel context.CancelFunc
}

// Close releases the reader, the connection and the statement timeout.
func (r *result) Close() {
	r.RecordReader.Release()
	r.cancel()
	r.conn.Close()
}

// query checks that q is read-only and runs it on a connection of its own
// (duckdb-go's Arrow objects are not safe for concurrent use). The result
// holds the connection until Close.
func (e *engine) query(ctx context.Context, q string) (*result, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	conn, err := e.db.Conn(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	var rdr array.RecordReader
	err = conn.Raw(func(dc any) error {
		dconn, ok := dc.(*duckdb.Conn)
		if !ok {
			return fmt.Errorf("query: unexpected driver connection %T", dc)
		}
		if err := checkReadOnly(dconn, q); err != nil {
			return err
		}
		var err error
		rdr, err = arrowQuery(ctx, dconn, q)
		return err
	})
	if err != nil {
		cancel()
		conn.Close()
		return nil, err
	}
	return &result{RecordReader: rdr, conn: conn, cancel: cancel}, nil
}

// check runs only the read-only check of q.
func (e *engine) check(ctx context.Context, q string) error {
	conn, err := e.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		dconn, ok := dc.(*duckdb.Conn)
		if !ok {
			return fmt.Errorf("query: unexpected driver connection %T", dc)
		}
		return checkReadOnly(dconn, q)
	})
}

// limitZero wraps a checked SELECT so that it yields its schema and no
// rows. The newlines keep a trailing line comment from eating the ")".
func limitZero(q string) string {
	q = strings.TrimRight(strings.TrimSpace(q), ";")
	return "SELECT * FROM (\n" + q + "\n) AS lake_schema_probe LIMIT 0"
}

// exec runs a trusted statement of the role itself (view definitions).
func (e *engine) exec(ctx context.Context, stmt string) error {
	_, err := e.db.ExecContext(ctx, stmt)
	return err
}

func (e *engine) close() error { return e.db.Close() }
