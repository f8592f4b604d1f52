package cluster

import (
	"context"
	"testing"
)

// A lone node leads from the moment it exists, not from when Run gets
// scheduled: a call right after Open must be able to commit.
func TestSingleLeadsFromTheStart(t *testing.T) {
	s := NewSingle("127.0.0.1:1")
	if !s.Leading() || s.Leader() != "127.0.0.1:1" {
		t.Fatalf("a new lone node: leading %v, leader %q", s.Leading(), s.Leader())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx, Hooks{}); close(done) }()
	cancel()
	<-done
	if s.Leading() {
		t.Fatal("still leading after Run ended")
	}
	m, err := s.Members(context.Background())
	if err != nil || len(m) != 1 || m[0].Addr != "127.0.0.1:1" {
		t.Fatalf("members %v, %v", m, err)
	}
}

// A lone node's coordinator exists before its listener is bound; SetAddr
// names it once it is.
func TestSingleLearnsItsAddress(t *testing.T) {
	s := NewSingle("")
	s.SetAddr("127.0.0.1:2")
	m, err := s.Members(context.Background())
	if s.Self() != "127.0.0.1:2" || s.Leader() != "127.0.0.1:2" || err != nil || len(m) != 1 || m[0].Addr != "127.0.0.1:2" {
		t.Fatalf("self %q, leader %q, members %v, %v", s.Self(), s.Leader(), m, err)
	}
}
