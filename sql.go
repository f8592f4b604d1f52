package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/spf13/cobra"

	"github.com/lakedata/lake/client"
)

// sqlOptions are the flags of `lake sql`.
type sqlOptions struct {
	endpointOptions
	format string
}

func (o *sqlOptions) addFlags(cmd *cobra.Command) {
	o.endpointOptions.addFlags(cmd)
	cmd.Flags().StringVar(&o.format, "format", "table", "output format: table, csv or json (one object per row)")
}

func newSQLCommand(g *globalOptions) *cobra.Command {
	o := &sqlOptions{}
	cmd := &cobra.Command{
		Use:   `sql "QUERY"`,
		Short: "Run a read-only SQL query",
		Long: `Run a read-only SQL query on the query endpoint (Flight SQL, DuckDB dialect)
and print the result. Tables are queried at their latest version.

Formats: table (aligned columns with a header), csv (with a header) and
json (JSON Lines: one object per row). Timestamps print as RFC 3339. A FILE
column prints as a nested object in json and as {key,size,sha256,
content_type,etag,uploaded_at} in table and csv.` + endpointHelp,
		Example: `  lake sql "SELECT name, file.size FROM videos ORDER BY created_at DESC LIMIT 10"
  lake sql "SELECT * FROM videos" --format json | jq .file.key
  lake sql "SELECT count(*) AS n FROM videos" --format csv`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch o.format {
			case "table", "csv", "json":
			default:
				return fmt.Errorf("%w: --format %q: want table, csv or json", errUsage, o.format)
			}
			c, err := o.connect(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer c.Close()
			return runSQL(cmd.Context(), c, args[0], o.format, cmd.OutOrStdout())
		},
	}
	o.addFlags(cmd)
	return cmd
}

func runSQL(ctx context.Context, c *client.Client, query, format string, w io.Writer) error {
	rdr, err := c.Query(ctx, query)
	if err != nil {
		return err
	}
	defer rdr.Release()
	return writeResult(rdr, format, w)
}

// writeResult prints every row of rdr in format. json and csv stream; the
// table format holds the rows until the end to align them.
func writeResult(rdr array.RecordReader, format string, w io.Writer) error {
	fields := rdr.Schema().Fields()
	var row func(rec arrow.RecordBatch, i int) error
	var done func() error
	switch format {
	case "json":
		var buf bytes.Buffer
		row = func(rec arrow.RecordBatch, i int) error {
			buf.Reset()
			buf.WriteByte('{')
			for j, f := range fields {
				if j > 0 {
					buf.WriteByte(',')
				}
				writeJSONString(&buf, f.Name)
				buf.WriteByte(':')
				writeJSON(&buf, rec.Column(j), i)
			}
			buf.WriteString("}\n")
			_, err := w.Write(buf.Bytes())
			return err
		}
		done = func() error { return nil }
	case "csv":
		cw := csv.NewWriter(w)
		cells := make([]string, len(fields))
		for j, f := range fields {
			cells[j] = f.Name
		}
		if err := cw.Write(cells); err != nil {
			return err
		}
		row = func(rec arrow.RecordBatch, i int) error {
			for j := range fields {
				cells[j] = text(rec.Column(j), i, "")
			}
			return cw.Write(cells)
		}
		done = func() error { cw.Flush(); return cw.Error() }
	default:
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		names := make([]string, len(fields))
		for j, f := range fields {
			names[j] = tableCell(f.Name)
		}
		fmt.Fprintln(tw, strings.Join(names, "\t"))
		cells := make([]string, len(fields))
		row = func(rec arrow.RecordBatch, i int) error {
			for j := range fields {
				cells[j] = tableCell(text(rec.Column(j), i, "NULL"))
			}
			_, err := fmt.Fprintln(tw, strings.Join(cells, "\t"))
			return err
		}
		done = tw.Flush
	}
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for i := range int(rec.NumRows()) {
			if err := row(rec, i); err != nil {
				return err
			}
		}
	}
	if err := rdr.Err(); err != nil {
		return err
	}
	return done()
}

// tableCell keeps one value on one line and out of the next column.
var tableCell = strings.NewReplacer("\t", `\t`, "\n", `\n`, "\r", `\r`).Replace

// text renders value i of arr for the table and csv formats; null as null.
// Structs (FILE values among them) print compactly as {v1,v2,…}.
func text(arr arrow.Array, i int, null string) string {
	if arr.IsNull(i) {
		return null
	}
	switch a := arr.(type) {
	case *array.Timestamp:
		return timestampText(a, i)
	case *array.Date32:
		return a.Value(i).ToTime().Format(time.DateOnly)
	case *array.Date64:
		return a.Value(i).ToTime().Format(time.DateOnly)
	case *array.Struct:
		parts := make([]string, a.NumField())
		for j := range parts {
			parts[j] = text(a.Field(j), i, "")
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	return arr.ValueStr(i)
}

func timestampText(a *array.Timestamp, i int) string {
	unit := a.DataType().(*arrow.TimestampType).Unit
	return a.Value(i).ToTime(unit).UTC().Format(time.RFC3339Nano)
}

// writeJSON writes value i of arr as JSON, keeping struct fields in
// their column order (encoding/json would sort a map's keys).
func writeJSON(buf *bytes.Buffer, arr arrow.Array, i int) {
	if arr.IsNull(i) {
		buf.WriteString("null")
		return
	}
	switch a := arr.(type) {
	case *array.Boolean:
		buf.WriteString(strconv.FormatBool(a.Value(i)))
	case *array.Int8, *array.Int16, *array.Int32, *array.Int64,
		*array.Uint8, *array.Uint16, *array.Uint32, *array.Uint64:
		buf.WriteString(arr.ValueStr(i))
	case *array.Float32:
		writeJSONFloat(buf, float64(a.Value(i)), 32)
	case *array.Float64:
		writeJSONFloat(buf, a.Value(i), 64)
	case *array.String:
		writeJSONString(buf, a.Value(i))
	case *array.LargeString:
		writeJSONString(buf, a.Value(i))
	case *array.Timestamp, *array.Date32, *array.Date64:
		writeJSONString(buf, text(arr, i, ""))
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		buf.WriteByte('{')
		for j, f := range st.Fields() {
			if j > 0 {
				buf.WriteByte(',')
			}
			writeJSONString(buf, f.Name)
			buf.WriteByte(':')
			writeJSON(buf, a.Field(j), i)
		}
		buf.WriteByte('}')
	case array.ListLike:
		start, end := a.ValueOffsets(i)
		buf.WriteByte('[')
		for j := start; j < end; j++ {
			if j > start {
				buf.WriteByte(',')
			}
			writeJSON(buf, a.ListValues(), int(j))
		}
		buf.WriteByte(']')
	default:
		// Whatever arrow itself can marshal (decimals, binary as base64, …).
		b, err := json.Marshal(arr.GetOneForMarshal(i))
		if err != nil {
			writeJSONString(buf, arr.ValueStr(i))
			return
		}
		buf.Write(b)
	}
}

// writeJSONFloat writes NaN and ±Inf, which JSON lacks, as strings.
func writeJSONFloat(buf *bytes.Buffer, f float64, bits int) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		writeJSONString(buf, strconv.FormatFloat(f, 'g', -1, bits))
		return
	}
	buf.WriteString(strconv.FormatFloat(f, 'g', -1, bits))
}

func writeJSONString(buf *bytes.Buffer, s string) {
	b, _ := json.Marshal(s) // a string always marshals
	buf.Write(b)
}
