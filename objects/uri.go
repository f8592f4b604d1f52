package objects

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/lakedata/lake/wire/lakepb"
)

// Stage kinds.
const (
	KindLocal = "file"
	KindS3    = "s3"
)

// StageURI is a parsed --stage value: file:///abs/dir (or a plain path) or
// s3://bucket/prefix.
type StageURI struct {
	Kind   string // KindLocal or KindS3
	Path   string // local: absolute directory
	Bucket string // s3
	Prefix string // s3: without leading or trailing slash
}

// ParseStageURI parses a --stage value. A value without a scheme is a local
// directory, made absolute.
func ParseStageURI(s string) (StageURI, error) {
	if s == "" {
		return StageURI{}, fmt.Errorf("stage: empty URI")
	}
	if !strings.Contains(s, "://") {
		abs, err := filepath.Abs(s)
		if err != nil {
			return StageURI{}, fmt.Errorf("stage: %w", err)
		}
		return StageURI{Kind: KindLocal, Path: abs}, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return StageURI{}, fmt.Errorf("stage: bad URI %q: %v", s, err)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return StageURI{}, fmt.Errorf("stage: file URI %q names a host; use file:///abs/dir", s)
		}
		if !filepath.IsAbs(u.Path) {
			return StageURI{}, fmt.Errorf("stage: file URI %q needs an absolute path", s)
		}
		return StageURI{Kind: KindLocal, Path: filepath.Clean(u.Path)}, nil
	case "s3":
		if u.Host == "" {
			return StageURI{}, fmt.Errorf("stage: s3 URI %q has no bucket", s)
		}
		return StageURI{Kind: KindS3, Bucket: u.Host, Prefix: strings.Trim(u.Path, "/")}, nil
	default:
		return StageURI{}, fmt.Errorf("stage: unsupported scheme %q (use file:// or s3://)", u.Scheme)
	}
}

// String renders the URI in canonical form.
func (u StageURI) String() string {
	switch u.Kind {
	case KindLocal:
		return (&url.URL{Scheme: "file", Path: u.Path}).String()
	case KindS3:
		if u.Prefix == "" {
			return "s3://" + u.Bucket
		}
		return "s3://" + u.Bucket + "/" + u.Prefix
	}
	return ""
}

// Descriptor is what lake.discover tells clients about this stage. S3
// region, endpoint and addressing are filled in by the S3 backend's caller.
func (u StageURI) Descriptor() *lakepb.StageDescriptor {
	d := &lakepb.StageDescriptor{Kind: u.Kind, RootUri: u.String()}
	switch u.Kind {
	case KindLocal:
		d.LocalPath = u.Path
	case KindS3:
		d.Bucket, d.Prefix = u.Bucket, u.Prefix
	}
	return d
}
