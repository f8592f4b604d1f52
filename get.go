package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/wire"
)

// getOptions are the flags of `lake get`.
type getOptions struct {
	endpointOptions
	table     string
	key       string
	out       string
	version   int64
	atVersion bool // --version was given
}

func (o *getOptions) addFlags(cmd *cobra.Command) {
	o.endpointOptions.addFlags(cmd)
	f := cmd.Flags()
	f.StringVarP(&o.table, "table", "t", "", "table holding the file's row (required)")
	f.StringVar(&o.key, "key", "", "the file's object key, as lake put printed it (required)")
	f.StringVarP(&o.out, "output", "o", "", `where to write the file; "-" for standard output (required)`)
	f.Int64Var(&o.version, "version", 0, "find the row in this version of the table (time travel); it may have been deleted since")
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
straight from the stage and write it to OUT.

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
			o.atVersion = cmd.Flags().Changed("version")
			if o.atVersion && o.version < 0 {
				return fmt.Errorf("%w: --version must not be negative", errUsage)
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
	find := c.FindFile
	if o.atVersion {
		find = func(ctx context.Context, table, key string) (wire.FileValue, error) {
			return c.FindFileAt(ctx, table, key, o.version)
		}
	}
	v, err := find(ctx, o.table, o.key)
	if err != nil {
		return err
	}
	rc, err := c.Open(ctx, v)
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
