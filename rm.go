package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/lakedata/lake/client"
)

// rmOptions are the flags of `lake rm`.
type rmOptions struct {
	endpointOptions
	table    string
	keys     []string
	where    string
	commitID string
	json     bool
}

func (o *rmOptions) addFlags(cmd *cobra.Command) {
	o.endpointOptions.addFlags(cmd)
	f := cmd.Flags()
	f.StringVarP(&o.table, "table", "t", "", "table to delete rows from (required)")
	f.StringArrayVar(&o.keys, "key", nil, "delete the rows whose FILE value has this key (repeatable)")
	f.StringVar(&o.where, "where", "", "delete the rows for which this SQL boolean expression holds")
	f.StringVar(&o.commitID, "commit-id", "", "idempotency key: a delete retried with the same id deletes once (default: a fresh one)")
	f.BoolVar(&o.json, "json", false, "print the result as one JSON object")
	_ = cmd.MarkFlagRequired("table")
}

func newRmCommand(g *globalOptions) *cobra.Command {
	o := &rmOptions{}
	cmd := &cobra.Command{
		Use:   "rm --table T (--key K... | --where PRED)",
		Short: "Delete rows from a table, as one new version",
		Long: `Delete rows from a table as one new version. The rows stay readable at
older versions (time travel) until those expire; the objects they point to
stay in the stage until garbage collection finds nothing that needs them.

--key K deletes every row whose FILE value has key K; repeat it for more.
Uploads of the same content share one object (dedup), so several rows may
have one key: all of them go. A key that no row of the current version has
fails the whole delete, and nothing changes.

--where PRED deletes the rows for which PRED, one SQL boolean expression
over the table's columns, holds: the keys are read with a read-only query
at the table's current version V, then deleted only if the table is still
at V, so rows appended meanwhile are never deleted by surprise (the delete
fails instead; run it again). PRED must be a single expression: no second
statement, no comment, and only what lake SQL allows. If rows that PRED does
not select share a key with rows it does, the delete is refused rather than
take them too.` + endpointHelp,
		Example: `  lake rm --table clips --key objects/2026/12/01/0193…-bad.mp4
  lake rm --table clips --where "name LIKE 'test-%'"
  lake rm --table clips --where "file.size = 0" --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (len(o.keys) == 0) == (o.where == "") {
				return fmt.Errorf("%w: give --key (one or more) or --where, not both", errUsage)
			}
			c, err := o.connect(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer c.Close()
			return runRm(cmd.Context(), c, o, cmd.OutOrStdout())
		},
	}
	o.addFlags(cmd)
	return cmd
}

// rmLine is the --json output.
type rmLine struct {
	Table     string `json:"table"`
	Version   int64  `json:"version"`
	Rows      int64  `json:"rows"`
	Duplicate bool   `json:"duplicate"`
}

func runRm(ctx context.Context, c *client.Client, o *rmOptions, w io.Writer) error {
	opts := client.DeleteOptions{CommitID: o.commitID}
	keys := o.keys
	if o.where != "" {
		var at int64
		var err error
		if keys, at, err = c.KeysWhere(ctx, o.table, o.where); err != nil {
			return err
		}
		if len(keys) == 0 {
			return writeRm(w, o.json, rmLine{Table: o.table, Version: at}, "no row matches; nothing deleted")
		}
		opts.ExpectedVersion = &at
	}
	res, err := c.Delete(ctx, o.table, keys, opts)
	if err != nil {
		return err
	}
	line := rmLine{Table: res.GetTable(), Version: res.GetVersion(), Rows: res.GetRows(), Duplicate: res.GetDuplicate()}
	text := fmt.Sprintf("deleted %d rows (version %d)", line.Rows, line.Version)
	if line.Duplicate {
		text = fmt.Sprintf("already deleted with this commit id at version %d (%d rows)", line.Version, line.Rows)
	}
	return writeRm(w, o.json, line, text)
}

func writeRm(w io.Writer, asJSON bool, line rmLine, text string) error {
	if asJSON {
		return json.NewEncoder(w).Encode(line)
	}
	_, err := fmt.Fprintf(w, "%s: %s\n", line.Table, text)
	return err
}
