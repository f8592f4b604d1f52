// Package freeport picks free TCP addresses on 127.0.0.1 for test servers
// that must know their address before they start (etcd advertises it; a
// meta node's --advertise must be dialable). Another process may take the
// port before the server binds it; the harnesses that use it retry or fail
// loudly then.
package freeport

import (
	"net"
	"testing"
)

// Addr returns a free 127.0.0.1:PORT.
func Addr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// MustAddr is Addr that fails the test on error.
func MustAddr(t testing.TB) string {
	t.Helper()
	addr, err := Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}
