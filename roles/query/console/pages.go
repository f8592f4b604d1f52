package console

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"time"

	"github.com/lakedata/lake/internal/humanize"
)

// The templates and the static files are part of the binary: the console
// loads nothing from the network and has no build step.
//
//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// pageNames are the pages, each templates/<name>.html inside layout.html.
var pageNames = []string{"signin", "tables", "table", "sql", "file", "error"}

// pages holds each page's parsed template set.
type pages map[string]*template.Template

var funcs = template.FuncMap{
	"bytes":  humanize.Bytes,
	"micros": func(us int64) string { return formatTime(time.UnixMicro(us)) },
	"inc":    func(i int) int { return i + 1 },
}

func parsePages() (pages, error) {
	p := pages{}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/grid.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		p[name] = t
	}
	return p, nil
}

// view is what the layout needs besides the page's own data.
type view struct {
	Title string
	// CSRF is the session's form token, which every form posts back.
	CSRF string
	// SignedIn shows the sign-out button (not on an open lake, where
	// there is nothing to sign out of).
	SignedIn bool
	Page     any
}

// render writes page name with data. It renders to a buffer first, so a
// template error is a clean 500, not half a page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	v := view{Title: titleOf(name, data), Page: data}
	if s := sessionOf(r); s != nil {
		v.CSRF = s.csrf
		v.SignedIn = !c.tokens.Open()
	}
	var buf bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&buf, "layout.html", v); err != nil {
		c.log.Error("console: render", "page", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	// Pages show table data: no cache keeps them after sign-out.
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// titled is page data that names its page.
type titled interface{ title() string }

func titleOf(name string, data any) string {
	if t, ok := data.(titled); ok {
		return t.title()
	}
	return name
}

func (signInData) title() string { return "Sign in" }

// errorData is the error page's.
type errorData struct {
	Status  int
	Message string
}

func (e errorData) title() string { return http.StatusText(e.Status) }

// fail renders the error page. msg is shown to the user: it must carry no
// secret, which lake's errors never do.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.render(w, r, status, "error", errorData{Status: status, Message: msg})
}

func staticHandler() http.Handler {
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err) // the embedded tree always has static/
	}
	files := http.StripPrefix("/static/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(w, r)
	})
}

func formatTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }
