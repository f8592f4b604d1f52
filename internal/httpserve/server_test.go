package httpserve

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/lakedata/lake/internal/auth/authtest"
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
	s, err := Listen("127.0.0.1:0", starting, nil, slog.New(slog.DiscardHandler))
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

// TestServerServesTLS: with a certificate the listener answers HTTPS and
// nothing in the clear, so tokens and cookies never cross unencrypted.
func TestServerServesTLS(t *testing.T) {
	certFile, keyFile := authtest.SelfSigned(t)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	Endpoints{}.Register(mux)
	s, err := Listen("127.0.0.1:0", mux, &tls.Config{Certificates: []tls.Certificate{cert}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	pem, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := c.Get("https://" + s.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz over TLS: %d", resp.StatusCode)
	}
	if resp, err := http.Get("http://" + s.Addr().String() + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("the TLS listener answered plain HTTP")
		}
	}
}

// TestTrustedHostsRefusesNames: without tokens only requests addressed to
// an IP literal or localhost are answered; a DNS name (a rebinding page's
// own) gets 421 and not the page.
func TestTrustedHostsRefusesNames(t *testing.T) {
	h := TrustedHosts(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "data") }))
	for host, ok := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:8080": true, "LOCALHOST": true, "[::1]:8080": true, "10.0.0.5": true,
		"evil.example:8080": false, "127.0.0.1.nip.io:8080": false, "": false,
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Host = host
		h.ServeHTTP(rec, req)
		if got := rec.Code == http.StatusOK && rec.Body.String() == "data"; got != ok {
			t.Errorf("Host %q: status %d, body %q; want answered %v", host, rec.Code, rec.Body.String(), ok)
		}
	}
}
