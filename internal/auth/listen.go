package auth

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// ErrOpenListen is wrapped by CheckListen's refusal.
var ErrOpenListen = errors.New("auth: refusing an unauthenticated listener on a non-loopback address")

// CheckListen is the listen policy of every role: a service without tokens
// may only listen on loopback (127.0.0.0/8, ::1, localhost), unless the
// operator says --insecure-no-auth. "", 0.0.0.0 and :: listen everywhere,
// so they are not loopback; nor is any host name but localhost, because
// resolving it would make the policy depend on DNS. A malformed addr is an
// error too.
func CheckListen(addr string, haveTokens, insecureNoAuth bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("auth: listen address %q: %w", addr, err)
	}
	if haveTokens || insecureNoAuth || isLoopback(host) {
		return nil
	}
	return fmt.Errorf("%w: %s is reachable from other machines and no --token-file is set; give --token-file, listen on 127.0.0.1, or pass --insecure-no-auth to serve without authentication", ErrOpenListen, addr)
}

// isLoopback reports whether host names only the loopback interface,
// without any lookup.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	// An IPv4-mapped ::ffff:127.0.0.1 is loopback too.
	return ip.Unmap().IsLoopback()
}
