package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/lakedata/lake/client"
)

// tableExpireOptions are the flags of `lake table expire`.
type tableExpireOptions struct {
	endpointOptions
	keepLast  int64
	olderThan time.Duration
}

func newTableExpireCommand(g *globalOptions) *cobra.Command {
	o := &tableExpireOptions{}
	cmd := &cobra.Command{
		Use:   "expire NAME (--keep-last N | --older-than DUR)",
		Short: "Make a table's old versions unreadable, so gc may free what only they use",
		Long: `Expire a table's old versions, as one new version. Time travel to an expired
version fails (FailedPrecondition) and lake gc may then free the data files
and the objects that only expired versions use. Nothing is freed by the
expiry itself, and the current version is always kept.

--keep-last N keeps the N newest versions. --older-than DUR expires the
versions that stopped being current more than DUR ago, keeping the one
that was current DUR ago, so time travel to that moment still works.
lake serve --retention DUR does the same on a schedule. Needs an admin
token.` + endpointHelp,
		Example: `  lake table expire videos --keep-last 10
  lake table expire videos --older-than 720h`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			keep, older := cmd.Flags().Changed("keep-last"), cmd.Flags().Changed("older-than")
			switch {
			case keep == older:
				return fmt.Errorf("%w: give --keep-last or --older-than, one of them", errUsage)
			case keep && o.keepLast < 1:
				return fmt.Errorf("%w: --keep-last %d: the current version is always kept, so at least 1", errUsage, o.keepLast)
			case older && o.olderThan < 0:
				return fmt.Errorf("%w: --older-than %v is negative", errUsage, o.olderThan)
			}
			c, err := o.connect(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer c.Close()
			return runTableExpire(cmd.Context(), c, args[0], client.ExpireOptions{KeepLast: o.keepLast, OlderThan: o.olderThan}, cmd.OutOrStdout())
		},
	}
	o.endpointOptions.addFlags(cmd)
	cmd.Flags().Int64Var(&o.keepLast, "keep-last", 0, "keep the N newest versions")
	cmd.Flags().DurationVar(&o.olderThan, "older-than", 0, "expire versions that stopped being current more than this long ago (e.g. 168h)")
	return cmd
}

func runTableExpire(ctx context.Context, c *client.Client, name string, o client.ExpireOptions, w io.Writer) error {
	res, err := c.Expire(ctx, name, o)
	if err != nil {
		return err
	}
	if res.GetExpired() == 0 {
		_, err = fmt.Fprintf(w, "%s: nothing to expire; versions from %d are readable\n", res.GetTable(), res.GetRetainFrom())
		return err
	}
	_, err = fmt.Fprintf(w, "%s: version %d expired %d versions; versions from %d are readable\n", res.GetTable(), res.GetVersion(), res.GetExpired(), res.GetRetainFrom())
	return err
}
