package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/lakedata/lake/internal/humanize"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// maxTextPreview is how much of a text or JSON object a preview shows.
const maxTextPreview = 64 << 10

// fileRequest is the table, key and version a file page or the raw
// endpoint is asked for.
type fileRequest struct {
	table   string
	key     string
	version *int64
}

func parseFileRequest(r *http.Request) (fileRequest, error) {
	q := r.URL.Query()
	f := fileRequest{table: r.PathValue("table"), key: q.Get("key")}
	if err := wire.ValidateTableName(f.table); err != nil {
		return f, err
	}
	if err := wire.ValidateObjectKey(f.key); err != nil {
		return f, err
	}
	if v := q.Get("version"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return f, errors.New("version must be a version number")
		}
		f.version = &n
	}
	return f, nil
}

// query is the request's query string, for the links between a file's
// page and its bytes.
func (f fileRequest) query() string {
	q := url.Values{"key": {f.key}}
	if f.version != nil {
		q.Set("version", strconv.FormatInt(*f.version, 10))
	}
	return q.Encode()
}

type fileData struct {
	Table     string
	Key       string
	File      *lakepb.UploadedFile
	Kind      mediaKind
	Size      string
	Raw       string
	Download  string
	TableURL  string
	Text      string
	TextCut   bool
	TextError string
}

func (d fileData) title() string { return path.Base(d.Key) }

// filePage previews the object at ?key= of a row of the table: the
// player or image for media, the first 64 KiB for text and JSON, and a
// download link for all.
func (c *Console) filePage(w http.ResponseWriter, r *http.Request) {
	f, err := parseFileRequest(r)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, errorText(err))
		return
	}
	u, err := c.objectURL(r.Context(), sessionOf(r), f.table, f.key, f.version)
	if err != nil {
		c.fail(w, r, httpStatus(err), errorText(err))
		return
	}
	file := u.GetFile()
	base := "/tables/" + url.PathEscape(f.table)
	d := fileData{
		Table: f.table, Key: f.key, File: file, Kind: kindOf(file.GetContentType(), f.key), Size: humanize.Bytes(file.GetSize()),
		Raw: base + "/raw?" + f.query(), Download: base + "/raw?" + f.query() + "&download=1", TableURL: base,
	}
	if d.Kind == kindText || d.Kind == kindJSON {
		d.Text, d.TextCut, err = c.textPreview(r, f.key, file.GetSize(), d.Kind == kindJSON)
		if err != nil {
			d.TextError = errorText(err)
		}
	}
	c.render(w, r, http.StatusOK, "file", d)
}

// textPreview reads the first maxTextPreview bytes of key from the stage;
// JSON read whole is indented. Bytes that are not UTF-8 show as U+FFFD.
func (c *Console) textPreview(r *http.Request, key string, size int64, isJSON bool) (string, bool, error) {
	rc, err := c.cfg.Stage.Open(r.Context(), key, 0, maxTextPreview)
	if err != nil {
		return "", false, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxTextPreview))
	if err != nil {
		return "", false, err
	}
	cut := size > int64(len(b))
	if isJSON && !cut {
		var out bytes.Buffer
		if json.Indent(&out, b, "", "  ") == nil {
			b = out.Bytes()
		}
	}
	if !utf8.Valid(b) {
		b = bytes.ToValidUTF8(b, []byte("\uFFFD"))
	}
	return string(b), cut, nil
}

// rawObject answers the bytes of the object at ?key= of a row of the
// table. meta decides that a row names it (lake.table.url); then a
// presigned URL is a redirect for this browser only, and a local object
// is served here with Range support. Media play inline; everything else
// is a download, and nothing is ever served as a page of the console's
// origin.
func (c *Console) rawObject(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "private, no-store")
	f, err := parseFileRequest(r)
	if err != nil {
		http.Error(w, errorText(err), http.StatusBadRequest)
		return
	}
	download := r.URL.Query().Get("download") != ""
	req := &lakepb.ObjectUrlRequest{Table: f.table, Key: f.key, Version: f.version}
	if download {
		req.DownloadName = path.Base(f.key) // on S3 the URL itself makes it a download
	}
	u, err := c.objectURLAs(r.Context(), sessionOf(r), req)
	if err != nil {
		http.Error(w, errorText(err), httpStatus(err))
		return
	}
	file := u.GetFile()
	parsed, err := url.Parse(u.GetUrl())
	if err != nil {
		http.Error(w, "the metadata service answered a URL that does not parse", http.StatusBadGateway)
		return
	}
	if parsed.Scheme == "http" || parsed.Scheme == "https" {
		// The presigned URL goes to this browser only, in Location; it
		// is never logged.
		http.Redirect(w, r, u.GetUrl(), http.StatusFound)
		return
	}
	c.serveObject(w, r, file, download)
}

// serveObject serves a local stage object with http.ServeContent, which
// answers Range (206), If-Range and HEAD.
func (c *Console) serveObject(w http.ResponseWriter, r *http.Request, file *lakepb.UploadedFile, download bool) {
	key := file.GetKey()
	info, err := c.cfg.Stage.Stat(r.Context(), key)
	if err != nil {
		http.Error(w, "the object is not in the stage", http.StatusNotFound)
		return
	}
	if info.Size != file.GetSize() {
		http.Error(w, "the object's size differs from its row's", http.StatusBadGateway)
		return
	}
	h := w.Header()
	h.Set("Content-Type", servedType(file.GetContentType(), key))
	// Opened on its own, an object is sandboxed: no script of it runs
	// with the console's origin.
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'; img-src 'self'; media-src 'self'")
	if sum := file.GetSha256(); sum != "" {
		h.Set("ETag", `"`+sum+`"`)
	}
	disposition := "inline"
	if download || servedType(file.GetContentType(), key) == "application/octet-stream" {
		disposition = "attachment"
	}
	h.Set("Content-Disposition", mime.FormatMediaType(disposition, map[string]string{"filename": path.Base(key)}))
	var modTime time.Time
	if at := file.GetUploadedAtUnixMicros(); at != 0 {
		modTime = time.UnixMicro(at)
	}
	rs := newObjectReader(r.Context(), c.cfg.Stage, key, info.Size)
	defer rs.Close()
	http.ServeContent(w, r, "", modTime, rs)
}

// findFile finds the table whose rows name ?key= (a FILE value of an SQL
// result) and redirects to its file page, or with ?raw= to its bytes.
func (c *Console) findFile(w http.ResponseWriter, r *http.Request) {
	ctx, s := r.Context(), sessionOf(r)
	key := r.URL.Query().Get("key")
	if err := wire.ValidateObjectKey(key); err != nil {
		c.fail(w, r, http.StatusBadRequest, errorText(err))
		return
	}
	ts, err := c.tables(ctx, s)
	if err != nil {
		c.fail(w, r, httpStatus(err), errorText(err))
		return
	}
	for _, t := range ts {
		_, err := c.objectURL(ctx, s, t.GetName(), key, nil)
		if errors.Is(err, wire.ErrRowNotFound) {
			continue
		}
		if err != nil {
			c.fail(w, r, httpStatus(err), errorText(err))
			return
		}
		endpoint := "/file"
		if r.URL.Query().Get("raw") != "" {
			endpoint = "/raw"
		}
		http.Redirect(w, r, "/tables/"+url.PathEscape(t.GetName())+endpoint+"?"+url.Values{"key": {key}}.Encode(), http.StatusSeeOther)
		return
	}
	c.fail(w, r, http.StatusNotFound, "No current row of any table names this object.")
}
