package tcpproxy

import (
	"io"
	"net"
	"testing"
	"time"
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

// TestSetRateSlowsClients: 256 KiB at 1 MiB/s cannot cross in under a
// quarter second (a lower bound only, which a busy machine cannot break).
func TestSetRateSlowsClients(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		n, _ := io.Copy(io.Discard, c)
		got <- n
	}()
	p := Start(t, ln.Addr().String())
	p.SetRate(1 << 20)
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := c.Write(make([]byte, 256<<10)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if n := <-got; n != 256<<10 {
		t.Fatalf("the target got %d bytes, want %d", n, 256<<10)
	}
	if d := time.Since(start); d < 230*time.Millisecond {
		t.Fatalf("256 KiB at 1 MiB/s crossed in %v", d)
	}
}

// TestHoldStopsClientsUntilRelease: bytes sent while the proxy is held do
// not reach the target until it is released.
func TestHoldStopsClientsUntilRelease(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		b := make([]byte, 4)
		io.ReadFull(c, b)
		got <- b
		c.Close()
	}()
	p := Start(t, ln.Addr().String())
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p.Hold()
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-got:
		t.Fatalf("the target got %q while the proxy was held", b)
	case <-time.After(300 * time.Millisecond):
	}
	p.Release()
	if b := <-got; string(b) != "held" {
		t.Fatalf("after the release the target got %q", b)
	}
}
