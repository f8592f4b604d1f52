package meta

import (
	"context"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

func (f *fixture) url(table, key string, expires *time.Duration) (*lakepb.ObjectUrl, error) {
	req := &lakepb.ObjectUrlRequest{Table: table, Key: key}
	if expires != nil {
		us := expires.Microseconds()
		req.ExpiresMicros = &us
	}
	var res lakepb.ObjectUrl
	err := flightrpc.Action(context.Background(), f.fc, wire.ActionURL, req, &res)
	return &res, wire.FromStatus(err)
}

// On a local stage lake.table.url answers the object's file:// URL, for
// a key that a row of the current version has and for no other; the
// expiry is checked against URLMaxExpiry whatever the stage.
func TestURLLocalStage(t *testing.T) {
	f := &fixture{t: t, tune: func(c *Config) { c.URLMaxExpiry = time.Hour }}
	base := newFixture(t) // for its stage
	base.stop()
	f.stage, f.dataDir = base.stage, t.TempDir()
	f.start()
	t.Cleanup(f.stop)
	f.createTable("clips")
	if _, err := f.appendOne("clips", "a.mp4", "c1"); err != nil {
		t.Fatal(err)
	}
	key := f.snapshotKey("clips")

	res, err := f.url("clips", key, nil)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(res.GetUrl())
	if err != nil || u.Scheme != "file" || res.GetExpiresAtUnixMicros() != 0 {
		t.Fatalf("answer %v, want a file:// URL that does not expire", res)
	}
	if got, err := os.ReadFile(u.Path); err != nil || string(got) != "content of a.mp4" {
		t.Fatalf("the URL reads %q, %v", got, err)
	}

	for _, d := range []time.Duration{0, time.Millisecond, time.Hour + time.Second, 8 * 24 * time.Hour} {
		_, err := f.url("clips", key, &d)
		if !errors.Is(err, wire.ErrInvalidRequest) || status.Code(err) != codes.InvalidArgument {
			t.Errorf("expiry %v with a 1h limit: %v, want InvalidArgument", d, err)
		}
	}
	limit := time.Hour
	if _, err := f.url("clips", key, &limit); err != nil {
		t.Errorf("expiry at the limit: %v", err)
	}
	if _, err := f.url("clips", "objects/2026/12/01/none.bin", nil); !errors.Is(err, wire.ErrRowNotFound) || status.Code(err) != codes.NotFound {
		t.Errorf("a key no row has: %v, want NotFound", err)
	}
	if _, err := f.url("nope", key, nil); !errors.Is(err, wire.ErrTableNotFound) {
		t.Errorf("an unknown table: %v", err)
	}
	if _, err := f.url("clips", "../etc/passwd", nil); !errors.Is(err, wire.ErrInvalidKey) {
		t.Errorf("a bad key: %v", err)
	}
	// After the row is deleted the object has no row: no URL, though the
	// object stays in the stage.
	if _, err := f.svc.Delete(context.Background(), &lakepb.DeleteRequest{Table: "clips", Keys: []string{key}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.url("clips", key, nil); !errors.Is(err, wire.ErrRowNotFound) {
		t.Errorf("a deleted row's key: %v, want ErrRowNotFound", err)
	}
}

func TestURLMaxExpiryValidated(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil && strings.Contains(err.Error(), "URLMaxExpiry") {
		t.Fatalf("the default refused: %v", err)
	}
	for _, d := range []time.Duration{0, time.Millisecond, DefaultURLMaxExpiry + time.Second} {
		c := DefaultConfig()
		c.URLMaxExpiry = d
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "URLMaxExpiry") {
			t.Errorf("URLMaxExpiry %v: %v", d, err)
		}
	}
}
