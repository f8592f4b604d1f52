package console

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"path"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/protobuf/proto"

	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/local"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// fakeLake stands in for the query role: a local stage holding objects,
// one table "clips" whose rows name them, a metadata service that answers
// lake.table.url only for those keys, and an SQL runner that records what
// it was asked to run.
type fakeLake struct {
	stage objects.Store
	dir   string
	files []wire.FileValue

	mu      sync.Mutex
	queries []string
	actions []string
	sqlErr  error
	// presign answers lake.table.url with an https URL, as an S3 stage
	// does, instead of the object's file:// URL.
	presign bool
}

func newFakeLake(t *testing.T, objs map[string][]byte) *fakeLake {
	t.Helper()
	dir := t.TempDir()
	st, err := local.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	l := &fakeLake{stage: st, dir: dir}
	for name, data := range objs {
		sum := sha256.Sum256(data)
		key := "objects/" + hex.EncodeToString(sum[:]) + "/" + name
		if err := st.PutIfAbsent(context.Background(), key, data); err != nil {
			t.Fatal(err)
		}
		l.files = append(l.files, wire.FileValue{Key: key, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), UploadedAt: time.Now()})
	}
	return l
}

// keyOf is the key of the object put under name.
func (l *fakeLake) keyOf(name string) string {
	for _, f := range l.files {
		if path.Base(f.Key) == name {
			return f.Key
		}
	}
	panic("no object " + name)
}

func (l *fakeLake) sql(ctx context.Context, q string) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	l.mu.Lock()
	l.queries = append(l.queries, q)
	err := l.sqlErr
	l.mu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, len(l.files))
	for i, f := range l.files {
		names[i] = path.Base(f.Key)
	}
	rec := wiretest.FileRows(names, l.files)
	ch := make(chan flight.StreamChunk, 1)
	ch <- flight.StreamChunk{Data: rec}
	close(ch)
	return rec.Schema(), ch, nil
}

func (l *fakeLake) Action(_ context.Context, name string, req, resp proto.Message) error {
	l.mu.Lock()
	l.actions = append(l.actions, name)
	l.mu.Unlock()
	info := &lakepb.TableInfo{Name: "clips", Version: 2, Rows: int64(len(l.files)), DataFiles: 1, Schema: wire.EncodeSchema(wire.DefaultSchema())}
	switch name {
	case wire.ActionListTables:
		proto.Merge(resp, &lakepb.TableList{Tables: []*lakepb.TableInfo{info}})
	case wire.ActionDescribeTable:
		if req.(*lakepb.DescribeTableRequest).GetName() != "clips" {
			return wire.ToStatus(fmt.Errorf("%w: no such table", wire.ErrTableNotFound))
		}
		proto.Merge(resp, info)
	case wire.ActionHistory:
		now := time.Now().UnixMicro()
		proto.Merge(resp, &lakepb.History{Name: "clips", Versions: []*lakepb.VersionInfo{
			{Version: 2, Kind: "append", Rows: int64(len(l.files)) - 1, CommittedAtUnixMicros: now},
			{Version: 1, Kind: "append", Rows: 1, CommittedAtUnixMicros: now - 1e6},
			{Version: 0, Kind: "create", CommittedAtUnixMicros: now - 2e6},
		}})
	case wire.ActionURL:
		r := req.(*lakepb.ObjectUrlRequest)
		for _, f := range l.files {
			if f.Key == r.GetKey() && r.GetTable() == "clips" {
				u := url.URL{Scheme: "file", Path: path.Join(l.dir, f.Key)}
				if l.presign {
					u = url.URL{Scheme: "https", Host: "stage.example", Path: "/" + f.Key, RawQuery: "X-Amz-Signature=abc"}
				}
				proto.Merge(resp, &lakepb.ObjectUrl{Url: u.String(), File: &lakepb.UploadedFile{
					Key: f.Key, Size: f.Size, Sha256: f.SHA256, ContentType: f.ContentType, UploadedAtUnixMicros: f.UploadedAt.UnixMicro(),
				}})
				return nil
			}
		}
		return wire.ToStatus(fmt.Errorf("%w: table %q, key %s", wire.ErrRowNotFound, r.GetTable(), r.GetKey()))
	default:
		return wire.ToStatus(fmt.Errorf("%w: %s", wire.ErrUnknownCommand, name))
	}
	return nil
}

func (l *fakeLake) ranQueries() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.queries...)
}
