// Package s3test runs a real S3 gateway, versitygw with its posix backend,
// on 127.0.0.1 for tests (DESIGN §8).
//
// Binary finds versitygw on PATH or in the Go bin directory and installs it
// with `go install` when it is missing (once per process; several minutes the
// first time). Start runs one gateway for one test; Shared runs one per test
// binary, started on first use and stopped by RunShared in TestMain, which is
// much faster when many tests need S3: give each test its own bucket
// (NewBucket) for isolation.
//
// Each gateway gets a fresh data directory and random root credentials. It
// listens on loopback only, and the clients and environment this package
// hands out never reach anything else (no instance metadata, no shared AWS
// config files of the user running the tests).
package s3test
