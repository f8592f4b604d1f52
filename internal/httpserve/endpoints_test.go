package httpserve

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakedata/lake/internal/auth"
	"github.com/lakedata/lake/wire"
)

const (
	readToken  = "read-token-0123456789abcdef"
	adminToken = "admin-token-0123456789abcdef"
)

var tokens = []auth.Token{{Value: readToken, Scope: wire.ScopeRead}, {Value: adminToken, Scope: wire.ScopeAdmin}}

// testRegistry holds one counter whose name a test looks for in a body.
func testRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "lake_test_things_total", Help: "Things."})
	c.Add(3)
	reg.MustRegister(c)
	return reg
}

func endpoints(e Endpoints) http.Handler {
	mux := http.NewServeMux()
	e.Register(mux)
	return mux
}

// get answers GET path from h with the Authorization header auth (none
// when empty).
func get(t *testing.T, h http.Handler, path, authz string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

func TestMetricsServesEveryGatherer(t *testing.T) {
	h := endpoints(Endpoints{Gatherers: prometheus.Gatherers{Runtime(), testRegistry()}})
	code, body := get(t, h, "/metrics", "")
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	for _, want := range []string{"lake_test_things_total 3", "go_goroutines", "process_cpu_seconds_total"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestReadyz(t *testing.T) {
	ok := Check{Name: "meta", Ready: func(context.Context) error { return nil }}
	bad := Check{Name: "query", Ready: func(context.Context) error { return errors.New("the metadata service\ndoes not answer") }}
	if code, body := get(t, endpoints(Endpoints{Ready: []Check{ok}}), "/readyz", ""); code != http.StatusOK || body != "ready\n" {
		t.Errorf("all ready: %d %q", code, body)
	}
	code, body := get(t, endpoints(Endpoints{Ready: []Check{ok, bad}}), "/readyz", "")
	if code != http.StatusServiceUnavailable || body != "query: not ready: the metadata service does not answer\n" {
		t.Errorf("one not ready: %d %q, want 503 and one line naming it", code, body)
	}
}

// TestTokens: with tokens, /metrics and /readyz need a token of at least
// the read scope and a refusal carries no data; /healthz is always open;
// OpenMetrics opens the other two; without tokens everything is open.
func TestTokens(t *testing.T) {
	guarded := endpoints(Endpoints{Gatherers: prometheus.Gatherers{testRegistry()}, Tokens: tokens})
	for _, c := range []struct {
		name, path, authz string
		want              int
	}{
		{"no token", "/metrics", "", http.StatusUnauthorized},
		{"wrong token", "/metrics", "Bearer not-a-token-of-this-server", http.StatusUnauthorized},
		{"basic scheme", "/metrics", "Basic " + readToken, http.StatusUnauthorized},
		{"empty bearer", "/metrics", "Bearer ", http.StatusUnauthorized},
		{"read token", "/metrics", "Bearer " + readToken, http.StatusOK},
		{"lower-case scheme", "/metrics", "bearer " + adminToken, http.StatusOK},
		{"readyz without a token", "/readyz", "", http.StatusUnauthorized},
		{"readyz with a read token", "/readyz", "Bearer " + readToken, http.StatusOK},
		{"healthz without a token", "/healthz", "", http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := get(t, guarded, c.path, c.authz)
			if code != c.want {
				t.Fatalf("status %d, want %d: %s", code, c.want, body)
			}
			if code == http.StatusUnauthorized && strings.Contains(body, "lake_test") {
				t.Fatalf("a refused request got metric text: %s", body)
			}
			if strings.Contains(body, readToken) || strings.Contains(body, adminToken) {
				t.Fatalf("the answer quotes a token: %s", body)
			}
		})
	}
	open := endpoints(Endpoints{Gatherers: prometheus.Gatherers{testRegistry()}, Tokens: tokens, OpenMetrics: true})
	if code, body := get(t, open, "/metrics", ""); code != http.StatusOK || !strings.Contains(body, "lake_test_things_total") {
		t.Errorf("open metrics without a token: %d", code)
	}
	none := endpoints(Endpoints{Gatherers: prometheus.Gatherers{testRegistry()}})
	if code, _ := get(t, none, "/metrics", ""); code != http.StatusOK {
		t.Errorf("no tokens configured: %d, want 200", code)
	}
}

func TestDoubleAuthorizationRefused(t *testing.T) {
	h := endpoints(Endpoints{Tokens: tokens})
	req := httptest.NewRequest(http.MethodGet, "/readyz", nil)
	req.Header.Add("Authorization", "Bearer "+readToken)
	req.Header.Add("Authorization", "Bearer "+adminToken)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("two Authorization headers: %d, want 401", rec.Code)
	}
}
