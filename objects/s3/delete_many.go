package s3

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/lakedata/lake/objects"
)

var _ objects.BatchDeleter = (*Store)(nil)

// maxDeleteBatch is the most keys S3 takes in one DeleteObjects request.
const maxDeleteBatch = 1000

// MaxDeleteBatch implements objects.BatchDeleter.
func (s *Store) MaxDeleteBatch() int { return maxDeleteBatch }

// DeleteMany implements objects.BatchDeleter with one DeleteObjects
// request in quiet mode, so the answer lists only the keys that failed.
func (s *Store) DeleteMany(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	if len(keys) > maxDeleteBatch {
		return fmt.Errorf("s3: delete: %d keys in one batch, at most %d", len(keys), maxDeleteBatch)
	}
	ids := make([]types.ObjectIdentifier, len(keys))
	for i, key := range keys {
		k, err := s.objectKey(key)
		if err != nil {
			return fmt.Errorf("s3: delete: %w", err)
		}
		ids[i] = types.ObjectIdentifier{Key: aws.String(k)}
	}
	out, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
		Bucket: aws.String(s.bucket),
		Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
	})
	if err != nil {
		return fail(ctx, "delete", fmt.Sprintf("%s and %d more keys", keys[0], len(keys)-1), err)
	}
	var failed []types.Error
	for _, e := range out.Errors {
		if aws.ToString(e.Code) != "NoSuchKey" { // gone already: deleted
			failed = append(failed, e)
		}
	}
	if len(failed) > 0 {
		e := failed[0]
		return fmt.Errorf("s3: delete %s: %s: %s (%d of %d keys failed)", strings.TrimPrefix(aws.ToString(e.Key), s.prefix), aws.ToString(e.Code), aws.ToString(e.Message), len(failed), len(keys))
	}
	return nil
}
