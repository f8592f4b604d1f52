package s3

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/wire"
)

// MaxPresignExpiry is the longest a SigV4 presigned URL can work.
const MaxPresignExpiry = 7 * 24 * time.Hour

var _ objects.Presigner = (*Store)(nil)

// PresignGet returns a presigned GET URL of the object at key (see
// objects.Presigner). It signs locally with the store's credentials and
// makes no request to S3.
func (s *Store) PresignGet(ctx context.Context, key string, expires time.Duration) (string, error) {
	k, err := s.objectKey(key)
	if err != nil {
		return "", err
	}
	if err := checkExpiry(expires); err != nil {
		return "", err
	}
	req, err := s3.NewPresignClient(s.client).PresignGetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &k}, s3.WithPresignExpires(expires))
	if err != nil {
		// Presigning fails before any URL exists (no credentials), so
		// the error cannot carry one.
		return "", fail(ctx, "presign get", key, err)
	}
	return req.URL, nil
}

// checkExpiry refuses an expiry that SigV4 cannot sign.
func checkExpiry(d time.Duration) error {
	if d < time.Second || d > MaxPresignExpiry {
		return fmt.Errorf("%w: a presigned URL works between 1 s and %v, not %v", wire.ErrInvalidRequest, MaxPresignExpiry, d)
	}
	return nil
}
