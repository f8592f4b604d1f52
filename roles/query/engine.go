package query

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/duckdb/duckdb-go/v2"
)

// engine is the locked-down DuckDB instance.
type engine struct {
	db      *sql.DB
	timeout time.Duration
	watch   *watchdog
	guards  guardCache
	parser  *parser
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
	// No idle connections: every statement gets a new one and closes it,
	// so nothing a statement leaves on its connection reaches the next
	// caller. duckdb_connect costs microseconds (BenchmarkSelectOne).
	db.SetMaxIdleConns(0)
	if err := lockDown(ctx, db, cfg); err != nil {
		db.Close()
		return nil, err
	}
	limit, err := memoryLimitBytes(cfg.memoryLimit)
	if err != nil {
		db.Close()
		return nil, err
	}
	capAllocations(allocationCap(limit))
	ceiling := limit + memoryMargin(limit)
	p, err := newParser(ctx, connector)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &engine{db: db, timeout: cfg.timeout, watch: startWatchdog(ceiling), parser: p}, nil
}

// memoryLimitBytes is DuckDB's memory limit in bytes: the configured one,
// or DuckDB's default, 80 % of the machine's memory.
func memoryLimitBytes(limit string) (int64, error) {
	var n int64
	var err error
	if limit != "" {
		n, err = parseMemoryLimit(limit)
	} else if n, err = physicalMemory(); err == nil {
		n = n / 10 * 8
	}
	if err != nil {
		return 0, fmt.Errorf("query: %w", err)
	}
	return n, nil
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
// and accepts only what DuckDB types as SELECT. It returns the names of
// the result columns.
func checkReadOnly(conn *duckdb.Conn, query string) ([]string, error) {
	stmt, err := conn.Prepare(query)
	if err != nil {
		if strings.Contains(err.Error(), "PrepareContext") || strings.Contains(err.Error(), "multiple") {
			return nil, fmt.Errorf("%w: the text holds more than one statement", ErrNotReadOnly)
		}
		// Preparing binds, so "INSERT INTO clips …" fails on the view
		// before its type is known; say what the user needs to hear.
		if kw := leadingKeyword(query); writeKeywords[kw] {
			return nil, fmt.Errorf("%w: this is a statement of type %s", ErrNotReadOnly, kw)
		}
		return nil, fmt.Errorf("%w: %v", errSQL, err)
	}
	defer stmt.Close()
	ds := stmt.(*duckdb.Stmt)
	t, err := ds.StatementType()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errSQL, err)
	}
	if t != duckdb.STATEMENT_TYPE_SELECT {
		return nil, fmt.Errorf("%w: this is a statement of type %s", ErrNotReadOnly, stmtTypeName(t))
	}
	if ds.NumInput() > 0 {
		return nil, fmt.Errorf("%w: statement parameters are not supported", errUnsupported)
	}
	n, err := ds.ColumnCount()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errSQL, err)
	}
	names := make([]string, n)
	for i := range names {
		if names[i], err = ds.ColumnName(i); err != nil {
			return nil, fmt.Errorf("%w: %v", errSQL, err)
		}
	}
	return names, nil
}

// writeKeywords begin statements that are never a SELECT. They only
// word the error of a statement DuckDB could not prepare; the check
// itself is DuckDB's statement type.
var writeKeywords = map[string]bool{
	"INSERT": true, "UPDATE": true, "DELETE": true, "MERGE": true, "TRUNCATE": true,
	"CREATE": true, "DROP": true, "ALTER": true, "COPY": true, "EXPORT": true, "IMPORT": true,
	"ATTACH": true, "DETACH": true, "INSTALL": true, "LOAD": true, "FORCE": true, "SET": true,
	"RESET": true, "PRAGMA": true, "CALL": true, "CHECKPOINT": true, "VACUUM": true,
	"BEGIN": true, "START": true, "COMMIT": true, "ROLLBACK": true, "ABORT": true, "USE": true,
}

// leadingKeyword returns the first word of q in upper case, skipping
// white space and comments.
func leadingKeyword(q string) string {
	for {
		q = strings.TrimLeft(q, " \t\r\n(")
		switch {
		case strings.HasPrefix(q, "--"):
			_, q, _ = strings.Cut(q, "\n")
		case strings.HasPrefix(q, "/*"):
			_, q, _ = strings.Cut(q, "*/")
		default:
			end := strings.IndexFunc(q, func(r rune) bool { return !unicode.IsLetter(r) })
			if end < 0 {
				end = len(q)
			}
			return strings.ToUpper(q[:end])
		}
	}
}

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
		duckdb.STATEMENT_TYPE_VACUUM: "VACUUM", duckdb.STATEMENT_TYPE_ANALYZE: "ANALYZE",
	}
	if n, ok := names[t]; ok {
		return n
	}
	return "non-SELECT"
}

// result is a running query: a RecordReader and the connection it holds.
type result struct {
	array.RecordReader
	conn    *sql.Conn
	ctx     context.Context // the statement's, bounded by the timeout
	timeout time.Duration
	cancel  context.CancelFunc
	forget  func() // takes the statement off the watchdog
}

// Err is the reader's error, saying so when the statement was stopped.
func (r *result) Err() error {
	err := r.RecordReader.Err()
	if err == nil {
		return nil
	}
	return stopped(r.ctx, r.timeout, sqlError(err))
}

// sqlError wraps an error DuckDB gave a statement: ErrMemoryExhausted
// when DuckDB itself ran out of its memory limit, errSQL otherwise.
func sqlError(err error) error {
	var de *duckdb.Error
	if (errors.As(err, &de) && de.Type == duckdb.ErrorTypeOutOfMemory) ||
		// Errors from an Arrow stream arrive as text; this is the prefix
		// duckdb-go itself types errors by.
		strings.Contains(err.Error(), "Out of Memory Error") {
		return fmt.Errorf("%w: %v", ErrMemoryExhausted, err)
	}
	return fmt.Errorf("%w: %v", errSQL, err)
}

// stopped explains err when ctx has ended: DuckDB reports an interrupt,
// but the client needs ResourceExhausted (the memory watchdog),
// DeadlineExceeded (the statement timeout or the call's deadline) or
// Canceled. Other errors pass unchanged.
func stopped(ctx context.Context, timeout time.Duration, err error) error {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, ErrMemoryExhausted):
		return cause
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("statement stopped at its deadline (statement timeout %v): %w", timeout, context.DeadlineExceeded)
	case ctx.Err() != nil:
		return fmt.Errorf("statement stopped: %w", ctx.Err())
	}
	return err
}

// Close releases the reader, the connection and the statement timeout.
func (r *result) Close() {
	r.RecordReader.Release()
	r.forget()
	r.cancel()
	r.conn.Close()
}

// statement is one caller statement on a connection of its own
// (duckdb-go's Arrow objects are not safe for concurrent use, and a fresh
// connection carries nothing of an earlier caller). Its context ends at
// the statement timeout, or when the watchdog stops it.
type statement struct {
	ctx    context.Context
	cancel context.CancelFunc
	conn   *sql.Conn
	forget func()
	// interrupt calls duckdb_interrupt on conn (nil if unavailable).
	interrupt func()
	guards    *guardCache
	parser    *parser
	// release lets go of the version views the statement reads (time
	// travel), once it has run.
	release func()
}

func (e *engine) begin(ctx context.Context) (*statement, error) {
	ctx, cancelCause := context.WithCancelCause(ctx)
	ctx, cancelTimeout := context.WithTimeout(ctx, e.timeout)
	cancel := func() { cancelTimeout(); cancelCause(nil) }
	conn, err := e.db.Conn(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	var interrupt func()
	err = conn.Raw(func(dc any) error {
		dconn, ok := dc.(*duckdb.Conn)
		if !ok {
			return fmt.Errorf("query: unexpected driver connection %T", dc)
		}
		interrupt = interruptHandle(dconn)
		return nil
	})
	if err != nil {
		cancel()
		conn.Close()
		return nil, err
	}
	forget := e.watch.track(cancelCause, interrupt)
	return &statement{ctx: ctx, cancel: cancel, conn: conn, forget: forget, interrupt: interrupt, guards: &e.guards, parser: e.parser, release: func() {}}, nil
}

func (st *statement) close() {
	st.release()
	st.forget()
	st.cancel()
	st.conn.Close()
}

// check runs both walls on a statement: the allow-list over DuckDB's
// parse tree of q (nothing is bound or planned yet), which also rewrites
// its AT clauses, then the SELECT-only Prepare of wrap applied to the
// text that runs (q or its rewriting). It returns that text, wrapped, and
// the names of its result columns. The Prepare is interrupted when the
// statement's context ends: binding and constant folding can take minutes
// and gigabytes.
func (st *statement) check(dconn *duckdb.Conn, q string, wrap func(string) string, tables tableSource) (string, []string, error) {
	text, release, err := guard(st.ctx, st.parser, q, tables, st.guards)
	if err != nil {
		return "", nil, err
	}
	st.release = release
	text = wrap(text)
	stop := interruptOnDone(st.ctx, st.interrupt)
	defer stop()
	names, err := checkReadOnly(dconn, text)
	return text, names, err
}

func unwrapped(q string) string { return q }

// interruptOnDone calls interrupt, every 100 ms, from when ctx ends until
// stop is called.
func interruptOnDone(ctx context.Context, interrupt func()) (stop func()) {
	if interrupt == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			interrupt()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	// Waiting for the goroutine keeps a late interrupt from hitting the
	// next thing the connection runs.
	return func() { close(done); <-finished }
}

// query checks that q is allowed and read-only and runs it. The result
// holds the connection until Close.
func (e *engine) query(ctx context.Context, q string, tables tableSource) (*result, error) {
	return e.start(ctx, q, unwrapped, tables)
}

// start checks q and runs wrap of it (of its rewriting, when it travels
// in time).
func (e *engine) start(ctx context.Context, q string, wrap func(string) string, tables tableSource) (*result, error) {
	st, err := e.begin(ctx)
	if err != nil {
		return nil, err
	}
	var rdr array.RecordReader
	var stopInterrupting func()
	err = st.conn.Raw(func(dc any) error {
		dconn := dc.(*duckdb.Conn)
		text, _, err := st.check(dconn, q, wrap, tables)
		if err != nil {
			return err
		}
		// The result streams: DuckDB goes on executing inside every
		// fetch until the last, so the statement is interruptible for
		// as long as it is read, not only while it starts.
		stopInterrupting = interruptOnDone(st.ctx, st.interrupt)
		if rdr, err = arrowQuery(st.ctx, dconn, text); err != nil {
			stopInterrupting()
		}
		return err
	})
	if err != nil {
		err = stopped(st.ctx, e.timeout, err)
		st.close()
		return nil, err
	}
	forget := func() { stopInterrupting(); st.forget(); st.release() }
	return &result{RecordReader: rdr, conn: st.conn, ctx: st.ctx, timeout: e.timeout, cancel: st.cancel, forget: forget}, nil
}

// check runs only the checks of q and returns the names of its result
// columns.
func (e *engine) check(ctx context.Context, q string, tables tableSource) ([]string, error) {
	st, err := e.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer st.close()
	var names []string
	err = st.conn.Raw(func(dc any) error {
		var err error
		_, names, err = st.check(dc.(*duckdb.Conn), q, unwrapped, tables)
		return err
	})
	if err != nil {
		return nil, stopped(st.ctx, e.timeout, err)
	}
	return names, nil
}

// schema returns the Arrow schema of the checked SELECT q (whose result
// columns are named names) without running it. DuckDB's Arrow interface
// needs a result, so a LIMIT 0 probe yields the types; the names are q's
// own, since the probe's SELECT * renames duplicates (a, a → a, a_1).
func (e *engine) schema(ctx context.Context, q string, names []string, tables tableSource) (*arrow.Schema, error) {
	res, err := e.start(ctx, q, limitZero, tables)
	if err != nil {
		return nil, err
	}
	defer res.Close()
	s := res.Schema()
	if s.NumFields() != len(names) {
		return nil, fmt.Errorf("query: schema probe of %d columns for a statement of %d", s.NumFields(), len(names))
	}
	fields := s.Fields()
	for i := range fields {
		fields[i].Name = names[i]
	}
	md := s.Metadata()
	return arrow.NewSchema(fields, &md), nil
}

// limitZero wraps a checked SELECT so that it yields its schema and no
// rows. DuckDB's query() parses q on its own, so trailing semicolons and
// comments ("SELECT 1; -- x") cannot break the wrapping.
func limitZero(q string) string {
	return "SELECT * FROM query(" + sqlString(q) + ") LIMIT 0"
}

// exec runs a trusted statement of the role itself (view definitions).
func (e *engine) exec(ctx context.Context, stmt string) error {
	_, err := e.db.ExecContext(ctx, stmt)
	return err
}

func (e *engine) close() error {
	e.watch.close()
	return errors.Join(e.parser.close(), e.db.Close())
}
