package console

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/protobuf/proto"

	"github.com/lakedata/lake/internal/auth"
	"github.com/lakedata/lake/objects"
)

// SQLRunner runs caller SQL read-only: the query role's statement path
// (Service.run), allow-list guard and time travel included. The console
// has no other way to run SQL.
type SQLRunner func(ctx context.Context, q string) (*arrow.Schema, <-chan flight.StreamChunk, error)

// MetaCaller calls a metadata action with the role's connection to meta
// (flightrpc.Pool satisfies it). The console checks the caller's scope
// for the action before it calls.
type MetaCaller interface {
	Action(ctx context.Context, actionType string, req, resp proto.Message) error
}

// Config is what the console needs of the role that mounts it.
type Config struct {
	// Tokens are the bearer tokens sign-in accepts, with their scopes:
	// the role's Flight tokens. None means an open lake: no sign-in.
	Tokens []auth.Token
	// SQL runs statements; Meta answers catalog actions and object
	// checks.
	SQL  SQLRunner
	Meta MetaCaller
	// Stage reads object bytes when meta answers a local (file://) URL;
	// objects of a stage that presigns are redirected to instead.
	Stage  objects.Store
	Logger *slog.Logger
}

// Console is the web console's http.Handler, meant for "/" of the query
// role's mux.
type Console struct {
	cfg      Config
	log      *slog.Logger
	tokens   *auth.TokenSet
	sessions *sessionStore
	throttle *signInThrottle
	pages    pages
	mux      *http.ServeMux
}

// New checks cfg and builds the console.
func New(cfg Config) (*Console, error) {
	if cfg.SQL == nil || cfg.Meta == nil || cfg.Stage == nil {
		return nil, errors.New("console: SQL, Meta and Stage are required")
	}
	pg, err := parsePages()
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Console{cfg: cfg, log: logger, tokens: auth.NewTokenSet(cfg.Tokens), sessions: newSessionStore(maxSessions), throttle: newSignInThrottle(), pages: pg}
	c.routes()
	return c, nil
}

// routes wires every page and endpoint; each handler but sign-in and the
// static files runs only with a session (signedIn).
func (c *Console) routes() {
	m := http.NewServeMux()
	m.Handle("GET /static/", staticHandler())
	m.HandleFunc("GET /signin", c.signInPage)
	m.HandleFunc("POST /signin", c.sameOrigin(c.signIn))
	m.HandleFunc("POST /signout", c.signedIn(c.sameOrigin(c.csrf(c.signOut))))
	m.HandleFunc("GET /{$}", c.signedIn(c.tableList))
	m.HandleFunc("GET /tables/{table}", c.signedIn(c.tablePage))
	m.HandleFunc("GET /tables/{table}/file", c.signedIn(c.filePage))
	m.HandleFunc("GET /tables/{table}/raw", c.signedInData(c.rawObject))
	m.HandleFunc("GET /file", c.signedIn(c.findFile))
	m.HandleFunc("GET /sql", c.signedIn(c.sqlPage))
	m.HandleFunc("POST /sql", c.signedIn(c.sameOrigin(c.csrf(c.sqlRun))))
	c.mux = m
}

// ServeHTTP sets the headers every answer carries, then routes.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// Scripts, styles and fonts only from the console itself; media may
	// come from the stage a presigned URL points at.
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: http: https:; media-src 'self' http: https:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// same-origin: POSTs carry a real Origin (no-referrer would make it
	// "null"), and no page address leaks to the stage.
	h.Set("Referrer-Policy", "same-origin")
	c.mux.ServeHTTP(w, r)
}
