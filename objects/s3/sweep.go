package s3

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lakedata/lake/objects"
)

var _ objects.Sweeper = (*Store)(nil)

// Leftovers lists the unfinished multipart uploads under the stage prefix
// initiated before before. Their size is not listed (it would take a
// ListParts per upload) and is reported as 0.
func (s *Store) Leftovers(ctx context.Context, before time.Time) iter.Seq2[objects.Leftover, error] {
	return func(yield func(objects.Leftover, error) bool) {
		in := &s3.ListMultipartUploadsInput{Bucket: aws.String(s.bucket), Prefix: aws.String(s.prefix)}
		for {
			out, err := s.client.ListMultipartUploads(ctx, in)
			if err != nil {
				yield(objects.Leftover{}, fail(ctx, "list multipart uploads", "", err))
				return
			}
			for _, u := range out.Uploads {
				started := aws.ToTime(u.Initiated)
				key, ok := strings.CutPrefix(aws.ToString(u.Key), s.prefix)
				if !ok || !started.Before(before) {
					continue
				}
				l := objects.Leftover{Kind: objects.LeftoverUpload, Key: key, ID: aws.ToString(u.UploadId), Started: started}
				if !yield(l, nil) {
					return
				}
			}
			if !aws.ToBool(out.IsTruncated) {
				return
			}
			in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
		}
	}
}

// RemoveLeftover aborts an upload Leftovers listed, repeating the abort
// until the upload is gone (abortMultipart).
func (s *Store) RemoveLeftover(ctx context.Context, l objects.Leftover) error {
	if l.Kind != objects.LeftoverUpload || l.ID == "" {
		return fmt.Errorf("s3: %q is not a multipart upload", l.Key)
	}
	k, err := s.objectKey(l.Key)
	if err != nil {
		return fmt.Errorf("s3: remove upload: %w", err)
	}
	s.abortMultipart(ctx, k, l.ID)
	return nil
}
