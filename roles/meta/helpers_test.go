package meta

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"google.golang.org/grpc"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/internal/wiretest"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/local"
	"github.com/lakedata/lake/roles/meta/cluster"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// fixture is a metadata service on a local stage, served over loopback.
type fixture struct {
	t       testing.TB
	dataDir string
	stage   *local.Store
	wrap    func(objects.Store) objects.Store // what the service sees
	svc     *Service
	fc      flight.Client

	// etcd, when set, makes the node a cluster member listening on listen.
	etcd   string
	listen string

	opts []grpc.ServerOption // extra server options (interceptors)
	tune func(*Config)       // changes to the default config, when set
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	return newFixtureWith(t, nil)
}

// newFixtureWith lets the service see the stage through wrap.
func newFixtureWith(t testing.TB, wrap func(objects.Store) objects.Store) *fixture {
	t.Helper()
	root := t.TempDir()
	stage, err := local.Open(filepath.Join(root, "stage"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stage.Close() })
	f := &fixture{t: t, dataDir: filepath.Join(root, "data"), stage: stage, wrap: wrap}
	f.start()
	t.Cleanup(f.stop)
	return f
}

func (f *fixture) config() Config {
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = f.dataDir
	cfg.Stage = f.stage
	if f.wrap != nil {
		cfg.Stage = f.wrap(f.stage)
	}
	cfg.StageURI = "file://" + f.stage.Dir()
	cfg.ServerOptions = f.opts
	if f.tune != nil {
		f.tune(&cfg)
	}
	if f.etcd != "" {
		cfg.Listen = f.listen
		ec := cluster.DefaultEtcdConfig()
		ec.Endpoints, ec.Advertise, ec.TTL = []string{f.etcd}, f.listen, 2*time.Second
		coord, err := cluster.NewEtcd(ec)
		if err != nil {
			f.t.Fatal(err)
		}
		cfg.Cluster = coord
	}
	return cfg
}

func (f *fixture) start() {
	f.t.Helper()
	svc, err := Open(context.Background(), f.config())
	if err != nil {
		f.t.Fatal(err)
	}
	fc, err := flightrpc.Dial(svc.Addr().String())
	if err != nil {
		f.t.Fatal(err)
	}
	f.svc, f.fc = svc, fc
}

func (f *fixture) stop() {
	if f.svc == nil {
		return
	}
	f.fc.Close()
	if err := f.svc.Close(context.Background()); err != nil {
		f.t.Errorf("close: %v", err)
	}
	f.svc, f.fc = nil, nil
}

func (f *fixture) restart() {
	f.t.Helper()
	f.stop()
	f.start()
}

func (f *fixture) createTable(name string) *lakepb.TableInfo {
	f.t.Helper()
	var info lakepb.TableInfo
	req := &lakepb.CreateTableRequest{Name: name, Schema: wire.EncodeSchema(wire.DefaultSchema())}
	if err := flightrpc.Action(context.Background(), f.fc, wire.ActionCreateTable, req, &info); err != nil {
		f.t.Fatalf("create %s: %v", name, err)
	}
	return &info
}

// putObject stores content under a fresh object key and returns its FILE value.
func (f *fixture) putObject(name string, content []byte) wire.FileValue {
	f.t.Helper()
	key := objects.NewObjectKey(name, time.Now())
	info, err := f.stage.Put(context.Background(), key, bytes.NewReader(content), objects.PutOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	return wire.FileValue{Key: key, Size: info.Size, SHA256: hex.EncodeToString(sum[:]), UploadedAt: info.ModTime}
}

func (f *fixture) append(table, commitID string, rec arrow.RecordBatch) (*lakepb.AppendResult, error) {
	cmd := &lakepb.Append{Table: table, CommitId: commitID}
	return flightrpc.Append(context.Background(), f.fc, cmd, rec.Schema(), []arrow.RecordBatch{rec})
}

// appendOne uploads an object and appends a one-row record for it.
func (f *fixture) appendOne(table, name, commitID string) (*lakepb.AppendResult, error) {
	v := f.putObject(name, []byte("content of "+name))
	rec := wiretest.FileRows([]string{name}, []wire.FileValue{v})
	defer rec.Release()
	return f.append(table, commitID, rec)
}

func (f *fixture) snapshot(table string, version *int64) *lakepb.Snapshot {
	f.t.Helper()
	var snap lakepb.Snapshot
	if err := flightrpc.Action(context.Background(), f.fc, wire.ActionSnapshot, &lakepb.SnapshotRequest{Name: table, Version: version}, &snap); err != nil {
		f.t.Fatalf("snapshot %s: %v", table, err)
	}
	return &snap
}

// readNames reads the Parquet files of a snapshot straight from the stage
// and returns the name column, in file order.
func (f *fixture) readNames(snap *lakepb.Snapshot) []string {
	f.t.Helper()
	var names []string
	for _, df := range snap.Files {
		path := filepath.Join(f.stage.Dir(), filepath.FromSlash(df.Key))
		raw, err := os.ReadFile(path)
		if err != nil {
			f.t.Fatal(err)
		}
		rdr, err := file.NewParquetReader(bytes.NewReader(raw))
		if err != nil {
			f.t.Fatalf("%s: %v", df.Key, err)
		}
		fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		if err != nil {
			f.t.Fatal(err)
		}
		tbl, err := fr.ReadTable(context.Background())
		if err != nil {
			f.t.Fatal(err)
		}
		if tbl.NumRows() != df.Rows {
			f.t.Errorf("%s: %d rows, the log says %d", df.Key, tbl.NumRows(), df.Rows)
		}
		if !wire.IsFileField(tbl.Schema().Field(1)) {
			f.t.Errorf("%s: column file lost lake.type=file: %v", df.Key, tbl.Schema().Field(1))
		}
		for _, chunk := range tbl.Column(0).Data().Chunks() {
			s := chunk.(*array.String)
			for i := range s.Len() {
				names = append(names, s.Value(i))
			}
		}
		tbl.Release()
		rdr.Close()
	}
	return names
}

func ptr[T any](v T) *T { return &v }

func nameN(i int) string { return fmt.Sprintf("file-%04d.bin", i) }
