// Package e2e holds the tests that build the real lake binary once and run
// it as separate processes on loopback ports: crash, restart and
// multi-process behaviour that in-process tests cannot show.
package e2e
