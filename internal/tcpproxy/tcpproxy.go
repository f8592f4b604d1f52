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
	"time"
)

// Proxy forwards every connection to its target and counts client bytes.
type Proxy struct {
	Addr string // host:port to dial instead of the target

	sent  atomic.Int64
	rate  atomic.Int64 // bytes per second clients may send; 0: no limit
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	next  time.Time     // under mu: when the next paced chunk may go
	open  chan struct{} // under mu: closed while client bytes flow (Hold, Release)
	wg    sync.WaitGroup
}

// Start runs a proxy to target (host:port) until the test ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), ln: ln, open: make(chan struct{})}
	close(p.open)
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
				io.Copy(counter{up, p}, c)
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
		p.Release()
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

// SetRate limits what clients send through the proxy, all connections
// together, to bytesPerSec (0: no limit), so a test can make an upload
// last as long as it needs.
func (p *Proxy) SetRate(bytesPerSec int64) { p.rate.Store(bytesPerSec) }

// Hold stops what clients send, on open connections and new ones alike,
// until Release: a stalled network, without freezing either side's
// process.
func (p *Proxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default: // held already
	}
}

// Release lets held bytes go on.
func (p *Proxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

// pace waits while the proxy is held, then until n more bytes fit the
// rate. Connections share one
// schedule: each claims the next slot of n/rate seconds.
func (p *Proxy) pace(n int) {
	p.mu.Lock()
	open := p.open
	p.mu.Unlock()
	<-open
	rate := p.rate.Load()
	if rate <= 0 {
		return
	}
	p.mu.Lock()
	at := time.Now()
	if p.next.After(at) {
		at = p.next
	}
	p.next = at.Add(time.Duration(int64(n) * int64(time.Second) / rate))
	p.mu.Unlock()
	time.Sleep(time.Until(at))
}

// counter counts as it writes, so live connections are counted too.
type counter struct {
	w io.Writer
	p *Proxy
}

// paceChunk is how many bytes a write sends between two waits for the rate.
const paceChunk = 16 << 10

func (c counter) Write(b []byte) (int, error) {
	done := 0
	for done < len(b) {
		chunk := b[done:min(len(b), done+paceChunk)]
		c.p.pace(len(chunk))
		n, err := c.w.Write(chunk)
		done += n
		c.p.sent.Add(int64(n))
		if err != nil {
			return done, err
		}
	}
	return done, nil
}
