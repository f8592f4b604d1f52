package etcdtest

import (
	"bytes"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/lakedata/lake/internal/freeport"
)

// Server is an embedded etcd member.
type Server struct {
	// Endpoint is the client URL, http://127.0.0.1:PORT.
	Endpoint string

	t      testing.TB
	dir    string
	client url.URL
	peer   url.URL

	mu   sync.Mutex
	e    *embed.Etcd
	logs syncBuffer // etcd's own log, shown only when the test fails
}

// syncBuffer is a bytes.Buffer safe for etcd's logging goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Sync() error { return nil }

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Start starts etcd in a temporary directory; it stops when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{
		t: t, dir: t.TempDir(),
		client: url.URL{Scheme: "http", Host: freeport.MustAddr(t)},
		peer:   url.URL{Scheme: "http", Host: freeport.MustAddr(t)},
	}
	s.Endpoint = s.client.String()
	s.start()
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("etcd log:\n%s", s.logs.String())
		}
	})
	return s
}

func (s *Server) start() {
	s.t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "lake-test"
	cfg.Dir = s.dir
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(zapcore.NewCore(
		zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), &s.logs, zap.WarnLevel)))
	cfg.ListenClientUrls = []url.URL{s.client}
	cfg.AdvertiseClientUrls = []url.URL{s.client}
	cfg.ListenPeerUrls = []url.URL{s.peer}
	cfg.AdvertisePeerUrls = []url.URL{s.peer}
	cfg.InitialCluster = fmt.Sprintf("%s=%s", cfg.Name, s.peer.String())
	var e *embed.Etcd
	var err error
	// A port freed by Stop may take a moment to be reusable.
	for attempt := 0; attempt < 50; attempt++ {
		if e, err = embed.StartEtcd(cfg); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		s.t.Fatalf("etcdtest: start etcd: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		s.t.Fatal("etcdtest: etcd did not become ready in 30s")
	}
	s.mu.Lock()
	s.e = e
	s.mu.Unlock()
}

// Stop stops etcd; clients see it as unreachable. Stopping twice is fine.
func (s *Server) Stop() {
	s.mu.Lock()
	e := s.e
	s.e = nil
	s.mu.Unlock()
	if e != nil {
		e.Close()
	}
}

// Restart starts a stopped etcd again with the same ports and data.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}
