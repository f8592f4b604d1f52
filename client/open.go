package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/wire"
)

// Open reads the object of v straight from the stage. The reader checks
// at the end that exactly v.Size bytes came and that their SHA-256 is
// v.SHA256; if not, Read returns an error wrapping ErrIntegrity instead of
// io.EOF, so a caller that copies to the end never mistakes damaged bytes
// for the file.
func (c *Client) Open(ctx context.Context, v wire.FileValue) (io.ReadCloser, error) {
	if err := v.Validate(); err != nil {
		return nil, fmt.Errorf("client: open: %w", err)
	}
	rc, err := c.store.Open(ctx, v.Key, 0, -1)
	if err != nil {
		return nil, fmt.Errorf("client: open %s: %w", v.Key, err)
	}
	return newVerifier(rc, v), nil
}

// newVerifier reads rc, checking at the end that it held exactly the
// bytes of v (Open, OpenURL).
func newVerifier(rc io.ReadCloser, v wire.FileValue) *verifier {
	return &verifier{rc: rc, h: sha256.New(), want: v}
}

type verifier struct {
	rc   io.ReadCloser
	h    hash.Hash
	n    int64
	want wire.FileValue
	err  error // sticky: io.EOF or an integrity error
}

func (v *verifier) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.rc.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if v.n > v.want.Size {
		v.err = fmt.Errorf("%w: %s has more than the %d bytes recorded", ErrIntegrity, v.want.Key, v.want.Size)
		return n, v.err
	}
	if err == io.EOF {
		switch sum := hex.EncodeToString(v.h.Sum(nil)); {
		case v.n != v.want.Size:
			v.err = fmt.Errorf("%w: %s has %d bytes, %d recorded", ErrIntegrity, v.want.Key, v.n, v.want.Size)
		case sum != v.want.SHA256:
			v.err = fmt.Errorf("%w: %s has SHA-256 %s, %s recorded", ErrIntegrity, v.want.Key, sum, v.want.SHA256)
		default:
			v.err = io.EOF
		}
		return n, v.err
	}
	return n, err
}

func (v *verifier) Close() error { return v.rc.Close() }

// FindFile returns the FILE value whose key is key among the rows of
// table's latest version, or ErrFileNotFound. It reads the table's Parquet
// data files straight from the stage, so it needs no SQL endpoint; it
// reads every data file, so it suits tools, not hot paths.
func (c *Client) FindFile(ctx context.Context, table, key string) (wire.FileValue, error) {
	return c.findFile(ctx, table, key, nil)
}

// findFile is FindFile at version, or at the latest when version is nil.
func (c *Client) findFile(ctx context.Context, table, key string, version *int64) (wire.FileValue, error) {
	snap, err := c.Snapshot(ctx, table, version)
	if err != nil {
		return wire.FileValue{}, err
	}
	schema, err := wire.DecodeSchema(snap.GetSchema())
	if err != nil {
		return wire.FileValue{}, fmt.Errorf("client: schema of %s: %w", table, err)
	}
	var cols []string
	for _, f := range schema.Fields() {
		if wire.IsFileField(f) {
			cols = append(cols, f.Name)
		}
	}
	// Newest data files first: a recent upload is the likely target.
	files := snap.GetFiles()
	for i := len(files) - 1; i >= 0; i-- {
		v, ok, err := c.findInDataFile(ctx, files[i].GetKey(), cols, key)
		if err != nil {
			return wire.FileValue{}, fmt.Errorf("client: find %s in %s: %w", key, table, err)
		}
		if ok {
			return v, nil
		}
	}
	if version != nil {
		return wire.FileValue{}, fmt.Errorf("client: %w: %s has no row with key %s at version %d", ErrFileNotFound, table, key, *version)
	}
	return wire.FileValue{}, fmt.Errorf("client: %w: %s has no row with key %s", ErrFileNotFound, table, key)
}

func (c *Client) findInDataFile(ctx context.Context, dataKey string, cols []string, key string) (wire.FileValue, bool, error) {
	// Data files hold metadata rows only, so reading one whole is fine.
	raw, err := objects.ReadAll(ctx, c.store, dataKey)
	if err != nil {
		return wire.FileValue{}, false, err
	}
	pf, err := file.NewParquetReader(bytes.NewReader(raw))
	if err != nil {
		return wire.FileValue{}, false, fmt.Errorf("%s: %w", dataKey, err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		return wire.FileValue{}, false, fmt.Errorf("%s: %w", dataKey, err)
	}
	tbl, err := fr.ReadTable(ctx)
	if err != nil {
		return wire.FileValue{}, false, fmt.Errorf("%s: %w", dataKey, err)
	}
	defer tbl.Release()
	for _, name := range cols {
		idx := tbl.Schema().FieldIndices(name)
		if len(idx) != 1 {
			return wire.FileValue{}, false, fmt.Errorf("%s: no column %q", dataKey, name)
		}
		for _, chunk := range tbl.Column(idx[0]).Data().Chunks() {
			values, valid, err := wire.FileValues(chunk)
			if err != nil {
				return wire.FileValue{}, false, fmt.Errorf("%s: column %q: %w", dataKey, name, err)
			}
			for j, v := range values {
				if valid[j] && v.Key == key {
					return v, true, nil
				}
			}
		}
	}
	return wire.FileValue{}, false, nil
}
