package errtest

import (
	"errors"
	"testing"

	"google.golang.org/grpc/status"

	"github.com/lakedata/lake/wire"
)

// Entry is the row of wire's error table for sentinel; the test fails at
// once when there is none.
func Entry(t testing.TB, sentinel error) wire.ErrorEntry {
	t.Helper()
	for _, e := range wire.ErrorTable() {
		if e.Err == sentinel {
			return e
		}
	}
	t.Fatalf("%v has no row in wire's error table", sentinel)
	return wire.ErrorEntry{}
}

// Check fails the test unless err, as a Go caller holds it after
// wire.FromStatus, is errors.Is e.Err and no other sentinel of the table,
// has e's code, and its status carries e's reason.
func Check(t testing.TB, what string, err error, e wire.ErrorEntry) {
	t.Helper()
	got := wire.FromStatus(err)
	var se *wire.StatusError
	switch {
	case err == nil:
		t.Errorf("%s: no error, want %s", what, e.Reason)
		return
	case !errors.Is(got, e.Err):
		t.Errorf("%s: %v (code %v), want errors.Is %v", what, err, status.Code(err), e.Err)
	case status.Code(got) != e.Code:
		t.Errorf("%s: code %v, want %v: %v", what, status.Code(got), e.Code, err)
	case !errors.As(got, &se) || se.Reason() != e.Reason:
		t.Errorf("%s: reason %q, want %s: %v", what, reasonOf(se), e.Reason, err)
	}
	for _, o := range wire.ErrorTable() {
		if o.Err != e.Err && errors.Is(got, o.Err) {
			t.Errorf("%s: also errors.Is %s: %v", what, o.Reason, err)
		}
	}
}

func reasonOf(se *wire.StatusError) string {
	if se == nil {
		return "(no status)"
	}
	return se.Reason()
}
