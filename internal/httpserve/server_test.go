package httpserve

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
)

func fetch(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// TestServerStartsThenSwaps: a listener answers what it started with
// until it is given the roles' mux, and stops listening on Close.
func TestServerStartsThenSwaps(t *testing.T) {
	starting := http.NewServeMux()
	Endpoints{Ready: []Check{Starting}}.Register(starting)
	s, err := Listen("127.0.0.1:0", starting, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + s.Addr().String()
	if code, _ := fetch(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("healthz while starting: %d", code)
	}
	if code, body := fetch(t, base+"/readyz"); code != http.StatusServiceUnavailable || body != "lake: not ready: starting\n" {
		t.Errorf("readyz while starting: %d %q", code, body)
	}
	mux := http.NewServeMux()
	Endpoints{Ready: []Check{{Name: "meta", Ready: func(context.Context) error { return nil }}}}.Register(mux)
	s.SetHandler(mux)
	if code, _ := fetch(t, base+"/readyz"); code != http.StatusOK {
		t.Errorf("readyz once open: %d", code)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("still answering after Close")
	}
}
