package auth_test

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/lakedata/lake/internal/auth"
)

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestParseEndpoint(t *testing.T) {
	cases := []struct {
		in      string
		want    auth.Endpoint
		wantErr string
	}{
		{in: "grpc://127.0.0.1:50051", want: auth.Endpoint{Addr: "127.0.0.1:50051"}},
		{in: "grpc+tcp://127.0.0.1:50051", want: auth.Endpoint{Addr: "127.0.0.1:50051"}},
		{in: "grpc+tls://lake.example.com:443", want: auth.Endpoint{Addr: "lake.example.com:443", TLS: true}},
		{in: "GRPC+TLS://lake.example.com:443", want: auth.Endpoint{Addr: "lake.example.com:443", TLS: true}},
		{in: "grpc+tls://[::1]:50051", want: auth.Endpoint{Addr: "[::1]:50051", TLS: true}},
		{in: "grpc://localhost:50051/", want: auth.Endpoint{Addr: "localhost:50051"}},
		{in: "localhost:50051", want: auth.Endpoint{Addr: "localhost:50051"}},
		{in: "10.1.2.3:1", want: auth.Endpoint{Addr: "10.1.2.3:1"}},
		{in: "[2001:db8::1]:65535", want: auth.Endpoint{Addr: "[2001:db8::1]:65535"}},
		{in: "meta-0.meta_svc:050052", want: auth.Endpoint{Addr: "meta-0.meta_svc:50052"}},

		{in: "", wantErr: "empty"},
		{in: "http://localhost:50051", wantErr: `unsupported scheme "http"`},
		{in: "https://localhost:443", wantErr: `unsupported scheme "https"`},
		{in: "grpc+unix:///tmp/sock", wantErr: "unsupported scheme"},
		{in: "grpc://localhost", wantErr: "want host:port"},
		{in: "localhost", wantErr: "want host:port"},
		{in: "grpc://:50051", wantErr: "missing host"},
		{in: ":50051", wantErr: "missing host"},
		{in: "grpc://localhost:", wantErr: "port must be a number"},
		{in: "grpc://localhost:0", wantErr: "port must be a number"},
		{in: "grpc://localhost:65536", wantErr: "port must be a number"},
		{in: "grpc://localhost:http", wantErr: "port must be a number"},
		{in: "grpc://localhost:+1", wantErr: "port must be a number"},
		{in: "grpc://localhost:50051/path", wantErr: "no path"},
		{in: "grpc://localhost:50051?x=1", wantErr: "no path"},
		{in: "grpc://user:secret@localhost:50051", wantErr: "user info"},
		{in: "::1:50051", wantErr: "want host:port"},
		{in: "grpc://ho st:1", wantErr: "neither an IP address nor a host name"},
		{in: "grpc://", wantErr: "want host:port"},
	}
	for _, tc := range cases {
		got, err := auth.ParseEndpoint(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, auth.ErrBadEndpoint) {
				t.Errorf("ParseEndpoint(%q) = %+v, %v; want an error containing %q", tc.in, got, err, tc.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("ParseEndpoint(%q) error quotes user info: %v", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseEndpoint(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func FuzzParseEndpoint(f *testing.F) {
	for _, s := range []string{"grpc://127.0.0.1:50051", "grpc+tls://[::1]:1", "host:80", "http://x:1", "grpc+tcp://a@b:1/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ep, err := auth.ParseEndpoint(s)
		if err != nil {
			if !errors.Is(err, auth.ErrBadEndpoint) {
				t.Fatalf("ParseEndpoint(%q): error %v does not wrap ErrBadEndpoint", s, err)
			}
			return
		}
		host, port, err := net.SplitHostPort(ep.Addr)
		if err != nil || host == "" || port == "" {
			t.Fatalf("ParseEndpoint(%q).Addr = %q: not host:port (%v)", s, ep.Addr, err)
		}
		// The canonical form parses back to the same endpoint.
		again, err := auth.ParseEndpoint(ep.String())
		if err != nil || again != ep {
			t.Fatalf("ParseEndpoint(%q) = %+v; its String %q parses to %+v, %v", s, ep, ep.String(), again, err)
		}
	})
}
