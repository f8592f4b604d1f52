package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// rowsPerPage is how many rows a table page shows at a time.
const rowsPerPage = 50

type tablesData struct{ Tables []*lakepb.TableInfo }

func (tablesData) title() string { return "Tables" }

// tableList is the home page: every table with its rows and version.
func (c *Console) tableList(w http.ResponseWriter, r *http.Request) {
	ts, err := c.tables(r.Context(), sessionOf(r))
	if err != nil {
		c.fail(w, r, httpStatus(err), errorText(err))
		return
	}
	c.render(w, r, http.StatusOK, "tables", tablesData{Tables: ts})
}

type tableData struct {
	Info    *lakepb.TableInfo
	Columns []gridColumn
	Chart   *chart
	// Recent are the newest versions, newest first.
	Recent []versionRow
	// Version is the version the rows are of: the current one, or the
	// one ?version= travels to.
	Version    int64
	Travelling bool
	Rows       *grid
	RowsError  string
	Page       int // from 1
	Pages      int
	PrevURL    string
	NextURL    string
	SQL        string // the statement that reads this page of rows
}

func (d tableData) title() string { return d.Info.GetName() }

// tablePage shows a table's schema, its history as a chart and a list,
// and one page of its rows, at its current version or at ?version=.
func (c *Console) tablePage(w http.ResponseWriter, r *http.Request) {
	ctx, s := r.Context(), sessionOf(r)
	name := r.PathValue("table")
	if err := wire.ValidateTableName(name); err != nil {
		c.fail(w, r, http.StatusBadRequest, errorText(err))
		return
	}
	info, err := c.describe(ctx, s, name)
	if err != nil {
		c.fail(w, r, httpStatus(err), errorText(err))
		return
	}
	d := tableData{Info: info, Version: info.GetVersion(), Page: 1}
	schema, err := wire.DecodeSchema(info.GetSchema())
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, errorText(err))
		return
	}
	d.Columns = schemaColumns(schema)
	h, err := c.history(ctx, s, name, maxHistory)
	if err != nil {
		c.fail(w, r, httpStatus(err), errorText(err))
		return
	}
	versions := versionRows(h, info.GetRows(), int64(len(h.GetVersions())) < maxHistory)
	d.Chart = newChart(versions)
	for i := len(versions) - 1; i >= 0 && len(d.Recent) < 20; i-- {
		d.Recent = append(d.Recent, versions[i])
	}
	q := r.URL.Query()
	rows := info.GetRows()
	if v := q.Get("version"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			c.fail(w, r, http.StatusBadRequest, "version must be a version number")
			return
		}
		d.Version, d.Travelling = n, n != info.GetVersion()
		rows = -1
		for _, vr := range versions {
			if vr.Version == n {
				rows = vr.Rows
			}
		}
	}
	if p, err := strconv.Atoi(q.Get("page")); err == nil && p > 1 {
		d.Page = p
	}
	if rows >= 0 {
		d.Pages = max(1, int((rows+rowsPerPage-1)/rowsPerPage))
	}
	d.SQL = rowsQuery(name, d.Version, d.Travelling, d.Page)
	d.Rows, err = collect(ctx, c.cfg.SQL, d.SQL, rowsPerPage, tableLinks(name, d.Version, d.Travelling))
	if err != nil {
		d.RowsError = errorText(err)
	}
	if d.Page > 1 {
		d.PrevURL = pageURL(name, d.Version, d.Travelling, d.Page-1)
	}
	if d.Rows != nil && d.Rows.More {
		d.NextURL = pageURL(name, d.Version, d.Travelling, d.Page+1)
	}
	c.render(w, r, http.StatusOK, "table", d)
}

// rowsQuery reads one page of rows. It is caller SQL like any other: it
// runs through the guard, time travel included.
func rowsQuery(table string, version int64, travelling bool, page int) string {
	from := sqlIdent(table)
	if travelling {
		from += fmt.Sprintf(" AT (VERSION => %d)", version)
	}
	// One row more than a page tells whether there is a next page.
	return fmt.Sprintf("SELECT * FROM %s LIMIT %d OFFSET %d", from, rowsPerPage+1, (page-1)*rowsPerPage)
}

func pageURL(table string, version int64, travelling bool, page int) string {
	q := url.Values{"page": {strconv.Itoa(page)}}
	if travelling {
		q.Set("version", strconv.FormatInt(version, 10))
	}
	return "/tables/" + url.PathEscape(table) + "?" + q.Encode()
}

// tableLinks links the FILE values of table's rows at version.
func tableLinks(table string, version int64, travelling bool) fileLinker {
	return func(key string) (string, string) {
		q := url.Values{"key": {key}}
		if travelling {
			q.Set("version", strconv.FormatInt(version, 10))
		}
		base := "/tables/" + url.PathEscape(table)
		return base + "/file?" + q.Encode(), base + "/raw?" + q.Encode()
	}
}

func schemaColumns(s *arrow.Schema) []gridColumn {
	cols := make([]gridColumn, s.NumFields())
	for i, f := range s.Fields() {
		cols[i] = gridColumn{Name: f.Name, Type: f.Type.String()}
		if wire.IsFileField(f) {
			cols[i].Type, cols[i].File = "FILE", true
		}
		if f.Nullable {
			cols[i].Type += " (nullable)"
		}
	}
	return cols
}

// sqlIdent quotes s as an SQL identifier.
func sqlIdent(s string) string {
	out := []byte{'"'}
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			out = append(out, '"')
		}
		out = append(out, s[i])
	}
	return string(append(out, '"'))
}
