package auth

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Endpoint is a parsed client endpoint: the address to dial and whether the
// connection uses TLS.
type Endpoint struct {
	// Addr is host:port, with an IPv6 host in brackets.
	Addr string
	TLS  bool
}

// String returns the endpoint in the canonical form ParseEndpoint accepts:
// grpc://host:port or grpc+tls://host:port.
func (e Endpoint) String() string {
	if e.TLS {
		return "grpc+tls://" + e.Addr
	}
	return "grpc://" + e.Addr
}

// ErrBadEndpoint is wrapped by every ParseEndpoint error.
var ErrBadEndpoint = errors.New("auth: invalid endpoint")

// ParseEndpoint parses a client endpoint: grpc://host:port or
// grpc+tcp://host:port (plaintext), grpc+tls://host:port (TLS), or a bare
// host:port (plaintext). These are the Arrow Flight location schemes lake
// speaks. The port is required and numeric; a path, query, user info or any
// other scheme is an error, so a mistyped http:// URL fails here rather
// than as a confusing gRPC error later.
func ParseEndpoint(s string) (Endpoint, error) {
	if s == "" {
		return Endpoint{}, fmt.Errorf("%w: empty; want grpc://host:port or grpc+tls://host:port", ErrBadEndpoint)
	}
	var ep Endpoint
	rest := s
	if scheme, after, ok := strings.Cut(s, "://"); ok {
		switch strings.ToLower(scheme) {
		case "grpc", "grpc+tcp":
		case "grpc+tls":
			ep.TLS = true
		default:
			return Endpoint{}, fmt.Errorf("%w: %s: unsupported scheme %q; want grpc, grpc+tcp or grpc+tls", ErrBadEndpoint, redact(s), scheme)
		}
		// A pasted URL often ends in "/"; nothing else may follow the port.
		rest = strings.TrimSuffix(after, "/")
	}
	if i := strings.IndexAny(rest, "/?#@"); i >= 0 {
		return Endpoint{}, fmt.Errorf("%w: %s: unexpected %q; want scheme://host:port with no path, query or user info", ErrBadEndpoint, redact(s), rest[i])
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return Endpoint{}, fmt.Errorf("%w: %s: want host:port: %v", ErrBadEndpoint, redact(s), err)
	}
	if host == "" {
		return Endpoint{}, fmt.Errorf("%w: %s: missing host", ErrBadEndpoint, redact(s))
	}
	if !validHost(host) {
		return Endpoint{}, fmt.Errorf("%w: %s: %q is neither an IP address nor a host name", ErrBadEndpoint, redact(s), host)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return Endpoint{}, fmt.Errorf("%w: %s: the port must be a number from 1 to 65535", ErrBadEndpoint, redact(s))
	}
	ep.Addr = net.JoinHostPort(host, strconv.FormatUint(n, 10))
	return ep, nil
}

// validHost accepts an IP address (IPv6 with an optional zone) or a DNS
// name made of letters, digits, '-', '_' and '.'.
func validHost(h string) bool {
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	if len(h) > 253 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}

// redact hides user info (user:password@) before an endpoint is quoted in
// an error, since errors never carry credentials.
func redact(s string) string {
	i := strings.LastIndex(s, "@")
	if i < 0 {
		return strconv.Quote(s)
	}
	prefix := ""
	if scheme, _, ok := strings.Cut(s[:i], "://"); ok {
		prefix = scheme + "://"
	}
	return strconv.Quote(prefix + "REDACTED@" + s[i+1:])
}
