package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/spf13/cobra"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/objects"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// getOptions are the flags of `lake get`.
type getOptions struct {
	endpointOptions
	table   string
	key     string
	out     string
	version versionFlag
}

func (o *getOptions) addFlags(cmd *cobra.Command) {
	o.endpointOptions.addFlags(cmd)
	f := cmd.Flags()
	f.StringVarP(&o.table, "table", "t", "", "table holding the file's row (required)")
	f.StringVar(&o.key, "key", "", "the file's object key, as lake put printed it (required)")
	f.StringVarP(&o.out, "output", "o", "", `where to write the file; "-" for standard output (required)`)
	o.version.addFlag(cmd, "find the row in this version of the table (time travel); it may have been deleted since")
	for _, name := range []string{"table", "key", "output"} {
		_ = cmd.MarkFlagRequired(name)
	}
}

func newGetCommand(g *globalOptions) *cobra.Command {
	o := &getOptions{}
	cmd := &cobra.Command{
		Use:   "get --table T --key K [--version N] -o OUT",
		Short: "Download a file of a table from the stage",
		Long: `Find the row of the table whose FILE value has the key, read the object
and write it to OUT. On a local stage, and on an S3 stage that allows
direct uploads when AWS credentials are at hand, the row and the object
are read straight from the stage. Otherwise (S3 with presigned uploads,
or no AWS credentials) the metadata service finds the row and signs a
read URL that the object is downloaded with; a broken connection
resumes where it stopped.

The bytes are checked against the size and SHA-256 recorded in the row.
OUT is written to a temporary file and renamed into place only when they
match, so OUT is never left holding damaged bytes. With -o - the bytes go
to standard output as they are read, and a mismatch is reported after
them as an error (exit status 1).

With --version N the row is looked up in version N of the table, so a
file whose row was deleted later can still be read while its version is
kept; a key that version has no row for is an error (not found), as is a
version never committed.` + endpointHelp,
		Example: `  lake get --table videos --key objects/2024/05/0190…/clip.mp4 -o clip.mp4
  lake get --table videos --key objects/2024/05/0190…/clip.mp4 --version 3 -o clip.mp4
  lake get -t videos --key objects/2024/05/0190…/clip.mp4 -o - | ffprobe -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.version.parse(cmd); err != nil {
				return err
			}
			c, err := o.connect(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer c.Close()
			return runGet(cmd.Context(), c, o, cmd.OutOrStdout())
		},
	}
	o.addFlags(cmd)
	return cmd
}

func runGet(ctx context.Context, c *client.Client, o *getOptions, stdout io.Writer) error {
	rc, err := openForGet(ctx, c, o)
	if err != nil {
		return err
	}
	defer rc.Close()
	if o.out == "-" {
		_, err := io.Copy(stdout, rc)
		return err
	}
	return writeFileAtomic(o.out, rc)
}

// openForGet finds the row and opens its bytes, checked at the end: through
// a read URL the metadata service signs when this process is not expected
// to reach the stage itself, else straight from the stage.
func openForGet(ctx context.Context, c *client.Client, o *getOptions) (io.ReadCloser, error) {
	version := o.version.at()
	if readsThroughURL(ctx, c.Stage()) {
		rc, _, err := c.OpenURL(ctx, o.table, o.key, client.URLReadOptions{Version: version})
		return rc, err
	}
	find := c.FindFile
	if version != nil {
		find = func(ctx context.Context, table, key string) (wire.FileValue, error) {
			return c.FindFileAt(ctx, table, key, *version)
		}
	}
	v, err := find(ctx, o.table, o.key)
	if err != nil {
		return nil, err
	}
	return c.Open(ctx, v)
}

// readsThroughURL reports whether lake get reads an S3 stage through read
// URLs: always when uploads are presigned (clients are expected to hold no
// stage credentials), otherwise when this process has none. A local stage
// is read directly.
func readsThroughURL(ctx context.Context, stage *lakepb.StageDescriptor) bool {
	if stage.GetKind() != objects.KindS3 {
		return false
	}
	return stage.GetUploadMode() == "presigned" || !hasAWSCredentials(ctx)
}

// hasAWSCredentials reports whether the AWS default chain (environment,
// shared files, SSO, and the instance metadata service unless
// AWS_EC2_METADATA_DISABLED=true) yields credentials within a few seconds.
// It asks no AWS service whether they work.
func hasAWSCredentials(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil || cfg.Credentials == nil {
		return false
	}
	creds, err := cfg.Credentials.Retrieve(ctx)
	return err == nil && creds.HasKeys()
}

// writeFileAtomic writes everything r yields to path: temp file, fsync,
// rename, fsync of the directory. On any error, r's included, path is
// left as it was.
func writeFileAtomic(path string, r io.Reader) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".lake-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = io.Copy(f, r); err != nil {
		return err
	}
	// CreateTemp makes the file 0600; a download is an ordinary file.
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("%s is written but its directory could not be synced: %w", path, err)
	}
	defer d.Close()
	if serr := d.Sync(); serr != nil && !errors.Is(serr, os.ErrInvalid) {
		return fmt.Errorf("%s is written but its directory could not be synced: %w", path, serr)
	}
	return nil
}
