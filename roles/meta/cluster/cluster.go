package cluster

import (
	"context"
	"time"
)

// Coordinator is what the metadata service needs from its cluster.
type Coordinator interface {
	// Run takes part in leader elections until ctx ends, calling h's hooks
	// from its own goroutines. It returns when ctx ends.
	Run(ctx context.Context, h Hooks)
	// Leading reports whether this node leads and can prove its lease now.
	Leading() bool
	// Leader is the advertised address of the current leader, "" when
	// unknown (an election in progress, or etcd unreachable).
	Leader() string
	// Self is this node's advertised address.
	Self() string
	// PublishHead announces a committed table version to the followers.
	// It never blocks; announcements are coalesced and best effort (a
	// follower that misses one catches up from the stage log later).
	PublishHead(h Head)
	// Report publishes this node's applied state for Members. It never
	// blocks; reports are coalesced.
	Report(r Report)
	// Members lists the nodes of the cluster and their latest reports.
	Members(ctx context.Context) ([]Member, error)
	// Close stops taking part: a leader resigns at once (so a follower
	// takes over without waiting for the TTL). Call it after the last
	// commit finished.
	Close(ctx context.Context) error
}

// Hooks are the service's reactions to cluster events.
type Hooks struct {
	// Elected runs after this node won an election and before Leading
	// turns true: the service catches up from the stage log here. An error
	// gives the leadership up again.
	Elected func(ctx context.Context) error
	// Deposed runs when this node stopped leading.
	Deposed func()
	// Head runs for every head the leader announces (also on the leader).
	Head func(Head)
	// Resync runs when announcements may have been missed (the watch
	// restarted): the service then catches up every table from the stage.
	Resync func()
}

// Head is a committed table version.
type Head struct {
	TableID string `json:"table_id"`
	Name    string `json:"name"`
	Version int64  `json:"version"`
}

// Report is what a node tells the cluster about itself.
type Report struct {
	// Tables is how many tables the node's index holds.
	Tables int `json:"tables"`
	// Versions is the sum of the node's table heads: comparing it with the
	// leader's gives the number of versions a follower lags behind.
	Versions int64 `json:"versions"`
}

// Member is one node of the cluster.
type Member struct {
	Addr    string    `json:"addr"`
	Leader  bool      `json:"leader"`
	Report  Report    `json:"report"`
	Started time.Time `json:"started"`
	Updated time.Time `json:"updated"`
}
