// Package tcpproxy is a test helper: a TCP proxy on 127.0.0.1 that counts
// the bytes clients send through it, so a test can prove what did (or did
// not) cross a connection — file bytes through the query endpoint, parts
// re-sent to S3 after a resume.
package tcpproxy

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards every connection to its target and counts client bytes.
type Proxy struct {
	Addr string // host:port to dial instead of the target

	sent  atomic.Int64
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

// Start runs a proxy to target (host:port) until the test ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), ln: ln}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			p.wg.Go(func() {
				io.Copy(counter{up, &p.sent}, c)
				up.Close()
			})
			p.wg.Go(func() {
				io.Copy(c, up)
				c.Close()
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// Sent is the number of bytes clients sent through the proxy so far.
func (p *Proxy) Sent() int64 { return p.sent.Load() }

// Reset starts counting from zero.
func (p *Proxy) Reset() { p.sent.Store(0) }

// counter counts as it writes, so live connections are counted too.
type counter struct {
	w io.Writer
	n *atomic.Int64
}

func (c counter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}
