package s3

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// errClosed: a request of a closed store. The SDK does not retry it.
var errClosed = errors.New("s3: the store is closed")

// conns tracks the connections the store's HTTP client dials, so Close can
// release them: the SDK's client offers no way to close its idle
// connections (its transport is a private copy), which would otherwise
// stay open until the transport's idle timeout (90 s), one set per store.
type conns struct {
	mu     sync.Mutex
	open   map[*trackedConn]struct{}
	closed bool
}

// install makes the client's transport dial through c. It must run as
// the last client option, after the SDK has built its HTTP client (which
// resets the transport's dial function). A client of the caller's own
// making is left alone, and Close then releases nothing of it.
func (c *conns) install(o *s3.Options) {
	b, ok := o.HTTPClient.(*awshttp.BuildableClient)
	if !ok {
		return
	}
	o.HTTPClient = b.WithTransportOptions(func(tr *http.Transport) {
		dial := tr.DialContext
		if dial == nil {
			dial = (&net.Dialer{}).DialContext
		}
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return c.dial(ctx, dial, network, addr)
		}
	})
}

func (c *conns) dial(ctx context.Context, dial func(context.Context, string, string) (net.Conn, error), network, addr string) (net.Conn, error) {
	if c.isClosed() {
		return nil, errClosed
	}
	conn, err := dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: conn, c: c}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed { // Close ran during the dial
		conn.Close()
		return nil, errClosed
	}
	if c.open == nil {
		c.open = make(map[*trackedConn]struct{})
	}
	c.open[tc] = struct{}{}
	return tc, nil
}

func (c *conns) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// close closes every open connection, idle or busy, and refuses new ones.
func (c *conns) close() {
	c.mu.Lock()
	open := c.open
	c.open, c.closed = nil, true
	c.mu.Unlock()
	for tc := range open {
		tc.Conn.Close()
	}
}

// count is how many connections are open.
func (c *conns) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.open)
}

// trackedConn leaves the set when the transport closes it.
type trackedConn struct {
	net.Conn
	c    *conns
	once sync.Once
}

func (tc *trackedConn) Close() error {
	tc.once.Do(func() {
		tc.c.mu.Lock()
		delete(tc.c.open, tc)
		tc.c.mu.Unlock()
	})
	return tc.Conn.Close()
}
