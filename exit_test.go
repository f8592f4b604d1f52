package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestExitStatus runs lake in-process and checks the exit status of each
// kind of error: 2 for a command called wrongly (whether cobra or lake
// noticed), 1 for a failure, 0 for success. The message keeps its text.
func TestExitStatus(t *testing.T) {
	f := newCLIFixture(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want int
		msg  string // in stderr
	}{
		{"unknown command", []string{"nope"}, 2, `unknown command "nope" for "lake"`},
		{"unknown flag", []string{"sql", "--nope", "SELECT 1"}, 2, "unknown flag: --nope"},
		{"missing argument", []string{"uploads", "cancel"}, 2, "accepts 1 arg(s), received 0"},
		{"extra argument", []string{"uploads", "ls", "extra"}, 2, `unknown command "extra"`},
		{"bad flag value", []string{"serve", "--session-ttl", "soon"}, 2, `invalid argument "soon" for "--session-ttl"`},
		{"bad custom flag value", []string{"serve", "--verify-rate", "lots"}, 2, `"lots" is not a rate`},
		{"missing required flag", []string{"get", "--key", "k", "-o", "x"}, 2, `required flag(s) "table" not set`},
		{"bad log level", []string{"--log-level", "loud", "serve"}, 2, "--log-level"},
		{"lake's own usage check", []string{"sql", "--format", "xml", "SELECT 1"}, 2, `--format "xml"`},
		{"serve: unknown role", []string{"serve", "--role", "both"}, 2, `--role "both"`},
		{"serve: etcd on a query node", []string{"serve", "--role", "query", "--etcd", "http://127.0.0.1:1"}, 2, "--etcd and --advertise are for meta nodes"},
		{"serve: open listener", []string{"serve", "--listen", "0.0.0.0:0", "--data-dir", dir}, 2, "no --token-file is set"},
		{"serve: missing token file", []string{"serve", "--token-file", filepath.Join(dir, "none"), "--data-dir", dir}, 1, "token file"},
		{"failure", []string{"uploads", "cancel", filepath.Join(dir, "never-uploaded"), "--endpoint", f.endpoint}, 1, "never-uploaded"},
		{"success", []string{"uploads", "ls", "--checkpoint-dir", dir}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, &stdout, &stderr)
			if code != tc.want || !strings.Contains(stderr.String(), tc.msg) {
				t.Errorf("lake %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), code, stderr.String(), tc.want, tc.msg)
			}
			if tc.want != 0 && !strings.HasPrefix(stderr.String(), "lake: ") {
				t.Errorf("stderr %q does not start with \"lake: \"", stderr.String())
			}
		})
	}
}
