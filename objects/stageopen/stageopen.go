package stageopen

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/objects/local"
	"github.com/lakedata/lake/objects/s3"
	"github.com/lakedata/lake/wire/lakepb"
)

// S3Options are the S3 settings that a stage URI does not carry.
type S3Options struct {
	Region    string // empty: from the AWS default chain
	Endpoint  string // custom endpoint URL (versitygw, MinIO); empty for AWS
	PathStyle bool   // path-style addressing, which most gateways need
}

// Describe returns the descriptor of a --stage value: what lake.discover
// tells clients. It never holds credentials.
func Describe(uri string, o S3Options) (*lakepb.StageDescriptor, error) {
	u, err := objects.ParseStageURI(uri)
	if err != nil {
		return nil, err
	}
	d := u.Descriptor()
	if u.Kind == objects.KindS3 {
		d.Region, d.Endpoint, d.PathStyle = o.Region, o.Endpoint, o.PathStyle
	}
	return d, nil
}

// Open opens the stage a descriptor names, with the caller's own
// credentials (the AWS default chain for S3). A missing local stage
// directory is created.
func Open(ctx context.Context, d *lakepb.StageDescriptor, logger *slog.Logger) (objects.Store, error) {
	switch d.GetKind() {
	case objects.KindLocal:
		return local.Open(d.GetLocalPath(), logger)
	case objects.KindS3:
		cfg := s3.DefaultConfig()
		cfg.Bucket, cfg.Prefix = d.GetBucket(), d.GetPrefix()
		cfg.Region, cfg.Endpoint, cfg.PathStyle = d.GetRegion(), d.GetEndpoint(), d.GetPathStyle()
		cfg.Logger = logger
		return s3.Open(ctx, cfg)
	}
	return nil, fmt.Errorf("stage %s: unsupported kind %q", d.GetRootUri(), d.GetKind())
}
