package server

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/internal/etcdtest"
	"github.com/lakedata/lake/internal/freeport"
	"github.com/lakedata/lake/wire"
)

func TestMain(m *testing.M) {
	// No AWS here: keep the SDK off the instance metadata service.
	os.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	goleak.VerifyTestMain(m)
}

// openClose opens cfg, lets use call it, closes it and checks that what it
// held is free again: every address can be listened on.
func openClose(t *testing.T, cfg Config, use func(*Server)) {
	t.Helper()
	s, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, a := range []net.Addr{s.MetaAddr(), s.QueryAddr(), s.HTTPAddr()} {
		if a != nil {
			addrs = append(addrs, a.String())
		}
	}
	if use != nil {
		use(s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Nothing may answer there any more. (Binding the port again would
	// be the wrong test: on a busy machine another process's outgoing
	// connection may take the freed ephemeral port as its own.)
	for _, a := range addrs {
		if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
			c.Close()
			t.Fatalf("after Close, something still answers at %s", a)
		}
	}
}

// createTable creates a table through endpoint, retrying while the
// metadata service has no leader yet.
func createTable(t *testing.T, endpoint, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, "grpc://"+endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for {
		_, err := c.CreateTable(ctx, name, wire.DefaultSchema(), true)
		if err == nil {
			return
		}
		if !errors.Is(err, wire.ErrNotLeader) || ctx.Err() != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestOpenCloseMetaEtcd: a clustered meta node on embedded etcd leads,
// commits, and after Close leaves nothing behind: its port, its index
// lock (the same node opens again at once, in the same process) and every
// goroutine (the coordinator's etcd client included).
func TestOpenCloseMetaEtcd(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	etcd := etcdtest.Start(t)
	cfg := DefaultConfig()
	cfg.Role = RoleMeta
	cfg.Listen = freeport.MustAddr(t) // the advertised address, so not :0
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.Stage = filepath.Join(t.TempDir(), "stage")
	cfg.Etcd = []string{etcd.Endpoint}
	cfg.SessionTTL = time.Second
	for _, table := range []string{"first", "second"} {
		openClose(t, cfg, func(s *Server) {
			if s.QueryAddr() != nil {
				t.Errorf("role meta runs a query service at %v", s.QueryAddr())
			}
			createTable(t, s.MetaAddr().String(), table)
		})
	}
	// etcd starts goroutines of its own as it serves; without it, what
	// is left would be ours.
	etcd.Stop()
	goleak.VerifyNone(t, ignore)
}

// TestOpenFailsReleasing: when meta cannot open (another server holds its
// data dir), Open fails and closes what it had built, the coordinator
// first among them: no goroutine stays.
func TestOpenFailsReleasing(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	etcd := etcdtest.Start(t)
	cfg := DefaultConfig()
	cfg.Role = RoleMeta
	cfg.Listen = freeport.MustAddr(t)
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.Stage = filepath.Join(t.TempDir(), "stage")
	cfg.Etcd = []string{etcd.Endpoint}
	first, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	second := cfg
	second.Listen = freeport.MustAddr(t)
	if s, err := Open(context.Background(), second); err == nil {
		s.Close(context.Background())
		t.Fatal("a second server opened the same data dir")
	}
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// etcd starts goroutines of its own as it serves; without it, what
	// is left would be ours.
	etcd.Stop()
	goleak.VerifyNone(t, ignore)
}

// TestOpenRefusesInvalid: Open validates; nothing is created.
func TestOpenRefusesInvalid(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Role = RoleQuery
	cfg.Etcd = []string{"http://127.0.0.1:2379"}
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	if _, err := Open(context.Background(), cfg); err == nil {
		t.Fatal("Open accepted --etcd on a query node")
	}
	if _, err := os.Stat(cfg.DataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused Open touched the data dir: %v", err)
	}
}
