package auth

import (
	"context"
	"fmt"

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

// verifier checks the bearer token of each call against the role's
// tokens.
type verifier struct{ tokens *TokenSet }

func newVerifier(tokens []Token) *verifier { return &verifier{tokens: NewTokenSet(tokens)} }

// check authenticates the call in ctx.
func (v *verifier) check(ctx context.Context) (wire.Scope, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	return v.tokens.Bearer(md.Get(Header))
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
