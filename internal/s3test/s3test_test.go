package s3test_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/lakedata/lake/internal/s3test"
)

func TestMain(m *testing.M) { os.Exit(s3test.RunShared(m)) }

func TestServer(t *testing.T) {
	srv := s3test.Start(t)
	if !strings.HasPrefix(srv.Endpoint, "http://127.0.0.1:") {
		t.Fatalf("Endpoint = %q, want loopback", srv.Endpoint)
	}
	c := srv.Client(t)
	ctx := t.Context()
	srv.Bucket(t, "lake-test")

	data := []byte("hello, versitygw")
	put := func() error {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{
			Bucket:      aws.String("lake-test"),
			Key:         aws.String("log/00000000000000000001.json"),
			Body:        bytes.NewReader(data),
			IfNoneMatch: aws.String("*"),
		})
		return err
	}
	if err := put(); err != nil {
		t.Fatalf("first PutObject: %v", err)
	}
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("lake-test"), Key: aws.String("log/00000000000000000001.json")})
	if err != nil {
		t.Fatalf("GetObject: %v", err)
	}
	got, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("GetObject read %q, %v; want %q", got, err, data)
	}

	err = put()
	var re *smithyhttp.ResponseError
	var ae smithy.APIError
	if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusPreconditionFailed ||
		!errors.As(err, &ae) || ae.ErrorCode() != "PreconditionFailed" {
		t.Fatalf("second PutObject with If-None-Match: * = %v, want 412 PreconditionFailed", err)
	}
}

func TestSharedAndSetEnv(t *testing.T) {
	srv := s3test.Shared(t)
	if again := s3test.Shared(t); again != srv {
		t.Fatal("Shared started a second gateway")
	}
	bucket := srv.NewBucket(t)

	// The default credential chain, as production code builds it, finds the
	// gateway's credentials and region in the environment.
	srv.SetEnv(t)
	cfg, err := config.LoadDefaultConfig(t.Context())
	if err != nil {
		t.Fatalf("LoadDefaultConfig: %v", err)
	}
	if cfg.Region != srv.Region {
		t.Fatalf("region %q, want %q", cfg.Region, srv.Region)
	}
	c := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(srv.Endpoint)
		o.UsePathStyle = true
	})
	out, err := c.ListBuckets(t.Context(), &s3.ListBucketsInput{})
	if err != nil {
		t.Fatalf("ListBuckets: %v", err)
	}
	found := false
	for _, b := range out.Buckets {
		found = found || aws.ToString(b.Name) == bucket
	}
	if !found {
		t.Fatalf("ListBuckets does not list %s", bucket)
	}
}
