// Package auth owns how lake's Flight services decide who may call them and
// how their traffic is protected: bearer tokens read from a token file, each
// with its scope (read, write or admin, DESIGN §12), gRPC server
// interceptors that check the token and its scope on every Flight method
// and every action (MethodScope, ActionScope from wire's action table), the matching
// per-RPC client credentials, TLS for both sides, the policy that refuses an
// unauthenticated listener on a non-loopback address, and the parsing of
// client endpoints (grpc://, grpc+tcp://, grpc+tls:// or bare host:port).
//
// Tokens are secrets: nothing in this package puts a token, or any part of
// one, into an error, a status message or a log line.
package auth
