package s3

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/lakedata/lake/wire"
)

// Limits of S3 multipart uploads.
const (
	MinPartSize = 5 << 20 // every part but the last is at least this big
	MaxPartSize = 5 << 30
	MaxParts    = 10000
)

// Defaults.
const (
	DefaultPartSize    = 16 << 20
	DefaultConcurrency = 4
)

// Config says where the stage is and how to upload to it.
type Config struct {
	Bucket string
	// Prefix is the key prefix inside the bucket, without leading or
	// trailing slash; empty uses the whole bucket.
	Prefix string
	// Region overrides the default chain's region (AWS_REGION, shared
	// config). With neither, a store with an Endpoint uses us-east-1.
	Region string
	// Endpoint is the base URL of an S3-compatible service, such as
	// http://127.0.0.1:7070; empty means AWS.
	Endpoint string
	// PathStyle addresses buckets as <endpoint>/<bucket> rather than
	// <bucket>.<endpoint>; most S3-compatible services need it.
	PathStyle bool
	// PartSize is the size of multipart upload parts, and the largest
	// object sent in a single request. PutPath raises it for files that
	// would need more than MaxParts parts.
	PartSize int64
	// Concurrency is how many parts of one upload are sent at a time; it
	// is also how many part buffers one upload may hold.
	Concurrency int
	// Logger receives warnings (e.g. a failed abort); nil discards them.
	Logger *slog.Logger
}

// DefaultConfig returns a Config with the default part size and
// concurrency; Bucket is still to be set.
func DefaultConfig() Config {
	return Config{PartSize: DefaultPartSize, Concurrency: DefaultConcurrency}
}

// Validate reports every invalid field.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("s3: config: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	switch {
	case c.Bucket == "":
		bad("Bucket", "required")
	case strings.ContainsAny(c.Bucket, "/\\ \t\r\n") || len(c.Bucket) > 255:
		bad("Bucket", "%q is not a bucket name", c.Bucket)
	}
	if c.Prefix != "" {
		if strings.HasPrefix(c.Prefix, "/") || strings.HasSuffix(c.Prefix, "/") {
			bad("Prefix", "%q must not start or end with a slash", c.Prefix)
		} else if err := wire.ValidateKey(c.Prefix); err != nil {
			bad("Prefix", "%v", err)
		}
	}
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		switch {
		case err != nil:
			bad("Endpoint", "not a URL")
		case u.Scheme != "http" && u.Scheme != "https":
			bad("Endpoint", "scheme must be http or https")
		case u.Host == "":
			bad("Endpoint", "no host")
		case u.User != nil:
			// Credentials come from the AWS chain, never from a URL that
			// may end up in a log.
			bad("Endpoint", "must not contain user information")
		}
	}
	if c.PartSize < MinPartSize || c.PartSize > MaxPartSize {
		bad("PartSize", "%d is outside [%d, %d]", c.PartSize, MinPartSize, int64(MaxPartSize))
	}
	if c.Concurrency < 1 {
		bad("Concurrency", "%d, want at least 1", c.Concurrency)
	}
	return errors.Join(errs...)
}
