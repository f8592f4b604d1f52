package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/spf13/cobra"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

func newTableCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "table",
		Short: "Create, list and inspect tables",
		Long: `Create, list and inspect lake tables. A table is a versioned set of rows;
version 0 is its creation and every append commits the next version.` + endpointHelp,
		Example: `  lake table create videos
  lake table ls
  lake table describe videos
  lake table history videos --limit 5
  lake table compact videos`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newTableCreateCommand(g), newTableLsCommand(g), newTableDescribeCommand(g), newTableHistoryCommand(g),
		newTableCompactCommand(g), newTableExpireCommand(g))
	return cmd
}

// tableCreateOptions are the flags of `lake table create`.
type tableCreateOptions struct {
	endpointOptions
	schema      string
	ifNotExists bool
}

func (o *tableCreateOptions) addFlags(cmd *cobra.Command) {
	o.endpointOptions.addFlags(cmd)
	cmd.Flags().StringVar(&o.schema, "schema", "", "columns as 'name type, name type, …' (default: name utf8, file file, created_at timestamp)")
	cmd.Flags().BoolVar(&o.ifNotExists, "if-not-exists", false, "succeed without change if the table exists")
}

func newTableCreateCommand(g *globalOptions) *cobra.Command {
	o := &tableCreateOptions{}
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a table",
		Long: `Create a table at version 0.

NAME is lowercase letters, digits and _, not starting with a digit.

--schema lists the columns as 'name type[ not null], …'. Types:
  utf8, string        text
  int64, bigint       64-bit integer
  int32               32-bit integer
  float64, double     64-bit float
  bool                boolean
  timestamp           microseconds, UTC
  date                calendar date
  file                a FILE value (key, size, sha256, content_type, etag,
                      uploaded_at) that lake put fills
Columns are nullable unless followed by "not null". Without --schema the
table is 'name utf8, file file, created_at timestamp'; lake put fills name
with the file's base name, file with the upload and created_at with the
time.` + endpointHelp,
		Example: `  lake table create videos
  lake table create clips --schema 'name utf8, file file, camera string, duration_s float64, shot date'
  lake table create videos --if-not-exists`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var schema *arrow.Schema
			if o.schema != "" {
				var err error
				if schema, err = parseSchema(o.schema); err != nil {
					return err
				}
			}
			c, err := o.connect(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer c.Close()
			return runTableCreate(cmd.Context(), c, args[0], schema, o.ifNotExists, cmd.OutOrStdout())
		},
	}
	o.addFlags(cmd)
	return cmd
}

func runTableCreate(ctx context.Context, c *client.Client, name string, schema *arrow.Schema, ifNotExists bool, w io.Writer) error {
	info, err := c.CreateTable(ctx, name, schema, ifNotExists)
	if err != nil {
		return err
	}
	if info.GetCreated() {
		_, err = fmt.Fprintf(w, "created table %s (version %d)\n", info.GetName(), info.GetVersion())
	} else {
		_, err = fmt.Fprintf(w, "table %s exists (version %d)\n", info.GetName(), info.GetVersion())
	}
	return err
}

// parseSchema parses the --schema mini-language (see the create help).
func parseSchema(s string) (*arrow.Schema, error) {
	var fields []arrow.Field
	for i, col := range strings.Split(s, ",") {
		words := strings.Fields(col)
		nullable := true
		if n := len(words); n >= 4 && strings.EqualFold(words[n-2], "not") && strings.EqualFold(words[n-1], "null") {
			nullable, words = false, words[:n-2]
		}
		if len(words) != 2 {
			return nil, fmt.Errorf("%w: --schema column %d %q: want 'name type' or 'name type not null'", errUsage, i+1, strings.TrimSpace(col))
		}
		name, typ := words[0], strings.ToLower(words[1])
		if typ == "file" {
			fields = append(fields, wire.FileField(name, nullable))
			continue
		}
		t, ok := schemaTypes[typ]
		if !ok {
			return nil, fmt.Errorf("%w: --schema column %q: unknown type %q (want utf8, string, int64, bigint, int32, float64, double, bool, timestamp, date or file)", errUsage, name, words[1])
		}
		fields = append(fields, arrow.Field{Name: name, Type: t, Nullable: nullable})
	}
	schema := arrow.NewSchema(fields, nil)
	if err := wire.ValidateSchema(schema); err != nil {
		return nil, fmt.Errorf("--schema: %w", err)
	}
	return schema, nil
}

var timestampUTC = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

var schemaTypes = map[string]arrow.DataType{
	"utf8": arrow.BinaryTypes.String, "string": arrow.BinaryTypes.String,
	"int64": arrow.PrimitiveTypes.Int64, "bigint": arrow.PrimitiveTypes.Int64,
	"int32":   arrow.PrimitiveTypes.Int32,
	"float64": arrow.PrimitiveTypes.Float64, "double": arrow.PrimitiveTypes.Float64,
	"bool":      arrow.FixedWidthTypes.Boolean,
	"timestamp": timestampUTC,
	"date":      arrow.FixedWidthTypes.Date32,
}

// typeName renders a column type in the --schema language where it can.
func typeName(f arrow.Field) string {
	if wire.IsFileField(f) {
		return "file"
	}
	for _, name := range []string{"utf8", "int64", "int32", "float64", "bool", "timestamp", "date"} {
		if arrow.TypeEqual(f.Type, schemaTypes[name]) {
			return name
		}
	}
	return f.Type.String()
}

func newTableLsCommand(g *globalOptions) *cobra.Command {
	o := &endpointOptions{}
	cmd := &cobra.Command{
		Use:     "ls",
		Short:   "List tables",
		Long:    `List every table with its current version, rows and data files.` + endpointHelp,
		Example: `  lake table ls`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.connect(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer c.Close()
			return runTableLs(cmd.Context(), c, cmd.OutOrStdout())
		},
	}
	o.addFlags(cmd)
	return cmd
}

func runTableLs(ctx context.Context, c *client.Client, w io.Writer) error {
	tables, err := c.Tables(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tROWS\tFILES\tCREATED")
	for _, t := range tables {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", t.GetName(), t.GetVersion(), t.GetRows(), t.GetDataFiles(), micros(t.GetCreatedAtUnixMicros()))
	}
	return tw.Flush()
}

// tableDescribeOptions are the flags of `lake table describe`.
type tableDescribeOptions struct {
	endpointOptions
	version versionFlag
}

func (o *tableDescribeOptions) addFlags(cmd *cobra.Command) {
	o.endpointOptions.addFlags(cmd)
	o.version.addFlag(cmd, "describe this version of the table (time travel): its rows and data files then")
}

func newTableDescribeCommand(g *globalOptions) *cobra.Command {
	o := &tableDescribeOptions{}
	cmd := &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a table's columns and current version, or an older version",
		Long: `Show a table's id, current version, rows, data files and columns.

With --version N, show version N as it was committed: when, its rows, and
each data file it reads. A version never committed is an error (not
found).` + endpointHelp,
		Example: `  lake table describe videos
  lake table describe videos --version 3`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.version.parse(cmd); err != nil {
				return err
			}
			c, err := o.connect(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer c.Close()
			if v := o.version.at(); v != nil {
				return runTableDescribeVersion(cmd.Context(), c, args[0], *v, cmd.OutOrStdout())
			}
			return runTableDescribe(cmd.Context(), c, args[0], cmd.OutOrStdout())
		},
	}
	o.addFlags(cmd)
	return cmd
}

func runTableDescribe(ctx context.Context, c *client.Client, name string, w io.Writer) error {
	info, err := c.Describe(ctx, name)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "table\t%s\nid\t%s\nversion\t%d\nrows\t%d\ndata files\t%d\ncreated\t%s\n\n",
		info.GetName(), info.GetId(), info.GetVersion(), info.GetRows(), info.GetDataFiles(), micros(info.GetCreatedAtUnixMicros()))
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeColumns(w, info.GetSchema())
}

// runTableDescribeVersion describes one version of a table from its
// snapshot: the rows and data files it reads, and the columns.
func runTableDescribeVersion(ctx context.Context, c *client.Client, name string, version int64, w io.Writer) error {
	snap, err := c.Snapshot(ctx, name, &version)
	if err != nil {
		return err
	}
	var rows int64
	for _, f := range snap.GetFiles() {
		rows += f.GetRows()
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "table\t%s\nid\t%s\nversion\t%d\nrows\t%d\ndata files\t%d\ncommitted\t%s\n\n",
		snap.GetName(), snap.GetId(), snap.GetVersion(), rows, len(snap.GetFiles()), micros(snap.GetCommittedAtUnixMicros()))
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := writeColumns(w, snap.GetSchema()); err != nil {
		return err
	}
	if len(snap.GetFiles()) == 0 {
		return nil
	}
	fmt.Fprintln(tw, "\nDATA FILE\tROWS\tBYTES")
	for _, f := range snap.GetFiles() {
		fmt.Fprintf(tw, "%s\t%d\t%d\n", f.GetKey(), f.GetRows(), f.GetSize())
	}
	return tw.Flush()
}

// writeColumns lists the columns of an IPC-encoded schema.
func writeColumns(w io.Writer, raw []byte) error {
	schema, err := wire.DecodeSchema(raw)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "COLUMN\tTYPE\tNULLABLE")
	for _, f := range schema.Fields() {
		fmt.Fprintf(tw, "%s\t%s\t%t\n", f.Name, typeName(f), f.Nullable)
	}
	return tw.Flush()
}

// tableHistoryOptions are the flags of `lake table history`.
type tableHistoryOptions struct {
	endpointOptions
	limit int64
}

func (o *tableHistoryOptions) addFlags(cmd *cobra.Command) {
	o.endpointOptions.addFlags(cmd)
	cmd.Flags().Int64Var(&o.limit, "limit", 0, "show at most N versions, newest first (0: all)")
}

func newTableHistoryCommand(g *globalOptions) *cobra.Command {
	o := &tableHistoryOptions{}
	cmd := &cobra.Command{
		Use:   "history NAME",
		Short: "Show a table's versions, newest first",
		Long: `Show a table's versions, newest first: what each did (create, append,
compact, delete, expire), when it committed, the rows it added (negative for
a delete), the data files it added and removed (+added/-removed), and the
commit ids (idempotency keys) it holds. A version marked expired can no
longer be read (lake table expire).` + endpointHelp,
		Example: `  lake table history videos
  lake table history videos --limit 10`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.limit < 0 {
				return fmt.Errorf("%w: --limit must not be negative", errUsage)
			}
			c, err := o.connect(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer c.Close()
			return runTableHistory(cmd.Context(), c, args[0], o.limit, cmd.OutOrStdout())
		},
	}
	o.addFlags(cmd)
	return cmd
}

func runTableHistory(ctx context.Context, c *client.Client, name string, limit int64, w io.Writer) error {
	h, err := c.History(ctx, name, limit)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tKIND\tCOMMITTED\tROWS\tFILES\tCOMMIT IDS")
	for _, v := range h.GetVersions() {
		kind := v.GetKind()
		if v.GetExpired() {
			kind += " (expired)"
		}
		files := fmt.Sprintf("+%d", len(v.GetFiles()))
		if n := len(v.GetRemoves()); n > 0 {
			files += fmt.Sprintf("/-%d", n)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%+d\t%s\t%s\n", v.GetVersion(), kind, micros(v.GetCommittedAtUnixMicros()),
			v.GetRows(), files, commitIDs(v))
	}
	return tw.Flush()
}

// tableCompactOptions are the flags of `lake table compact`.
type tableCompactOptions struct {
	endpointOptions
}

func (o *tableCompactOptions) addFlags(cmd *cobra.Command) { o.endpointOptions.addFlags(cmd) }

func newTableCompactCommand(g *globalOptions) *cobra.Command {
	o := &tableCompactOptions{}
	cmd := &cobra.Command{
		Use:   "compact NAME",
		Short: "Merge a table's small data files into large ones now",
		Long: `Merge a table's small data files into large ones now, as one new version
with the same rows (history shows it adding 0 rows). The leader also does
this by itself once a table has more than --compact-min-files small files;
older versions keep their files for time travel. Needs an admin token.` + endpointHelp,
		Example: `  lake table compact videos`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.connect(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer c.Close()
			return runTableCompact(cmd.Context(), c, args[0], cmd.OutOrStdout())
		},
	}
	o.addFlags(cmd)
	return cmd
}

func runTableCompact(ctx context.Context, c *client.Client, name string, w io.Writer) error {
	res, err := c.Compact(ctx, name)
	if err != nil {
		return err
	}
	if res.GetFilesAfter() == res.GetFilesBefore() {
		_, err = fmt.Fprintf(w, "%s: nothing to compact at version %d (data files: %d)\n", res.GetTable(), res.GetVersion(), res.GetFilesAfter())
		return err
	}
	_, err = fmt.Fprintf(w, "%s: version %d, %d data files → %d\n", res.GetTable(), res.GetVersion(), res.GetFilesBefore(), res.GetFilesAfter())
	return err
}

func commitIDs(v *lakepb.VersionInfo) string {
	if len(v.GetCommitIds()) == 0 {
		return "-"
	}
	return strings.Join(v.GetCommitIds(), ",")
}

// micros renders a unix-microsecond time as RFC 3339 in UTC.
func micros(us int64) string {
	return time.UnixMicro(us).UTC().Format(time.RFC3339)
}
