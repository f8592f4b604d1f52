// Package cluster is the metadata service's view of its peers: who leads,
// who is a member, and which table versions the leader has committed.
//
// Leadership decides liveness only (DESIGN §2): the commit point is the
// put-if-absent of a log record in the stage, so a deposed leader that still
// writes loses that race and cannot lose or duplicate an acknowledged
// commit. What this package adds is that a node stops committing as soon as
// it can no longer prove its lease: Leading is true only while the last
// keep-alive that etcd confirmed, counted from when it was sent, is younger
// than 90 % of the lease TTL. A process frozen past its TTL (SIGSTOP, a long
// pause) therefore wakes up as a non-leader, before it has asked etcd.
//
// Two Coordinators exist: Single (one node, always the leader; the embedded
// default) and Etcd (a concurrency.Election whose value is the node's
// advertised address; members and announced heads live under the same key
// prefix).
package cluster
