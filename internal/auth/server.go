package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"strings"

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

// ServerOptions returns the gRPC server options that make every RPC on the
// server carry "authorization: Bearer <token>" with one of tokens. The
// check runs in unary and stream interceptors, that is before any handler,
// so it covers all ten Flight methods (Handshake and DoGet included) and
// every other service registered on the same server (health, reflection).
// A call without a valid token ends with status Unauthenticated and a
// message that never contains what the caller presented.
//
// With no tokens it returns nil: the server is open, and CheckListen decides
// whether that is allowed. The options chain, so they compose with other
// interceptors given to grpc.NewServer.
func ServerOptions(tokens []string) []grpc.ServerOption {
	if len(tokens) == 0 {
		return nil
	}
	v := newVerifier(tokens)
	unary := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := v.check(ctx); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := v.check(ss.Context()); err != nil {
			return err
		}
		return handler(srv, ss)
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(unary),
		grpc.ChainStreamInterceptor(stream),
	}
}

// verifier holds the SHA-256 of each accepted token. Comparing digests
// instead of the tokens keeps the comparison length-independent, so timing
// reveals neither a token's bytes nor its length.
type verifier struct {
	digests [][sha256.Size]byte
}

func newVerifier(tokens []string) *verifier {
	v := &verifier{digests: make([][sha256.Size]byte, len(tokens))}
	for i, t := range tokens {
		v.digests[i] = sha256.Sum256([]byte(t))
	}
	return v
}

// check authenticates the call in ctx. Every rejection reason is its own
// message so an operator can tell a missing header from a wrong token, but
// none quotes the presented value.
func (v *verifier) check(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(Header)
	switch {
	case len(vals) == 0:
		return unauthenticated(`missing "authorization: Bearer <token>" metadata`)
	case len(vals) > 1:
		// Two headers make it ambiguous which one a proxy or a log saw.
		return unauthenticated("more than one authorization value")
	}
	scheme, tok, ok := strings.Cut(vals[0], " ")
	// Auth schemes are case-insensitive (RFC 9110 §11.1).
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return unauthenticated("the authorization scheme must be Bearer")
	}
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return unauthenticated("empty bearer token")
	}
	if !v.match(tok) {
		return unauthenticated("invalid bearer token")
	}
	return nil
}

// match compares tok with every accepted token, without an early exit, so
// the time taken does not tell which token (if any) matched.
func (v *verifier) match(tok string) bool {
	d := sha256.Sum256([]byte(tok))
	found := 0
	for i := range v.digests {
		found |= subtle.ConstantTimeCompare(d[:], v.digests[i][:])
	}
	return found == 1
}

// authError is both an ErrUnauthenticated for Go callers and a gRPC status
// for the wire.
type authError struct{ msg string }

func unauthenticated(msg string) error { return &authError{msg: msg} }

func (e *authError) Error() string { return ErrUnauthenticated.Error() + ": " + e.msg }

func (e *authError) Unwrap() error { return ErrUnauthenticated }

// GRPCStatus makes the gRPC server send code Unauthenticated, with
// wire's reason UNAUTHENTICATED.
func (e *authError) GRPCStatus() *status.Status {
	return status.Convert(wire.ToStatus(fmt.Errorf("%w: %s", ErrUnauthenticated, e.msg)))
}
