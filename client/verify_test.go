package client

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	flightgen "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lakedata/lake/roles/meta"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// actionPeek remembers the type of the action a DoAction stream carries.
type actionPeek struct {
	grpc.ServerStream
	typ string
}

func (p *actionPeek) RecvMsg(m any) error {
	err := p.ServerStream.RecvMsg(m)
	if a, ok := m.(*flightgen.Action); ok && err == nil {
		p.typ = a.GetType()
	}
	return err
}

// TestClientVerify: a healthy table verifies OK; an object overwritten in
// the stage is reported once even though the call that found it first
// failed after sending it (the retry's answer replaces the failed one);
// an unknown table is ErrTableNotFound.
func TestClientVerify(t *testing.T) {
	var failed atomic.Bool
	flaky := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if filepath.Base(info.FullMethod) != "DoAction" {
			return handler(srv, ss)
		}
		p := &actionPeek{ServerStream: ss}
		err := handler(srv, p)
		if p.typ == wire.ActionVerify && err == nil && failed.CompareAndSwap(false, true) {
			return status.Error(codes.Unavailable, "connection lost after the answer")
		}
		return err
	}
	f := newFixture(t, func(cfg *meta.Config) {
		cfg.VerifyRate = 0
		cfg.ServerOptions = append(cfg.ServerOptions, grpc.StreamInterceptor(flaky))
	})
	c := f.connect()
	if _, err := c.CreateTable(ctx, "t", nil, false); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, name := range []string{"a.bin", "b.bin"} {
		res, err := c.PutReader(ctx, "t", name, strings.NewReader("content of "+name), PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, res.File.Key)
	}
	var calls int
	rep, err := c.Verify(ctx, "t", VerifyOptions{Progress: func(*lakepb.VerifyProgress) { calls++ }})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Objects != 2 || rep.Version != 2 || rep.BytesRead != int64(2*len("content of a.bin")) || calls != 1 {
		t.Fatalf("healthy table: %+v after %d progress calls", rep, calls)
	}
	if !failed.Load() {
		t.Fatal("no failure was injected")
	}

	// Same size, other bytes.
	if err := os.WriteFile(filepath.Join(f.stageDir, filepath.FromSlash(keys[1])), []byte("CONTENT OF B.BIN"), 0o644); err != nil {
		t.Fatal(err)
	}
	failed.Store(false)
	rep, err = c.Verify(ctx, "t", VerifyOptions{AllVersions: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || len(rep.Mismatches) != 1 || !rep.AllVersions {
		t.Fatalf("report %+v, want exactly one mismatch", rep)
	}
	if m := rep.Mismatches[0]; m.GetKey() != keys[1] || m.GetName() != "b.bin" || m.GetProblem() != lakepb.VerifyProblem_VERIFY_PROBLEM_SHA256_DIFFERS {
		t.Errorf("mismatch %v", m)
	}

	if _, err := c.Verify(ctx, "nope", VerifyOptions{}); !errors.Is(err, wire.ErrTableNotFound) {
		t.Errorf("unknown table: %v, want ErrTableNotFound", err)
	}
}
