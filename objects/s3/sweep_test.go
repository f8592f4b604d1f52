package s3

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lakedata/lake/objects"
)

// TestSweeperAbortsOldUploadsOnly: an unfinished multipart upload under
// the stage prefix is a leftover once it is older than the cutoff, one
// outside the prefix never is, and removing it leaves no upload behind.
func TestSweeperAbortsOldUploadsOnly(t *testing.T) {
	s, srv, bucket := newStore(t, func(c *Config) { c.Prefix = "lake" })
	c := srv.Client(t)
	for _, k := range []string{"lake/objects/2026/12/01/abandoned", "elsewhere/objects/x"} {
		if _, err := c.CreateMultipartUpload(t.Context(), &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(k)}); err != nil {
			t.Fatal(err)
		}
	}
	collect := func(before time.Time) []objects.Leftover {
		var out []objects.Leftover
		for l, err := range s.Leftovers(t.Context(), before) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, l)
		}
		return out
	}
	if young := collect(time.Now().Add(-time.Hour)); len(young) != 0 {
		t.Fatalf("uploads started a moment ago listed as older than an hour: %v", young)
	}
	found := collect(time.Now().Add(time.Minute))
	if len(found) != 1 || found[0].Key != "objects/2026/12/01/abandoned" || found[0].Kind != objects.LeftoverUpload {
		t.Fatalf("leftovers %+v, want the one upload under the stage prefix", found)
	}
	if err := s.RemoveLeftover(t.Context(), found[0]); err != nil {
		t.Fatal(err)
	}
	if left := collect(time.Now().Add(time.Minute)); len(left) != 0 {
		t.Errorf("after the removal: %v", left)
	}
	out, err := c.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Uploads) != 1 || aws.ToString(out.Uploads[0].Key) != "elsewhere/objects/x" {
		t.Errorf("uploads left in the bucket: %v, want only the one outside the stage", out.Uploads)
	}
	if err := s.RemoveLeftover(t.Context(), objects.Leftover{Kind: objects.LeftoverTemp, Key: "x"}); err == nil {
		t.Error("RemoveLeftover took a temp file for an upload")
	}
}
