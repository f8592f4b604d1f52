package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/internal/humanize"
	"github.com/lakedata/lake/objects/checkpoint"
)

func newUploadsCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "uploads",
		Short: "List or cancel interrupted resumable uploads",
		Long: `A put of a file keeps a checkpoint until its row is committed. If the put
is interrupted (Ctrl-C, a crash, a lost network), running the same lake put
again resumes it: on S3 finished parts are verified, not sent again; an
object uploaded in one request is appended again with the same commit id,
so its row commits once. These commands show and give up such uploads.`,
	}
	cmd.AddCommand(newUploadsLsCommand(), newUploadsCancelCommand(g))
	return cmd
}

// uploadsLsOptions are the flags of `lake uploads ls`. It reads local
// checkpoints only, so it takes no endpoint.
type uploadsLsOptions struct {
	checkpointDir string
}

func (o *uploadsLsOptions) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.checkpointDir, "checkpoint-dir", "", "checkpoint directory (default $XDG_STATE_HOME/lake/uploads or ~/.local/state/lake/uploads)")
}

func newUploadsLsCommand() *cobra.Command {
	o := &uploadsLsOptions{}
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List pending uploads: file, table, size, parts done, age, state",
		Example: `  lake uploads ls
  lake uploads ls --checkpoint-dir /var/lib/lake/uploads`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runUploadsLs(o, cmd.OutOrStdout(), time.Now())
		},
	}
	o.addFlags(cmd)
	return cmd
}

func runUploadsLs(o *uploadsLsOptions, w io.Writer, now time.Time) error {
	entries, err := client.ListUploads(o.checkpointDir)
	if err != nil {
		return err
	}
	return printUploads(w, entries, now)
}

// printUploads writes one line per checkpoint; never its raw content.
func printUploads(w io.Writer, entries []checkpoint.Entry, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tTABLE\tSIZE\tPARTS\tAGE\tSTATE")
	for _, e := range entries {
		cp := e.Checkpoint
		if cp == nil {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\tunreadable checkpoint (%v)\n", e.Path, e.Err)
			continue
		}
		done, total := int64(len(cp.Parts)), int64(1)
		if cp.Kind == checkpoint.KindSingle {
			done = 1 // uploaded in one request
		} else {
			total = max(1, (cp.Source.Size+cp.PartSize-1)/cp.PartSize) // an empty file is one empty part
		}
		state := "interrupted: run the same lake put to resume"
		switch {
		case e.Locked:
			state = fmt.Sprintf("running (pid %d)", e.PID)
		case cp.Completed:
			state = "uploaded, row not yet committed: run the same lake put"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\n", cp.Source.Path, orDash(cp.Table), humanize.Bytes(cp.Source.Size),
			done, total, now.Sub(cp.UpdatedAt).Round(time.Second), state)
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// uploadsCancelOptions are the flags of `lake uploads cancel`.
type uploadsCancelOptions struct {
	endpointOptions
}

func (o *uploadsCancelOptions) addFlags(cmd *cobra.Command) {
	o.endpointOptions.addFlags(cmd)
}

func newUploadsCancelCommand(g *globalOptions) *cobra.Command {
	o := &uploadsCancelOptions{}
	cmd := &cobra.Command{
		Use:   "cancel PATH",
		Short: "Give up the pending upload of a file: abort it on the stage, remove its checkpoint",
		Long: `Give up the pending upload of the file at PATH: its checkpoint is locked and
checked against the endpoint's stage, the multipart upload is aborted (its
parts are deleted) and the checkpoint removed. An upload that already
completed is not cancelled: run the same lake put to commit its row. The
record of a put whose object was uploaded in one request is just removed:
its row, if its append committed, stays; an object without a row is left
for lake gc.` + endpointHelp,
		Example: `  lake uploads cancel ./weights.safetensors`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.connect(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer c.Close()
			return runUploadsCancel(cmd.Context(), c, args[0], cmd.OutOrStdout())
		},
	}
	o.addFlags(cmd)
	return cmd
}

func runUploadsCancel(ctx context.Context, c *client.Client, path string, w io.Writer) error {
	forgot, err := c.ForgetPuts(path)
	if err != nil {
		return err
	}
	n, err := c.CancelUpload(ctx, path)
	if errors.Is(err, client.ErrNoUpload) && forgot > 0 {
		err = nil
	}
	if err != nil {
		return err
	}
	if forgot > 0 {
		if _, err := fmt.Fprintf(w, "forgot %d interrupted put(s) of %s whose object was uploaded (a committed row stays)\n", forgot, path); err != nil {
			return err
		}
	}
	if n > 0 {
		_, err = fmt.Fprintf(w, "cancelled %d upload(s) of %s\n", n, path)
	}
	return err
}
