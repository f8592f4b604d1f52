package query

import "github.com/lakedata/lake/wire"

// Sentinel errors of the query role. Each is a sentinel of wire's error
// table under the role's name, so a Go caller across the wire gets it back
// with errors.Is.
var (
	// ErrNotReadOnly: the statement is not a single SELECT.
	ErrNotReadOnly = wire.ErrNotReadOnly
	// ErrRelayFull is the answer to an append that would push the frames
	// the relay holds past Config.RelayBuffer: the caller may retry later.
	ErrRelayFull = wire.ErrRelayFull
	// ErrMemoryExhausted: a statement was stopped because the process grew
	// past its memory limit plus the margin.
	ErrMemoryExhausted = wire.ErrMemoryExhausted

	errSQL         = wire.ErrInvalidSQL
	errUnsupported = wire.ErrUnsupported
)

// statusErr turns err into the gRPC status the query service answers
// with: wire's error table, which keeps an existing status (a relayed
// answer of the metadata service, with its details) as it is.
func statusErr(err error) error { return wire.ToStatus(err) }

// readOnly marks err, which says in its own words that lake SQL is
// read-only, as ErrNotReadOnly too.
func readOnly(err error) error { return &marked{err: err, mark: ErrNotReadOnly} }

// marked is err, with its message, that also wraps mark.
type marked struct{ err, mark error }

func (m *marked) Error() string   { return m.err.Error() }
func (m *marked) Unwrap() []error { return []error{m.mark, m.err} }
