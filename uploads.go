package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/objects/checkpoint"
)

func newUploadsCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "uploads",
		Short: "List or cancel interrupted resumable uploads",
		Long: `A put of a file to an S3 stage keeps a checkpoint until its row is
committed. If the put is interrupted (Ctrl-C, a crash, a lost network),
running the same lake put again resumes it: finished parts are verified,
not sent again. These commands show and give up such uploads.`,
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
		total := (cp.Source.Size + cp.PartSize - 1) / cp.PartSize
		state := "interrupted: run the same lake put to resume"
		switch {
		case e.Locked:
			state = fmt.Sprintf("running (pid %d)", e.PID)
		case cp.Completed:
			state = "uploaded, row not yet committed: run the same lake put"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\n", cp.Source.Path, orDash(cp.Table), humanBytes(cp.Source.Size),
			len(cp.Parts), total, now.Sub(cp.UpdatedAt).Round(time.Second), state)
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
completed is not cancelled: run the same lake put to commit its row.` + endpointHelp,
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
	n, err := c.CancelUpload(ctx, path)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "cancelled %d upload(s) of %s\n", n, path)
	return err
}
