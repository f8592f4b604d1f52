//go:build duckdb_arrow

package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

func httpGet(t *testing.T, url string) (int, string) {
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

// TestHTTPOneListenerForBothRoles: the embedded default serves one
// listener whose /metrics has both roles' metrics and the runtime's once,
// and whose /readyz needs both roles.
func TestHTTPOneListenerForBothRoles(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Listen, cfg.MetaListen, cfg.HTTPListen = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	openClose(t, cfg, func(s *Server) {
		base := "http://" + s.HTTPAddr().String()
		code, body := httpGet(t, base+"/metrics")
		if code != http.StatusOK {
			t.Fatalf("/metrics: %d %s", code, body)
		}
		for _, name := range []string{"lake_meta_appends_total", "lake_query_seconds_count", "go_goroutines ", "process_start_time_seconds "} {
			if n := strings.Count(body, "\n"+name); n < 1 {
				t.Errorf("/metrics has %s %d times", name, n)
			}
		}
		if n := strings.Count(body, "\ngo_goroutines "); n != 1 {
			t.Errorf("go_goroutines served %d times, want once", n)
		}
		if code, body := httpGet(t, base+"/readyz"); code != http.StatusOK {
			t.Errorf("/readyz: %d %s", code, body)
		}
	})
}

// TestHTTPMetaAlone: a meta role serves its own metrics, not the query
// role's.
func TestHTTPMetaAlone(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Role, cfg.Listen, cfg.HTTPListen = RoleMeta, "127.0.0.1:0", "127.0.0.1:0"
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	openClose(t, cfg, func(s *Server) {
		_, body := httpGet(t, "http://"+s.HTTPAddr().String()+"/metrics")
		if !strings.Contains(body, "lake_meta_leader 1") || strings.Contains(body, "lake_query_") {
			t.Errorf("meta alone /metrics:\n%s", body)
		}
	})
}

// TestHTTPAddressTaken: a taken default address is given up (the server
// runs without HTTP), one that was asked for fails Open.
func TestHTTPAddressTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cfg := DefaultConfig()
	cfg.Role, cfg.Listen, cfg.HTTPListen = RoleMeta, "127.0.0.1:0", l.Addr().String()
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	openClose(t, cfg, func(s *Server) {
		if s.HTTPAddr() != nil {
			t.Errorf("listening on %v although the address is taken", s.HTTPAddr())
		}
	})
	cfg.HTTPBestEffort = false
	if s, err := Open(context.Background(), cfg); err == nil {
		s.Close(context.Background())
		t.Fatal("Open succeeded although the HTTP address asked for is taken")
	}
}
