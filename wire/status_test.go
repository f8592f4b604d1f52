package wire

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// overTheWire is what a client receives for a status error a server
// returned: the status serialized as gRPC sends it and parsed again.
func overTheWire(t testing.TB, err error) error {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("%v is not a status", err)
	}
	raw, merr := proto.Marshal(st.Proto())
	if merr != nil {
		t.Fatal(merr)
	}
	var p spb.Status
	if err := proto.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	return status.FromProto(&p).Err()
}

func infoOf(err error) *errdetails.ErrorInfo {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}

// Every sentinel of the table, wrapped with context as the services do,
// becomes its code and reason, and comes back as itself and no other.
func TestEverySentinelRoundTrips(t *testing.T) {
	for _, e := range ErrorTable() {
		t.Run(e.Reason, func(t *testing.T) {
			err := fmt.Errorf("meta: append to %q: %w", "clips", e.Err)
			sent := ToStatus(err)
			if got := status.Code(sent); got != e.Code {
				t.Errorf("code %v, want %v", got, e.Code)
			}
			if info := infoOf(sent); info == nil || info.GetReason() != e.Reason || info.GetDomain() != ErrorDomain {
				t.Errorf("ErrorInfo %v, want reason %s, domain %s", info, e.Reason, ErrorDomain)
			}
			got := FromStatus(overTheWire(t, sent))
			if got.Error() != err.Error() {
				t.Errorf("message %q, want the server's %q", got.Error(), err.Error())
			}
			if status.Code(got) != e.Code {
				t.Errorf("received code %v, want %v", status.Code(got), e.Code)
			}
			var se *StatusError
			if !errors.As(got, &se) || se.Reason() != e.Reason || se.Code() != e.Code {
				t.Fatalf("received %T %v, want a *StatusError with reason %s", got, got, e.Reason)
			}
			for _, other := range ErrorTable() {
				if is := errors.Is(got, other.Err); is != (other.Err == e.Err) {
					t.Errorf("errors.Is(received, %s) = %v", other.Reason, is)
				}
			}
			// A relay that decoded the answer passes it on unchanged.
			again := FromStatus(overTheWire(t, ToStatus(got)))
			if !errors.Is(again, e.Err) || status.Code(again) != e.Code || again.Error() != err.Error() {
				t.Errorf("relayed once more: %v (code %v)", again, status.Code(again))
			}
		})
	}
}

func TestToStatusFromStatus(t *testing.T) {
	tableNotFound := ToStatus(fmt.Errorf("%w: %q", ErrTableNotFound, "nope"))
	withInfo := func(code codes.Code, msg string, infos ...*errdetails.ErrorInfo) error {
		st := status.New(code, msg)
		for _, info := range infos {
			var err error
			if st, err = st.WithDetails(info); err != nil {
				t.Fatal(err)
			}
		}
		return st.Err()
	}
	for _, tc := range []struct {
		name       string
		err        error // what the server's code returned
		raw        bool  // err is already the status a server sent
		wantCode   codes.Code
		wantReason string
		wantIs     error // nil: no sentinel
		wantMsg    string
	}{
		{name: "plain sentinel", err: ErrVersionConflict, wantCode: codes.Aborted, wantReason: "VERSION_CONFLICT", wantIs: ErrVersionConflict, wantMsg: ErrVersionConflict.Error()},
		{name: "wrapped twice", err: fmt.Errorf("meta: %w", fmt.Errorf("%w: key %q", ErrInvalidKey, "../x")), wantCode: codes.InvalidArgument, wantReason: "INVALID_KEY", wantIs: ErrInvalidKey, wantMsg: `meta: invalid object key: key "../x"`},
		{name: "closing node that is not the leader", err: fmt.Errorf("%w: %w", ErrNotLeader, fmt.Errorf("meta: %w", ErrClosed)), wantCode: codes.Unavailable, wantReason: "SERVICE_CLOSED", wantIs: ErrClosed, wantMsg: "no metadata leader available: meta: service is closed"},
		{name: "sentinel and context error", err: fmt.Errorf("%w: %w", ErrNotLeader, context.DeadlineExceeded), wantCode: codes.Unavailable, wantReason: "NOT_LEADER", wantIs: ErrNotLeader, wantMsg: "no metadata leader available: context deadline exceeded"},
		{name: "context error", err: fmt.Errorf("statement stopped: %w", context.Canceled), wantCode: codes.Canceled, wantReason: "CANCELED", wantIs: context.Canceled, wantMsg: "statement stopped: context canceled"},
		{name: "unknown error is Internal", err: errors.New("disk on fire"), wantCode: codes.Internal, wantMsg: "disk on fire"},
		{name: "relayed status kept", err: tableNotFound, wantCode: codes.NotFound, wantReason: "TABLE_NOT_FOUND", wantIs: ErrTableNotFound, wantMsg: `table not found: "nope"`},
		{name: "relayed status wrapped", err: fmt.Errorf("relay: %w", tableNotFound), wantCode: codes.NotFound, wantReason: "TABLE_NOT_FOUND", wantIs: ErrTableNotFound, wantMsg: `relay: rpc error: code = NotFound desc = table not found: "nope"`},
		{name: "foreign status kept without reason", err: status.Error(codes.AlreadyExists, "exists"), wantCode: codes.AlreadyExists, wantMsg: "exists"},

		// Statuses a client may receive.
		{name: "connection refused is not ErrNotLeader", raw: true, err: status.Error(codes.Unavailable, "connection error: dial tcp 127.0.0.1:1: connect: connection refused"), wantCode: codes.Unavailable, wantMsg: "connection error: dial tcp 127.0.0.1:1: connect: connection refused"},
		{name: "Unavailable without reason, leader's words", raw: true, err: status.Error(codes.Unavailable, ErrNotLeader.Error()), wantCode: codes.Unavailable, wantMsg: ErrNotLeader.Error()},
		{name: "deadline without reason", raw: true, err: status.Error(codes.DeadlineExceeded, "context deadline exceeded"), wantCode: codes.DeadlineExceeded, wantIs: context.DeadlineExceeded, wantMsg: "context deadline exceeded"},
		{name: "cancel without reason", raw: true, err: status.Error(codes.Canceled, "context canceled"), wantCode: codes.Canceled, wantIs: context.Canceled, wantMsg: "context canceled"},
		{name: "credentials refused without reason", raw: true, err: status.Error(codes.Unauthenticated, "bad token"), wantCode: codes.Unauthenticated, wantIs: ErrUnauthenticated, wantMsg: "bad token"},
		{name: "empty message", raw: true, err: status.Error(codes.NotFound, ""), wantCode: codes.NotFound, wantMsg: "NotFound"},
		{name: "reason of a newer server", raw: true, err: withInfo(codes.NotFound, "gone", &errdetails.ErrorInfo{Reason: "FROM_THE_FUTURE", Domain: ErrorDomain}), wantCode: codes.NotFound, wantReason: "FROM_THE_FUTURE", wantMsg: "gone"},
		{name: "reason of another domain", raw: true, err: withInfo(codes.NotFound, "gone", &errdetails.ErrorInfo{Reason: "TABLE_NOT_FOUND", Domain: "example.com"}), wantCode: codes.NotFound, wantMsg: "gone"},
		{name: "lake's info after another domain's", raw: true, err: withInfo(codes.Aborted, "moved", &errdetails.ErrorInfo{Reason: "X", Domain: "example.com"}, &errdetails.ErrorInfo{Reason: "VERSION_CONFLICT", Domain: ErrorDomain}), wantCode: codes.Aborted, wantReason: "VERSION_CONFLICT", wantIs: ErrVersionConflict, wantMsg: "moved"},
		{name: "reason names a sentinel of another code", raw: true, err: withInfo(codes.Internal, "odd", &errdetails.ErrorInfo{Reason: "TABLE_NOT_FOUND", Domain: ErrorDomain}), wantCode: codes.Internal, wantReason: "TABLE_NOT_FOUND", wantIs: ErrTableNotFound, wantMsg: "odd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent := tc.err
			if !tc.raw {
				sent = ToStatus(tc.err)
			}
			if got := status.Code(sent); got != tc.wantCode {
				t.Errorf("sent code %v, want %v", got, tc.wantCode)
			}
			got := FromStatus(overTheWire(t, sent))
			var se *StatusError
			if !errors.As(got, &se) {
				t.Fatalf("received %T %v, want a *StatusError", got, got)
			}
			if se.Code() != tc.wantCode || status.Code(got) != tc.wantCode {
				t.Errorf("received code %v, want %v", se.Code(), tc.wantCode)
			}
			if se.Reason() != tc.wantReason {
				t.Errorf("reason %q, want %q", se.Reason(), tc.wantReason)
			}
			if got.Error() != tc.wantMsg {
				t.Errorf("message %q, want %q", got.Error(), tc.wantMsg)
			}
			if errors.Unwrap(got) != tc.wantIs {
				t.Errorf("sentinel %v, want %v", errors.Unwrap(got), tc.wantIs)
			}
			if tc.wantIs == nil {
				for _, e := range ErrorTable() {
					if errors.Is(got, e.Err) {
						t.Errorf("errors.Is(received, %s)", e.Reason)
					}
				}
			}
		})
	}
}

func TestToStatusFromStatusEdges(t *testing.T) {
	if ToStatus(nil) != nil || FromStatus(nil) != nil {
		t.Fatal("nil is not nil")
	}
	// An error without a status (the client's own context, say) passes
	// FromStatus unchanged.
	local := fmt.Errorf("dial: %w", context.Canceled)
	if got := FromStatus(local); got != local {
		t.Errorf("FromStatus(%v) = %v, want it unchanged", local, got)
	}
	// FromStatus twice is FromStatus once, also under a wrap.
	once := FromStatus(ToStatus(ErrTableExists))
	if got := FromStatus(once); got != once {
		t.Errorf("FromStatus again gave %v", got)
	}
	wrapped := fmt.Errorf("client: create: %w", once)
	if got := FromStatus(wrapped); got != wrapped || !errors.Is(got, ErrTableExists) {
		t.Errorf("FromStatus of a wrapped *StatusError gave %v", got)
	}
	// A server that relays a decoded answer sends the original status,
	// details and all.
	relayed := ToStatus(fmt.Errorf("relay: %w", once))
	if info := infoOf(relayed); info.GetReason() != "TABLE_EXISTS" || status.Code(relayed) != codes.AlreadyExists {
		t.Errorf("relayed %v with %v", relayed, info)
	}
}

var reasonPattern = regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$`)

// The table is a contract: one row per sentinel, one sentinel per reason,
// every reason stable-looking and every code an error code that says
// something.
func TestErrorTableIsAContract(t *testing.T) {
	table := ErrorTable()
	reasons := map[string]bool{}
	for i, e := range table {
		if e.Err == nil {
			t.Fatalf("row %d (%s) has no sentinel", i, e.Reason)
		}
		if !reasonPattern.MatchString(e.Reason) || len(e.Reason) > 63 {
			t.Errorf("%v: reason %q is not UPPER_SNAKE_CASE of at most 63 characters", e.Err, e.Reason)
		}
		if reasons[e.Reason] {
			t.Errorf("reason %s appears twice", e.Reason)
		}
		reasons[e.Reason] = true
		switch e.Code {
		case codes.OK, codes.Unknown, codes.Internal:
			t.Errorf("%s: code %v", e.Reason, e.Code)
		}
		for j, o := range table {
			if i != j && errors.Is(e.Err, o.Err) {
				t.Errorf("%s and %s: one sentinel wraps the other", e.Reason, o.Reason)
			}
		}
		if sentinel(e.Reason) != e.Err {
			t.Errorf("%s does not look up its own sentinel", e.Reason)
		}
	}
	// The table is a copy.
	table[0].Reason = "CHANGED"
	if ErrorTable()[0].Reason == "CHANGED" {
		t.Error("ErrorTable hands out the table itself")
	}
	// Every sentinel of this package has a row.
	for _, err := range []error{
		ErrMalformedCommand, ErrUnknownCommand, ErrInvalidTable, ErrInvalidCommitID, ErrInvalidKey,
		ErrInvalidFileValue, ErrSchemaMismatch, ErrInvalidSchema, ErrEmptyAppend, ErrInvalidRequest,
		ErrNotReadOnly, ErrSQLNotAllowed, ErrInvalidSQL, ErrUnsupported, ErrTableNotFound,
		ErrVersionNotFound, ErrTableExists, ErrObjectMissing, ErrSizeMismatch, ErrNotRegular,
		ErrVersionExpired, ErrVersionConflict, ErrNotLeader, ErrClosed, ErrResourceExhausted,
		ErrRelayFull, ErrMemoryExhausted, ErrUnauthenticated, ErrPermissionDenied,
		context.Canceled, context.DeadlineExceeded,
	} {
		found := false
		for _, e := range table {
			found = found || e.Err == err
		}
		if !found {
			t.Errorf("%v has no row in the error table", err)
		}
	}
}

// fuzzStatuses builds, from b, the statuses a hostile or broken server
// could send: b as a whole detail (a google.protobuf.Any), and b as the
// value of an Any that claims to be an ErrorInfo.
func fuzzStatuses(b []byte) []*spb.Status {
	var out []*spb.Status
	var a anypb.Any
	if proto.Unmarshal(b, &a) == nil {
		out = append(out, &spb.Status{Code: int32(codes.Unavailable), Message: "m", Details: []*anypb.Any{&a}})
	}
	for _, url := range []string{"type.googleapis.com/google.rpc.ErrorInfo", "google.rpc.ErrorInfo"} {
		for _, code := range []codes.Code{codes.Unavailable, codes.DeadlineExceeded, codes.NotFound} {
			out = append(out, &spb.Status{Code: int32(code), Message: "m", Details: []*anypb.Any{{TypeUrl: url, Value: b}}})
		}
	}
	return out
}

// FuzzFromStatus feeds FromStatus details it did not make: it must not
// panic, must keep the code and message, and may name a sentinel only
// when a detail really is a lake ErrorInfo with that sentinel's reason.
func FuzzFromStatus(f *testing.F) {
	f.Add(mustMarshal(f, &errdetails.ErrorInfo{Reason: "NOT_LEADER", Domain: ErrorDomain}))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, p := range fuzzStatuses(b) {
			got := FromStatus(status.FromProto(p).Err())
			var se *StatusError
			if !errors.As(got, &se) {
				t.Fatalf("FromStatus gave %T %v", got, got)
			}
			if se.Code() != codes.Code(p.GetCode()) || se.Error() != p.GetMessage() {
				t.Fatalf("code %v message %q, sent %v %q", se.Code(), se.Error(), p.GetCode(), p.GetMessage())
			}
			// What a reason must rest on: a detail that decodes as a lake
			// ErrorInfo with exactly this reason.
			var backed bool
			for _, a := range p.GetDetails() {
				var info errdetails.ErrorInfo
				if a.MessageName() == errorInfoName && proto.Unmarshal(a.GetValue(), &info) == nil &&
					info.GetDomain() == ErrorDomain && info.GetReason() == se.Reason() {
					backed = true
				}
			}
			switch want := byCodeAlone[se.Code()]; {
			case se.Reason() == "":
				if errors.Unwrap(got) != want {
					t.Fatalf("no reason, yet sentinel %v (code %v)", errors.Unwrap(got), se.Code())
				}
			case !backed:
				t.Fatalf("reason %q that no detail holds", se.Reason())
			case sentinel(se.Reason()) != nil && errors.Unwrap(got) != sentinel(se.Reason()):
				t.Fatalf("reason %q but sentinel %v", se.Reason(), errors.Unwrap(got))
			case sentinel(se.Reason()) == nil && errors.Unwrap(got) != want:
				t.Fatalf("unknown reason %q, yet sentinel %v", se.Reason(), errors.Unwrap(got))
			}
			// A relay passes it on with the same code and reason.
			again := FromStatus(ToStatus(got)).(*StatusError)
			if again.Code() != se.Code() || again.Reason() != se.Reason() {
				t.Fatalf("relayed: %v %q, was %v %q", again.Code(), again.Reason(), se.Code(), se.Reason())
			}
		}
	})
}

// TestStatusSeedCorpus writes the seeds of FuzzFromStatus with
// -update-corpus (see TestSeedCorpus).
func TestStatusSeedCorpus(t *testing.T) {
	if !*updateCorpus {
		t.Skip("run with -update-corpus to rewrite testdata/fuzz")
	}
	info := func(reason, domain string) []byte {
		return mustMarshal(t, &errdetails.ErrorInfo{Reason: reason, Domain: domain})
	}
	anyOf := func(url string, value []byte) []byte {
		return mustMarshal(t, &anypb.Any{TypeUrl: url, Value: value})
	}
	const url = "type.googleapis.com/google.rpc.ErrorInfo"
	withMetadata := mustMarshal(t, &errdetails.ErrorInfo{Reason: "TABLE_NOT_FOUND", Domain: ErrorDomain, Metadata: map[string]string{"table": "clips"}})
	writeBytes(t, "FuzzFromStatus", map[string][]byte{
		"info_not_leader":          info("NOT_LEADER", ErrorDomain),
		"info_other_domain":        info("NOT_LEADER", "example.com"),
		"info_unknown_reason":      info("FROM_THE_FUTURE", ErrorDomain),
		"info_empty_reason":        info("", ErrorDomain),
		"info_with_metadata":       withMetadata,
		"info_truncated":           withMetadata[:len(withMetadata)-3],
		"any_info":                 anyOf(url, info("VERSION_CONFLICT", ErrorDomain)),
		"any_info_custom_host":     anyOf("example.com/x/google.rpc.ErrorInfo", info("RELAY_FULL", ErrorDomain)),
		"any_info_bare_name":       anyOf("google.rpc.ErrorInfo", info("SCHEMA_MISMATCH", ErrorDomain)),
		"any_other_type":           anyOf("type.googleapis.com/google.rpc.RetryInfo", info("NOT_LEADER", ErrorDomain)),
		"any_info_garbage":         anyOf(url, []byte("\xff\xfe\x00 not protobuf")),
		"any_info_wrong_wire_type": anyOf(url, []byte{0x0d, 1, 2, 3, 4}), // field 1 as fixed32
		"garbage":                  []byte("\xff\xfe\x00 not protobuf"),
		"empty":                    {},
	})
}
