package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/internal/humanize"
	"github.com/lakedata/lake/wire/lakepb"
)

// gcOptions are the flags of `lake gc`.
type gcOptions struct {
	endpointOptions
	grace  time.Duration
	dryRun bool
	json   bool
}

func newGCCommand(g *globalOptions) *cobra.Command {
	o := &gcOptions{}
	cmd := &cobra.Command{
		Use:   "gc [--grace DUR] [--dry-run] [--json]",
		Short: "Free what no retained table version references",
		Long: `Free, on the metadata leader, what no retained version of any table
references:

  data files     Parquet files of versions that expired or were compacted
                 or deleted away
  objects        files under objects/ that no retained row points to and
                 that are older than --grace: orphans of failed puts, and
                 the files of deleted rows and expired versions
  uploads        unfinished multipart uploads older than --grace (S3)
  temp files     temp files of crashed writes older than --grace (local)

An object several rows point to, in one table or several, lives while any
retained row does. A row acknowledged while gc runs never points at what it
frees: an append naming an object gc is freeing is refused instead (the
client uploads again). Use lake table expire (or serve --retention) first
to let old versions go. Needs an admin token.` + endpointHelp,
		Example: `  lake gc --dry-run
  lake gc --grace 1h --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.grace < 0 {
				return fmt.Errorf("%w: --grace %v is negative", errUsage, o.grace)
			}
			c, err := o.connect(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer c.Close()
			return runGC(cmd.Context(), c, o, cmd.OutOrStdout())
		},
	}
	o.endpointOptions.addFlags(cmd)
	f := cmd.Flags()
	f.DurationVar(&o.grace, "grace", 24*time.Hour, "keep what is younger than this (0s frees everything unreferenced)")
	f.BoolVar(&o.dryRun, "dry-run", false, "report what would be freed, free nothing")
	f.BoolVar(&o.json, "json", false, "print the result as one JSON object")
	return cmd
}

func runGC(ctx context.Context, c *client.Client, o *gcOptions, w io.Writer) error {
	res, err := c.GC(ctx, client.GCOptions{Grace: &o.grace, DryRun: o.dryRun})
	if err != nil {
		return err
	}
	if o.json {
		return json.NewEncoder(w).Encode(gcJSON(res))
	}
	verb := "freed"
	if res.GetDryRun() {
		verb = "would free"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "KIND\t%s\tBYTES\n", verb)
	for _, k := range []struct {
		name string
		c    *lakepb.GcCount
	}{{"data files", res.GetDataFiles()}, {"objects", res.GetObjects()}, {"uploads", res.GetUploads()}, {"temp files", res.GetTempFiles()}} {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", k.name, k.c.GetCount(), humanize.Bytes(k.c.GetBytes()))
	}
	fmt.Fprintf(tw, "objects kept, referenced\t%d\t\n", res.GetReferencedObjects())
	return tw.Flush()
}

type gcCount struct {
	Count int64 `json:"count"`
	Bytes int64 `json:"bytes"`
}

func gcJSON(r *lakepb.GcResult) any {
	c := func(x *lakepb.GcCount) gcCount { return gcCount{x.GetCount(), x.GetBytes()} }
	return struct {
		DryRun            bool    `json:"dry_run"`
		DataFiles         gcCount `json:"data_files"`
		Objects           gcCount `json:"objects"`
		Uploads           gcCount `json:"uploads"`
		TempFiles         gcCount `json:"temp_files"`
		ReferencedObjects int64   `json:"referenced_objects"`
	}{r.GetDryRun(), c(r.GetDataFiles()), c(r.GetObjects()), c(r.GetUploads()), c(r.GetTempFiles()), r.GetReferencedObjects()}
}
