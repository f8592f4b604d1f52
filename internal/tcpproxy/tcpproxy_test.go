package tcpproxy

import (
	"io"
	"net"
	"testing"
)

func TestProxyForwardsAndCounts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		io.Copy(c, c) // echo
		c.Close()
	}()
	p := Start(t, ln.Addr().String())
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("twelve bytes")
	c.Write(msg)
	back := make([]byte, len(msg))
	if _, err := io.ReadFull(c, back); err != nil || string(back) != string(msg) {
		t.Fatalf("echo through the proxy: %q, %v", back, err)
	}
	c.Close()
	if p.Sent() != int64(len(msg)) {
		t.Fatalf("counted %d bytes, want %d", p.Sent(), len(msg))
	}
	p.Reset()
	if p.Sent() != 0 {
		t.Fatal("Reset did not reset")
	}
}
