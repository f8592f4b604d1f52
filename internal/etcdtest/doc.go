// Package etcdtest runs a real, single-member etcd server inside the test
// process on 127.0.0.1 (go.etcd.io/etcd/server/v3/embed), for tests of
// leadership. It can be stopped and started again on the same ports and
// data, to make etcd unreachable for a while.
package etcdtest
