package auth

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// TokenCredentials returns per-RPC credentials that send
// "authorization: Bearer <token>" on every call. With requireTLS, gRPC
// refuses to use them on a connection without transport security, so the
// token cannot leak in clear text; without it, plaintext is allowed (a
// service on loopback).
func TokenCredentials(token string, requireTLS bool) credentials.PerRPCCredentials {
	return tokenCreds{token: token, requireTLS: requireTLS}
}

type tokenCreds struct {
	token      string
	requireTLS bool
}

func (c tokenCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	// A token that is not a valid header value would be rejected by the
	// transport with a message quoting it; fail here without quoting.
	if c.token == "" || !printable(c.token) {
		return nil, status.Error(codes.Unauthenticated, "auth: the client token is empty or not printable ASCII")
	}
	return map[string]string{Header: "Bearer " + c.token}, nil
}

func (c tokenCreds) RequireTransportSecurity() bool { return c.requireTLS }
