package cluster

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestDecodeHead(t *testing.T) {
	good := `{"table_id":"0190c1f4-4f1a-7b1e-9a3c-1d2e3f405162","name":"clips","version":7}`
	h, err := DecodeHead([]byte(good))
	if err != nil || h.Name != "clips" || h.Version != 7 {
		t.Fatalf("DecodeHead(%s) = %+v, %v", good, h, err)
	}
	for _, bad := range []string{
		``, `null`, `[]`, `{"table_id":"x","name":"clips","version":1}`,
		`{"table_id":"0190c1f4-4f1a-7b1e-9a3c-1d2e3f405162","name":"../etc","version":1}`,
		`{"table_id":"0190c1f4-4f1a-7b1e-9a3c-1d2e3f405162","name":"clips","version":-1}`,
		`{"table_id":"0190c1f4-4f1a-7b1e-9a3c-1d2e3f405162","name":"clips","version":"1"}`,
	} {
		if _, err := DecodeHead([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeHead(%q) = %v, want ErrMalformed", bad, err)
		}
	}
}

// FuzzDecodeHead: any bytes in etcd decode to a valid head or ErrMalformed,
// and a valid head survives a round trip.
func FuzzDecodeHead(f *testing.F) {
	f.Add([]byte(`{"table_id":"0190c1f4-4f1a-7b1e-9a3c-1d2e3f405162","name":"clips","version":7}`))
	f.Add([]byte(`{"table_id":"","name":"","version":0}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		h, err := DecodeHead(raw)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		again, _ := json.Marshal(h)
		h2, err := DecodeHead(again)
		if err != nil || h2 != h {
			t.Fatalf("round trip of %+v: %+v, %v", h, h2, err)
		}
	})
}

// FuzzDecodeMember: any bytes decode to a member or ErrMalformed.
func FuzzDecodeMember(f *testing.F) {
	f.Add([]byte(`{"addr":"127.0.0.1:50052","report":{"tables":2,"versions":9},"started":"2026-12-01T00:00:00Z","updated":"2026-12-01T00:00:01Z"}`))
	f.Add([]byte(`{"addr":""}`))
	f.Add([]byte(`{"addr":"a","report":{"tables":-1}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := decodeMember(raw)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if m.Addr == "" || m.Report.Tables < 0 || m.Report.Versions < 0 {
			t.Fatalf("accepted %+v", m)
		}
	})
}
