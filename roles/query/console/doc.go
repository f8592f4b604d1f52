// Package console is the query role's web console (DESIGN §13): a few
// server-rendered HTML pages, embedded in the binary with their CSS and
// JavaScript, that list the tables, show a table's schema, history and
// rows, run SQL with a results grid, and preview the objects FILE rows
// name (images, video and audio that seek through Range requests, text
// and JSON) or download them.
//
// The console opens no path of its own to the data. SQL goes through the
// function the role hands it (Config.SQL), which is the Flight SQL
// statement path with its allow-list guard; catalog questions and object
// checks are metadata actions (Config.Meta), each refused unless the
// signed-in token's scope allows it exactly as Flight would. An object is
// served only after lake.table.url has found a row that names its key: on
// a local stage the console serves the bytes itself (http.ServeContent,
// so Range and If-Range work), on S3 it redirects the browser to the
// presigned URL meta signed.
//
// Sign-in takes the same tokens as Flight. A token never travels in a URL
// and never reaches a page: the sign-in form posts it once, the console
// keeps a server-side session under a random 32-byte id, and the browser
// holds only that id, in an HttpOnly, SameSite=Strict cookie (Secure over
// TLS). Every POST carries the session's CSRF token and must come from the
// console's own origin. Without tokens (an open lake) every visitor gets a
// session without signing in.
package console
