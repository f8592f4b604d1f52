package console

import (
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxGridRows bounds what the SQL page shows of a result.
const maxGridRows = 1000

type sqlData struct {
	Query   string
	Grid    *grid
	Error   string
	Elapsed string
	Ran     bool
}

func (sqlData) title() string { return "SQL" }

// sqlPage is the editor; ?q= fills it in (a link from a table page) but
// runs nothing: statements run only from the posted form.
func (c *Console) sqlPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "sql", sqlData{Query: r.URL.Query().Get("q")})
}

// sqlRun runs the posted statement through the role's read-only path,
// the same one Flight SQL's DoGet takes, and shows its grid. SQL needs
// the read scope, as DoGet does; every session has at least that.
func (c *Console) sqlRun(w http.ResponseWriter, r *http.Request) {
	q := r.PostFormValue("q")
	d := sqlData{Query: q, Ran: true}
	if strings.TrimSpace(q) == "" {
		d.Error = "Type a SELECT statement first."
		c.render(w, r, http.StatusBadRequest, "sql", d)
		return
	}
	start := time.Now()
	g, err := collect(r.Context(), c.cfg.SQL, q, maxGridRows, findLinks)
	d.Elapsed = time.Since(start).Round(time.Millisecond).String()
	if err != nil {
		d.Error = errorText(err)
		c.render(w, r, http.StatusBadRequest, "sql", d)
		return
	}
	d.Grid = g
	c.render(w, r, http.StatusOK, "sql", d)
}

// findLinks links a FILE value of an ad-hoc result, whose table the
// console does not know: /file finds the table whose rows name the key.
func findLinks(key string) (string, string) {
	q := url.Values{"key": {key}}.Encode()
	return "/file?" + q, "/file?" + q + "&raw=1"
}
