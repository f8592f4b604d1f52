package client

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// DeleteOptions control one delete.
type DeleteOptions struct {
	// CommitID makes the delete idempotent; default a fresh random UUID,
	// so the client's own retries never delete at a second version.
	CommitID string
	// ExpectedVersion deletes only if the table is at this version
	// (wire.ErrVersionConflict otherwise).
	ExpectedVersion *int64
}

// Delete removes every row of table whose FILE value has one of keys, as
// one new version (lake.table.delete, write scope). A key that no row of
// the current version has is wire.ErrKeyNotFound, and nothing changes.
// The rows stay readable at older versions until those expire; the
// objects stay in the stage until garbage collection frees them.
func (c *Client) Delete(ctx context.Context, table string, keys []string, o DeleteOptions) (*lakepb.DeleteResult, error) {
	req := &lakepb.DeleteRequest{Table: table, Keys: keys, CommitId: o.CommitID, ExpectedVersion: o.ExpectedVersion}
	if req.CommitId == "" {
		req.CommitId = uuid.NewString()
	}
	var res lakepb.DeleteResult
	err := c.retryAmbiguous(ctx, "delete from "+table, req.CommitId, func() error {
		return flightrpc.Action(ctx, c.fc, wire.ActionDelete, req, &res)
	})
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// KeysWhere returns the FILE keys of the rows of table for which pred, one
// SQL boolean expression, holds, and the table version they were read at.
// Passing that version as DeleteOptions.ExpectedVersion makes a delete of
// them fail rather than miss or hit rows that committed since.
func (c *Client) KeysWhere(ctx context.Context, table, pred string) ([]string, int64, error) {
	if err := checkPredicate(pred); err != nil {
		return nil, 0, fmt.Errorf("client: --where: %w", err)
	}
	info, err := c.Describe(ctx, table)
	if err != nil {
		return nil, 0, err
	}
	schema, err := wire.DecodeSchema(info.GetSchema())
	if err != nil {
		return nil, 0, err
	}
	var cols []string
	for _, f := range schema.Fields() {
		if wire.IsFileField(f) {
			cols = append(cols, quoteIdent(f.Name))
		}
	}
	if len(cols) == 0 {
		return nil, 0, fmt.Errorf("client: %s has no FILE column", table)
	}
	// The rows are read at a version at least info's: if it is newer,
	// the table moved, and the delete at info's version is refused.
	seen := map[string]bool{}
	var keys []string
	for _, col := range cols {
		sql := fmt.Sprintf("SELECT %s.key FROM %s WHERE %s IS NOT NULL AND (%s)", col, quoteIdent(table), col, pred)
		rdr, err := c.Query(ctx, sql)
		if err != nil {
			return nil, 0, fmt.Errorf("client: --where: %w", err)
		}
		for rdr.Next() {
			rec := rdr.RecordBatch()
			for i := range int(rec.NumRows()) {
				k := rec.Column(0).ValueStr(i)
				if !seen[k] {
					seen[k] = true
					keys = append(keys, k)
				}
			}
		}
		err = rdr.Err()
		rdr.Release()
		if err != nil {
			return nil, 0, fmt.Errorf("client: --where: %w", err)
		}
	}
	if len(keys) > 0 {
		if err := c.checkKeysOnlyWhere(ctx, table, cols, pred); err != nil {
			return nil, 0, err
		}
	}
	return keys, info.GetVersion(), nil
}

// checkKeysOnlyWhere refuses a --where whose keys other rows name too. A
// delete removes every row with one of its keys, and since uploads of the
// same content share one object (dedup), rows that pred does not select
// may hold a key that it does: deleting by those keys would remove them
// as well.
func (c *Client) checkKeysOnlyWhere(ctx context.Context, table string, cols []string, pred string) error {
	var selected, naming []string
	for _, col := range cols {
		selected = append(selected, fmt.Sprintf("SELECT %s.key AS k FROM %s WHERE %s IS NOT NULL AND (%s)", col, quoteIdent(table), col, pred))
	}
	sub := strings.Join(selected, " UNION ALL ")
	for _, col := range cols {
		naming = append(naming, fmt.Sprintf("%s.key IN (%s)", col, sub))
	}
	sql := fmt.Sprintf("SELECT count(*) FROM %s WHERE (%s) IS NOT TRUE AND (%s)", quoteIdent(table), pred, strings.Join(naming, " OR "))
	rdr, err := c.Query(ctx, sql)
	if err != nil {
		return fmt.Errorf("client: --where: %w", err)
	}
	defer rdr.Release()
	var others string
	for rdr.Next() {
		if rec := rdr.RecordBatch(); rec.NumRows() > 0 {
			others = rec.Column(0).ValueStr(0)
		}
	}
	if err := rdr.Err(); err != nil {
		return fmt.Errorf("client: --where: %w", err)
	}
	if others != "" && others != "0" {
		return fmt.Errorf("client: --where: %w: %s other rows of %s name the same objects (uploads of the same content share one), and a delete removes every row with a key; narrow the predicate to cover them, or delete by --key",
			wire.ErrInvalidRequest, others, table)
	}
	return nil
}

// checkPredicate refuses a --where that is not one expression: it must
// not be empty, and outside string literals and quoted names it must not
// end a statement (;), open a comment (-- or /*) or close a parenthesis
// it did not open. Placed in "WHERE (pred)" it then stays inside the
// parentheses; everything else (a refused function, a subquery of
// another table) is for the query role's allow-list to judge.
func checkPredicate(pred string) error {
	if strings.TrimSpace(pred) == "" {
		return fmt.Errorf("%w: an empty predicate", wire.ErrInvalidRequest)
	}
	depth := 0
	var quote byte // ' or " while inside a literal or a quoted name
	for i := 0; i < len(pred); i++ {
		c := pred[i]
		if quote != 0 {
			if c == quote {
				quote = 0 // a doubled quote reopens at once: same effect
			}
			continue
		}
		switch {
		case c == '\'' || c == '"':
			quote = c
		case c == '(':
			depth++
		case c == ')':
			if depth--; depth < 0 {
				return fmt.Errorf("%w: the predicate closes a parenthesis it did not open", wire.ErrInvalidRequest)
			}
		case c == ';':
			return fmt.Errorf("%w: the predicate must be one expression, not statements", wire.ErrInvalidRequest)
		case c == '-' && i+1 < len(pred) && pred[i+1] == '-', c == '/' && i+1 < len(pred) && pred[i+1] == '*':
			return fmt.Errorf("%w: no comments in the predicate", wire.ErrInvalidRequest)
		case c == 0:
			return fmt.Errorf("%w: a NUL byte in the predicate", wire.ErrInvalidRequest)
		}
	}
	if quote != 0 || depth != 0 {
		return fmt.Errorf("%w: the predicate has an unclosed quote or parenthesis", wire.ErrInvalidRequest)
	}
	return nil
}

// quoteIdent quotes a column or table name for SQL.
func quoteIdent(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}
