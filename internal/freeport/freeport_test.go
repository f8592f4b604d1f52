package freeport

import (
	"net"
	"testing"
)

func TestAddrIsFreeLoopback(t *testing.T) {
	addr := MustAddr(t)
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("Addr() = %q, %v", addr, err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the address is not free: %v", err)
	}
	l.Close()
}
