package console

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lakedata/lake/wire/lakepb"
)

// maxHistory bounds the versions a table page reads; the chart of a
// longer history shows its newest versions.
const maxHistory = 2000

// versionRow is one version as the history shows it.
type versionRow struct {
	Version     int64
	Kind        string
	At          string
	Added, Rows int64
	Expired     bool
}

// versionRows turns meta's history (newest first) into rows oldest first
// with the table's row count at each version. A history read whole is
// summed from version 0; a cut one counts back from the current rows,
// since each version's rows is what it added (negative for a delete).
func versionRows(h *lakepb.History, currentRows int64, whole bool) []versionRow {
	vs := h.GetVersions()
	out := make([]versionRow, len(vs))
	for i, v := range vs {
		out[len(vs)-1-i] = versionRow{
			Version: v.GetVersion(), Kind: v.GetKind(), Added: v.GetRows(), Expired: v.GetExpired(),
			At: formatTime(time.UnixMicro(v.GetCommittedAtUnixMicros())),
		}
	}
	if whole {
		var sum int64
		for i := range out {
			sum += out[i].Added
			out[i].Rows = sum
		}
		return out
	}
	rows := currentRows
	for i := len(out) - 1; i >= 0; i-- {
		out[i].Rows = rows
		rows -= out[i].Added
	}
	return out
}

// chart is an inline SVG line of rows over versions, drawn on the server:
// no script and no library.
type chart struct {
	Width, Height int
	Line          string // polyline points
	Points        []chartPoint
	MaxRows       int64
	First, Last   versionRow
}

type chartPoint struct {
	X, Y  float64
	Label string
}

const (
	chartWidth, chartHeight = 720, 180
	chartPad                = 24
	maxChartPoints          = 400
)

// newChart scales rows (oldest first) into the chart's box, x by
// version and y by rows, with at most maxChartPoints points.
func newChart(rows []versionRow) *chart {
	if len(rows) == 0 {
		return nil
	}
	step := max(1, (len(rows)+maxChartPoints-1)/maxChartPoints)
	var picked []versionRow
	for i := 0; i < len(rows); i += step {
		picked = append(picked, rows[i])
	}
	if picked[len(picked)-1] != rows[len(rows)-1] {
		picked = append(picked, rows[len(rows)-1])
	}
	maxRows := slices.MaxFunc(rows, func(a, b versionRow) int { return cmp.Compare(a.Rows, b.Rows) }).Rows
	c := &chart{Width: chartWidth, Height: chartHeight, MaxRows: maxRows, First: rows[0], Last: rows[len(rows)-1]}
	v0, v1 := float64(c.First.Version), float64(c.Last.Version)
	var line strings.Builder
	for _, r := range picked {
		x := float64(chartPad)
		if v1 > v0 {
			x += (float64(r.Version) - v0) / (v1 - v0) * float64(chartWidth-2*chartPad)
		}
		y := float64(chartHeight - chartPad)
		if maxRows > 0 {
			y -= float64(max(r.Rows, 0)) / float64(maxRows) * float64(chartHeight-2*chartPad)
		}
		fmt.Fprintf(&line, "%.1f,%.1f ", x, y)
		c.Points = append(c.Points, chartPoint{X: x, Y: y, Label: fmt.Sprintf("version %d · %d rows · %s · %s", r.Version, r.Rows, r.Kind, r.At)})
	}
	c.Line = strings.TrimSpace(line.String())
	return c
}
