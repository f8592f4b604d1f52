//go:build duckdb_arrow

package query_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/lakedata/lake/internal/auth"
	"github.com/lakedata/lake/objects/local"
	"github.com/lakedata/lake/roles/meta"
	"github.com/lakedata/lake/roles/query"
)

// logBuffer collects a role's log lines; roles log from several goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// warnings are the WARN lines of a log that contain text.
func warnings(log, text string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, text) {
			out = append(out, l)
		}
	}
	return out
}

const (
	metaOpenWarning  = "anyone who can reach this address can create tables"
	queryOpenWarning = "answers calls without a token"
)

// A meta node without tokens says so at start; a query node that presents
// a token to meta checks once, without it, whether meta lets anyone in and
// says so. Neither warns when the node is closed to strangers.
func TestOpenNodesWarnAtStart(t *testing.T) {
	const token = "open-warning-test-token-0123456789"
	cases := []struct {
		name                 string
		metaTokens           bool // meta requires a token
		queryToken           bool // query presents one to meta
		metaWarns, queryWarn bool
	}{
		{"both open", false, false, true, false},
		{"query with a token, meta open", false, true, true, true},
		{"both with tokens", true, true, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var metaLog, queryLog logBuffer
			newLakeTuned(t, func(_ *local.Store, m *meta.Config, q *query.Config) {
				m.Logger, q.Logger = metaLog.logger(), queryLog.logger()
				if c.metaTokens {
					m.ServerOptions, m.TokensRequired = auth.ServerOptions([]string{token}), true
				}
				if c.queryToken {
					q.MetaDial.Token = token
				}
			})
			if got := warnings(metaLog.String(), metaOpenWarning); (len(got) > 0) != c.metaWarns {
				t.Errorf("meta warned %q, want a warning: %v\nlog:\n%s", got, c.metaWarns, metaLog.String())
			}
			if got := warnings(queryLog.String(), queryOpenWarning); (len(got) > 0) != c.queryWarn {
				t.Errorf("query warned %q, want a warning: %v\nlog:\n%s", got, c.queryWarn, queryLog.String())
			}
			if strings.Contains(metaLog.String()+queryLog.String(), token) {
				t.Error("a log line holds the token")
			}
		})
	}
}
