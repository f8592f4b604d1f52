package auth_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/lakedata/lake/internal/auth"
	"github.com/lakedata/lake/internal/auth/authtest"
)

// tlsServer serves everyMethod over TLS with one token and returns its
// address, the CA file that trusts it and the token.
func tlsServer(t *testing.T) (addr, caFile, token string) {
	t.Helper()
	cert, key := authtest.SelfSigned(t)
	tlsOpt, err := auth.ServerTLS(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	token = authtest.Token(t)
	return serve(t, append([]grpc.ServerOption{tlsOpt}, auth.ServerOptions([]string{token})...)...), cert, token
}

func clientTLS(t *testing.T, caFile string) credentials.TransportCredentials {
	t.Helper()
	creds, err := auth.ClientTLS(caFile)
	if err != nil {
		t.Fatal(err)
	}
	return creds
}

func shortCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestTLSWithToken(t *testing.T) {
	addr, ca, tok := tlsServer(t)
	// Both the IP and the name in the certificate verify.
	for _, a := range []string{addr, strings.Replace(addr, "127.0.0.1", "localhost", 1)} {
		fc := client(t, a, grpc.WithTransportCredentials(clientTLS(t, ca)), grpc.WithPerRPCCredentials(auth.TokenCredentials(tok, true)))
		for m, c := range calls {
			if err := c.do(shortCtx(t), fc); status.Code(err) != c.wantOK {
				t.Errorf("%s over TLS to %s: %v", m, a, err)
			}
		}
	}
	// TLS does not replace the token.
	fc := client(t, addr, grpc.WithTransportCredentials(clientTLS(t, ca)))
	if err := calls["DoAction"].do(shortCtx(t), fc); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("TLS without token: %v, want Unauthenticated", err)
	}
}

func TestPlaintextClientAgainstTLSServerFails(t *testing.T) {
	addr, _, tok := tlsServer(t)
	fc := client(t, addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(auth.TokenCredentials(tok, false)))
	if err := calls["DoAction"].do(shortCtx(t), fc); err == nil {
		t.Fatal("a plaintext client talked to a TLS server")
	}
}

func TestTLSClientWithoutTheRightCAFails(t *testing.T) {
	addr, _, tok := tlsServer(t)
	otherCA, _ := authtest.SelfSigned(t)
	for name, ca := range map[string]string{"system roots": "", "another CA": otherCA} {
		fc := client(t, addr, grpc.WithTransportCredentials(clientTLS(t, ca)), grpc.WithPerRPCCredentials(auth.TokenCredentials(tok, true)))
		err := calls["DoAction"].do(shortCtx(t), fc)
		if code := status.Code(err); code != codes.Unavailable {
			t.Errorf("%s: %v, want Unavailable (certificate not trusted)", name, err)
		}
	}
}

func TestTLSFileErrors(t *testing.T) {
	cert, key := authtest.SelfSigned(t)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.ServerTLS(cert, filepath.Join(dir, "missing.pem")); err == nil {
		t.Error("ServerTLS with a missing key succeeded")
	}
	if _, err := auth.ServerTLS(garbage, key); err == nil {
		t.Error("ServerTLS with a garbage certificate succeeded")
	}
	if _, err := auth.ServerTLS(key, cert); err == nil {
		t.Error("ServerTLS with swapped files succeeded")
	}
	if _, err := auth.ClientTLS(filepath.Join(dir, "missing.pem")); err == nil {
		t.Error("ClientTLS with a missing CA file succeeded")
	}
	if _, err := auth.ClientTLS(garbage); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("ClientTLS with garbage: %v", err)
	}
}
