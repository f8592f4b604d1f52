package server

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDefaultConfigValidates(t *testing.T) {
	for _, role := range []Role{RoleAll, RoleMeta, RoleQuery} {
		cfg := DefaultConfig()
		cfg.Role = role
		if err := cfg.Validate(); err != nil {
			t.Errorf("role %s: %v", role, err)
		}
	}
}

// TestValidateRefuses: each bad combination of flags is refused naming
// the flag, and several at once are all reported.
func TestValidateRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want []string
	}{
		{"unknown role", func(c *Config) { c.Role = "both" }, []string{`--role "both": want all, meta or query`}},
		{"etcd on a query node", func(c *Config) { c.Role, c.Etcd = RoleQuery, []string{"http://127.0.0.1:2379"} },
			[]string{"--etcd and --advertise are for meta nodes"}},
		{"advertise on a query node", func(c *Config) { c.Role, c.Advertise = RoleQuery, "127.0.0.1:50052" },
			[]string{"--etcd and --advertise are for meta nodes"}},
		{"open listener without tokens", func(c *Config) { c.Listen = "0.0.0.0:50051" }, []string{"0.0.0.0:50051 is reachable from other machines"}},
		{"open meta listener without tokens", func(c *Config) { c.MetaListen = "[::]:50052" }, []string{"[::]:50052 is reachable from other machines"}},
		{"open HTTP listener without tokens", func(c *Config) { c.HTTPListen = "0.0.0.0:8080" }, []string{"--http-listen: auth: refusing"}},
		{"malformed listen", func(c *Config) { c.Role, c.Listen = RoleMeta, "nowhere" }, []string{`listen address "nowhere"`}},
		{"query role without meta", func(c *Config) { c.Role, c.Meta = RoleQuery, "" }, []string{"--meta is required for --role=query"}},
		{"bad stage URI", func(c *Config) { c.Stage = "ftp://host/dir" }, []string{`unsupported scheme "ftp"`}},
		{"relative file URI", func(c *Config) { c.Role, c.Stage = RoleMeta, "file://stage" }, []string{"stage: file URI"}},
		{"TLS cert without key", func(c *Config) { c.TLSCert = "cert.pem" }, []string{"--tls-cert and --tls-key go together"}},
		{"etcd without a dialable address", func(c *Config) {
			c.Role, c.Listen, c.Etcd = RoleMeta, "127.0.0.1:0", []string{"http://127.0.0.1:2379"}
		}, []string{"--advertise is required with --etcd"}},
		{"lease of a fraction of a second", func(c *Config) {
			c.Role, c.Etcd, c.SessionTTL = RoleMeta, []string{"http://127.0.0.1:2379"}, 1500*time.Millisecond
		}, []string{"TTL must be a whole number of seconds"}},
		{"query bounds", func(c *Config) { c.RelayBuffer, c.Threads = 0, -1 }, []string{"RelayBuffer must be positive", "Threads must not be negative"}},
		{"compaction bounds", func(c *Config) { c.CompactMinFiles, c.CompactTargetSize = -1, 0 },
			[]string{"--compact-min-files must not be negative", "--compact-target-size must be positive"}},
		{"everything at once", func(c *Config) {
			c.Role, c.Etcd, c.Listen, c.Meta, c.TLSKey = RoleQuery, []string{"http://127.0.0.1:2379"}, "0.0.0.0:1", "", "key.pem"
		}, []string{"--etcd and --advertise", "--tls-cert and --tls-key", "reachable from other machines", "--meta is required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.DataDir = filepath.Join(t.TempDir(), "data")
			tc.edit(&cfg)
			err := cfg.Validate()
			if err == nil {
				t.Fatalf("Validate accepted %+v", cfg)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate: %v\nwant it to contain %q", err, w)
				}
			}
			if got, want := strings.Count(err.Error(), "\n")+1, len(tc.want); got != want {
				t.Errorf("Validate reported %d errors, want %d:\n%v", got, want, err)
			}
		})
	}
}

// TestValidateTokensAllowOpenListen: with a token file, or with
// --insecure-no-auth, any address may be listened on.
func TestValidateTokensAllowOpenListen(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Listen, cfg.MetaListen, cfg.TokenFile = "0.0.0.0:50051", "0.0.0.0:50052", "tokens"
	if err := cfg.Validate(); err != nil {
		t.Error(err)
	}
	cfg.TokenFile, cfg.InsecureNoAuth = "", true
	if err := cfg.Validate(); err != nil {
		t.Error(err)
	}
}
