package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/wire"
)

// benchConsoleRows is the size of the table the console benchmark loads.
const benchConsoleRows = 10000

// BenchmarkConsoleTablePage: the web console's table page of a table of
// 10,000 rows (schema, history chart of 100 versions, first page of rows)
// against a real lake serve on a local stage. "browser" is a headless
// chromium navigating to the page until its load event (the page, its
// CSS and script); "http" is the server's answer alone, read whole by a
// Go client. Each reports its p50 and p90. Skipped unless
// LAKE_BENCH_CONSOLE=1.
func BenchmarkConsoleTablePage(b *testing.B) {
	if os.Getenv("LAKE_BENCH_CONSOLE") != "1" {
		b.Skip("set LAKE_BENCH_CONSOLE=1 to run the console benchmark")
	}
	l := startConsoleLake(b, consoleSetup{})
	benchConsoleTable(b, l)
	page := l.base + "/tables/bench"

	b.Run("browser", func(b *testing.B) {
		ctx := newBrowser(b)
		browse(b, ctx, chromedp.Navigate(page)) // warm: the first view of every asset
		isTablePage := func() {
			b.Helper()
			if loc := get(b, ctx, chromedp.Location()); loc != page {
				b.Fatalf("the browser is at %s, not the table page", loc)
			}
			if h := get(b, ctx, chromedp.Text(chromedp.CSS("h1"))); !strings.Contains(h, "bench") {
				b.Fatalf("the page shows %q, not the table bench", h)
			}
		}
		isTablePage()
		var took []time.Duration
		for b.Loop() {
			start := time.Now()
			browse(b, ctx, chromedp.Navigate(page))
			took = append(took, time.Since(start))
		}
		isTablePage() // what was timed was the table, not an error page
		reportPercentiles(b, took)
	})

	// The browser's own cost of a navigation: to a bare stylesheet of the
	// console, which runs no script and renders nothing of the table.
	b.Run("browser-css", func(b *testing.B) {
		ctx := newBrowser(b)
		css := l.base + "/static/console.css"
		browse(b, ctx, chromedp.Navigate(css))
		var took []time.Duration
		for b.Loop() {
			start := time.Now()
			browse(b, ctx, chromedp.Navigate(css))
			took = append(took, time.Since(start))
		}
		if loc := get(b, ctx, chromedp.Location()); loc != css {
			b.Fatalf("the browser is at %s, not the stylesheet", loc)
		}
		reportPercentiles(b, took)
	})

	b.Run("http", func(b *testing.B) {
		var took []time.Duration
		for b.Loop() {
			start := time.Now()
			resp, err := http.Get(page)
			if err != nil {
				b.Fatal(err)
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				b.Fatalf("GET the table page: %d %v", resp.StatusCode, err)
			}
			took = append(took, time.Since(start))
		}
		reportPercentiles(b, took)
	})
}

// benchConsoleTable makes table bench: the test clip put once, then
// appends of rows naming it up to benchConsoleRows rows in 100 versions.
func benchConsoleTable(b *testing.B, l *consoleLake) {
	b.Helper()
	ctx := withTimeout(b, 5*time.Minute)
	c := l.client(b, "")
	if _, err := c.CreateTable(ctx, "bench", nil, false); err != nil {
		b.Fatal(err)
	}
	res, err := c.PutFile(ctx, "bench", filepath.Join("testdata", "clip.webm"), client.PutOptions{})
	if err != nil {
		b.Fatal(err)
	}
	const versions = 99
	rows := 1
	for v := range versions {
		n := (benchConsoleRows - 1) / versions
		if v == versions-1 {
			n = benchConsoleRows - rows
		}
		names := make([]string, n)
		files := make([]wire.FileValue, n)
		for i := range n {
			names[i], files[i] = fmt.Sprintf("row-%05d", rows+i), res.File
		}
		rec := wiretest.FileRows(names, files)
		_, err := c.Append(ctx, "bench", rec, client.AppendOptions{})
		rec.Release()
		if err != nil {
			b.Fatal(err)
		}
		rows += n
	}
	info, err := c.Describe(ctx, "bench")
	if err != nil || info.GetRows() != benchConsoleRows {
		b.Fatalf("the bench table has %d rows (%v), want %d", info.GetRows(), err, benchConsoleRows)
	}
}

func reportPercentiles(b *testing.B, took []time.Duration) {
	if len(took) == 0 {
		return
	}
	slices.Sort(took)
	at := func(p float64) float64 {
		return float64(took[int(p*float64(len(took)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.90), "p90-ms")
}
