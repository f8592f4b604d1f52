package httpserve

import (
	"net"
	"net/http"
	"strings"
)

// TrustedHosts guards the HTTP surface of a role without tokens against
// DNS rebinding: a web page the user opens can point its own DNS name at
// 127.0.0.1 and then read the open console and metrics as if it were the
// user. Such a request names the attacker's host, so h answers only
// requests whose Host is an IP literal or localhost; anything else gets
// 421 and no data. A role with tokens needs no such check: the page has
// no token.
func TrustedHosts(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !trustedHost(r.Host) {
			http.Error(w, "refused: this lake has no tokens, so it answers only requests addressed to an IP address or localhost (see --token-file)", http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func trustedHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.EqualFold(host, "localhost") || net.ParseIP(host) != nil
}
