package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"strings"

	flightgen "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/lakedata/lake/wire"
)

// ErrUnauthenticated is wrapped by every error the server interceptors
// return, for Go code on the server side (a logging interceptor placed
// before them, say). Over the wire the caller sees gRPC status
// Unauthenticated with reason UNAUTHENTICATED (wire.ErrUnauthenticated).
var ErrUnauthenticated = fmt.Errorf("auth: %w", wire.ErrUnauthenticated)

// Header is the gRPC metadata key that carries the bearer token.
const Header = "authorization"

// ErrPermissionDenied is wrapped by the interceptors' refusal of a call
// that the caller's token, though valid, does not allow. Over the wire the
// caller sees gRPC status PermissionDenied with reason PERMISSION_DENIED
// (wire.ErrPermissionDenied).
var ErrPermissionDenied = fmt.Errorf("auth: %w", wire.ErrPermissionDenied)

// ServerOptions is ScopedServerOptions with every token an admin token.
func ServerOptions(tokens []string) []grpc.ServerOption {
	return ScopedServerOptions(AdminTokens(tokens))
}

// ScopedServerOptions returns the gRPC server options that make every RPC
// on the server carry "authorization: Bearer <token>" with one of tokens,
// and allow it only if that token's scope does (MethodScope, and for
// DoAction ActionScope). The checks run in unary and stream interceptors,
// that is before any handler, so they cover all ten Flight methods
// (Handshake and DoGet included) and every other service registered on
// the same server, which needs admin. A call without a valid token ends
// with status Unauthenticated, one outside its scope with
// PermissionDenied before the handler has done anything; neither message
// contains what the caller presented.
//
// DoAction's action type is in its request, which a stream interceptor
// sees only as the handler reads it: the check runs there, when the
// handler receives the request and before it can act on it.
//
// With no tokens it returns nil: the server is open, and CheckListen decides
// whether that is allowed. The options chain, so they compose with other
// interceptors given to grpc.NewServer.
func ScopedServerOptions(tokens []Token) []grpc.ServerOption {
	if len(tokens) == 0 {
		return nil
	}
	v := newVerifier(tokens)
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		have, err := v.check(ctx)
		if err != nil {
			return nil, err
		}
		if err := allow(have, MethodScope(info.FullMethod), info.FullMethod); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		have, err := v.check(ss.Context())
		if err != nil {
			return err
		}
		if err := allow(have, MethodScope(info.FullMethod), info.FullMethod); err != nil {
			return err
		}
		if info.FullMethod == methodDoAction {
			ss = &actionStream{ServerStream: ss, have: have}
		}
		return handler(srv, ss)
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(unary),
		grpc.ChainStreamInterceptor(stream),
	}
}

// actionStream checks the scope of the action a DoAction call names as
// the handler receives it.
type actionStream struct {
	grpc.ServerStream
	have    wire.Scope
	checked bool
}

func (s *actionStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if s.checked {
		return nil
	}
	s.checked = true
	a, ok := m.(*flightgen.Action)
	if !ok {
		// Not a Flight request: refuse rather than let it pass unchecked.
		return permissionDenied(fmt.Sprintf("a %s token may not call %s with a %T", s.have, methodDoAction, m))
	}
	need, known := ActionScope(a.GetType())
	if !known {
		// Not a scope question: the handler refuses an unknown action.
		return nil
	}
	return allow(s.have, need, a.GetType())
}

// allow refuses a call that needs more than have; what names the method
// or action, which is the server's vocabulary, not the caller's secret.
func allow(have, need wire.Scope, what string) error {
	if have.Allows(need) {
		return nil
	}
	return permissionDenied(fmt.Sprintf("a %s token may not call %s, which needs the %s scope", have, what, need))
}

// verifier holds the SHA-256 of each accepted token and its scope.
// Comparing digests instead of the tokens keeps the comparison
// length-independent, so timing reveals neither a token's bytes nor its
// length.
type verifier struct {
	digests [][sha256.Size]byte
	scopes  []wire.Scope
}

func newVerifier(tokens []Token) *verifier {
	v := &verifier{digests: make([][sha256.Size]byte, len(tokens)), scopes: make([]wire.Scope, len(tokens))}
	for i, t := range tokens {
		v.digests[i] = sha256.Sum256([]byte(t.Value))
		v.scopes[i] = t.Scope
	}
	return v
}

// check authenticates the call in ctx. Every rejection reason is its own
// message so an operator can tell a missing header from a wrong token, but
// none quotes the presented value.
func (v *verifier) check(ctx context.Context) (wire.Scope, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(Header)
	switch {
	case len(vals) == 0:
		return 0, unauthenticated(`missing "authorization: Bearer <token>" metadata`)
	case len(vals) > 1:
		// Two headers make it ambiguous which one a proxy or a log saw.
		return 0, unauthenticated("more than one authorization value")
	}
	scheme, tok, ok := strings.Cut(vals[0], " ")
	// Auth schemes are case-insensitive (RFC 9110 §11.1).
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return 0, unauthenticated("the authorization scheme must be Bearer")
	}
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return 0, unauthenticated("empty bearer token")
	}
	scope, ok := v.match(tok)
	if !ok {
		return 0, unauthenticated("invalid bearer token")
	}
	return scope, nil
}

// match compares tok with every accepted token, without an early exit, so
// the time taken does not tell which token (if any) matched, and returns
// the matching token's scope.
func (v *verifier) match(tok string) (wire.Scope, bool) {
	d := sha256.Sum256([]byte(tok))
	found, scope := 0, 0
	for i := range v.digests {
		eq := subtle.ConstantTimeCompare(d[:], v.digests[i][:])
		found |= eq
		scope = subtle.ConstantTimeSelect(eq, int(v.scopes[i]), scope)
	}
	return wire.Scope(scope), found == 1
}

// authError is both an ErrUnauthenticated or ErrPermissionDenied for Go
// callers and a gRPC status for the wire.
type authError struct {
	sentinel error
	msg      string
}

func unauthenticated(msg string) error { return &authError{sentinel: ErrUnauthenticated, msg: msg} }

func permissionDenied(msg string) error {
	return &authError{sentinel: ErrPermissionDenied, msg: msg}
}

func (e *authError) Error() string { return e.sentinel.Error() + ": " + e.msg }

func (e *authError) Unwrap() error { return e.sentinel }

// GRPCStatus makes the gRPC server send code Unauthenticated or
// PermissionDenied, with wire's reason UNAUTHENTICATED or
// PERMISSION_DENIED.
func (e *authError) GRPCStatus() *status.Status {
	return status.Convert(wire.ToStatus(fmt.Errorf("%w: %s", e.sentinel, e.msg)))
}
