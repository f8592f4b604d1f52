package console

import (
	"context"
	"errors"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lakedata/lake/internal/humanize"
	"github.com/lakedata/lake/wire"
)

// grid is a result as the pages show it: strings, with FILE values
// turned into links to their previews.
type grid struct {
	Columns []gridColumn
	Rows    [][]cell
	// More says the result had rows beyond those shown.
	More bool
}

type gridColumn struct {
	Name, Type string
	File       bool
}

type cell struct {
	Text string
	Null bool
	File *fileCell
}

// fileCell is a FILE value in a grid, with where its preview is.
type fileCell struct {
	Key, Size, ContentType string
	Kind                   mediaKind
	Preview, Raw           string
}

// fileLinker gives the preview page and the raw object address of a key.
type fileLinker func(key string) (preview, raw string)

// maxCellChars bounds the text of one cell; the grid is for looking, not
// for exporting.
const maxCellChars = 500

// collect runs q through run and keeps its first max rows. Reading stops
// there: the statement is cancelled, not read to its end.
func collect(ctx context.Context, run SQLRunner, q string, max int, link fileLinker) (*grid, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	schema, ch, err := run(ctx, q)
	if err != nil {
		return nil, err
	}
	g := &grid{}
	fileCol := make([]bool, schema.NumFields())
	for i, f := range schema.Fields() {
		fileCol[i] = wire.IsFileField(f) && arrow.TypeEqual(f.Type, wire.FileType())
		g.Columns = append(g.Columns, gridColumn{Name: f.Name, Type: f.Type.String(), File: fileCol[i]})
		if fileCol[i] {
			g.Columns[i].Type = "FILE"
		}
	}
	var runErr error
	for chunk := range ch {
		if chunk.Err != nil {
			runErr = chunk.Err
			continue
		}
		rec := chunk.Data
		if rec == nil {
			continue
		}
		if runErr == nil && !g.More {
			if err := g.add(rec, fileCol, max, link); err != nil {
				runErr = err
			}
			if g.More {
				cancel() // the rest is not shown: stop the statement
			}
		}
		rec.Release()
	}
	if runErr != nil && !(g.More && errors.Is(ctx.Err(), context.Canceled)) {
		return nil, runErr
	}
	return g, nil
}

// add appends rec's rows until the grid holds max, and notes when rec
// has more.
func (g *grid) add(rec arrow.RecordBatch, fileCol []bool, max int, link fileLinker) error {
	n := int(rec.NumRows())
	room := max - len(g.Rows)
	if n > room {
		n, g.More = room, true
	}
	if n <= 0 {
		return nil
	}
	files := make([][]wire.FileValue, len(fileCol))
	valid := make([][]bool, len(fileCol))
	for c, isFile := range fileCol {
		if isFile {
			var err error
			if files[c], valid[c], err = wire.FileValues(rec.Column(c)); err != nil {
				return err
			}
		}
	}
	for i := range n {
		row := make([]cell, len(fileCol))
		for c := range fileCol {
			col := rec.Column(c)
			switch {
			case col.IsNull(i):
				row[c] = cell{Text: "NULL", Null: true}
			case fileCol[c] && valid[c][i]:
				row[c] = fileCellOf(files[c][i], link)
			default:
				row[c] = cell{Text: clip(valueString(col, i), maxCellChars)}
			}
		}
		g.Rows = append(g.Rows, row)
	}
	return nil
}

func fileCellOf(v wire.FileValue, link fileLinker) cell {
	// Copies, as valueString's: the record is released after.
	v.Key, v.ContentType = strings.Clone(v.Key), strings.Clone(v.ContentType)
	preview, raw := link(v.Key)
	return cell{Text: v.Key, File: &fileCell{
		Key: v.Key, Size: humanize.Bytes(v.Size), ContentType: v.ContentType,
		Kind: kindOf(v.ContentType, v.Key), Preview: preview, Raw: raw,
	}}
}

// valueString is the text of one value, copied: arrow's string values
// point into the record's buffers, which are released once the rows are
// taken.
func valueString(col arrow.Array, i int) string {
	if s, ok := col.(*array.String); ok {
		return strings.Clone(s.Value(i))
	}
	return strings.Clone(col.ValueStr(i))
}

// clip cuts s to at most n runes, marking the cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
