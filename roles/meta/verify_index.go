package meta

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// bucketVerified maps an object key to the verifyRecord (JSON) of the
// background verifier's last read of it. Like the rest of the index it is
// derived state: dropped with the index and rebuilt by reading again.
var bucketVerified = []byte("verified")

// verifyRecord is what this service learned of one object by reading it.
type verifyRecord struct {
	// Size is the object's size: the bytes read when SHA256 is set, else
	// what the stage reported (0 when the object could not be found).
	Size int64 `json:"size"`
	// SHA256 is the lowercase hex SHA-256 of the bytes this service read;
	// empty when it could not read them whole.
	SHA256     string    `json:"sha256,omitempty"`
	VerifiedAt time.Time `json:"verified_at"`
	// Match: every row naming the object claimed this size and SHA-256.
	Match bool `json:"match"`
	// Problem is the lakepb.VerifyProblem name of what was wrong, when
	// Match is false.
	Problem string `json:"problem,omitempty"`
}

// Verified returns what the background verifier recorded of the object
// at key: its size and the SHA-256 of its bytes as this service read them,
// when, and whether the rows naming it agreed. ok is false when this node
// never verified the object.
//
// `lake verify` does not use these records: it always reads the objects
// again. They exist for deduplication (DESIGN §12): an upload may reuse an
// existing object only on evidence its claimant cannot forge, and
// SHA256 here is such evidence, being the service's own read. Refuse to
// deduplicate onto an object without a record, or whose record has no
// SHA256: it was never verified. A record that cannot be read counts as
// none, which errs on the side of refusing.
func (ix *index) Verified(key string) (verifyRecord, bool) {
	var raw []byte
	err := ix.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketVerified); b != nil {
			raw = append([]byte(nil), b.Get([]byte(key))...)
		}
		return nil
	})
	if err != nil || len(raw) == 0 {
		return verifyRecord{}, false
	}
	r, err := decodeVerifyRecord(raw)
	if err != nil {
		return verifyRecord{}, false
	}
	return r, true
}

// putVerified records r for key, replacing an older record.
func (ix *index) putVerified(key string, r verifyRecord) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return ix.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketVerified).Put([]byte(key), raw)
	})
}

// decodeVerifyRecord decodes a value of bucketVerified and checks it is
// one this service could have written.
func decodeVerifyRecord(raw []byte) (verifyRecord, error) {
	var r verifyRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return verifyRecord{}, fmt.Errorf("verify record: %w", err)
	}
	switch {
	case r.Size < 0:
		return verifyRecord{}, errors.New("verify record: negative size")
	case r.SHA256 != "" && !wire.IsSHA256Hex(r.SHA256):
		return verifyRecord{}, errors.New("verify record: sha256 is not 64 lowercase hex digits")
	case r.VerifiedAt.IsZero():
		return verifyRecord{}, errors.New("verify record: no time")
	case r.Match && r.SHA256 == "":
		return verifyRecord{}, errors.New("verify record: a match without the bytes' sha256")
	case r.Match && r.Problem != "":
		return verifyRecord{}, errors.New("verify record: a match with a problem")
	case !r.Match && lakepb.VerifyProblem_value[r.Problem] <= 0:
		return verifyRecord{}, errors.New("verify record: a mismatch without a known problem")
	}
	return r, nil
}
