package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/lakedata/lake/client"
)

// statusOptions are the flags of `lake status`.
type statusOptions struct {
	endpointOptions
	json bool
}

func newStatusCommand(g *globalOptions) *cobra.Command {
	o := &statusOptions{}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the metadata cluster: leader, members, versions, lag",
		Long: `Show the metadata cluster as the meta node behind the endpoint sees it:
which node leads, every member with its tables, the sum of its table
versions and how many versions it is behind the leader. A lone node (the
embedded default, or meta without --etcd) is its own leader.

Members publish their numbers a fraction of a second after they change, so
a follower can show a small lag while appends are running.` + endpointHelp,
		Example: `  lake status
  lake status --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.connect(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer c.Close()
			return runStatus(cmd.Context(), c, o.json, cmd.OutOrStdout())
		},
	}
	o.endpointOptions.addFlags(cmd)
	cmd.Flags().BoolVar(&o.json, "json", false, "print the status as JSON")
	return cmd
}

func runStatus(ctx context.Context, c *client.Client, asJSON bool, w io.Writer) error {
	st, err := c.Status(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		raw, err := protojson.MarshalOptions{Multiline: true, EmitUnpopulated: true}.Marshal(st)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", raw)
		return err
	}
	leader := st.GetLeader()
	if leader == "" {
		leader = "none (an election is in progress, or etcd is unreachable)"
	}
	answered := st.GetAnsweredBy()
	if st.GetAcceptingWrites() {
		answered += " (the leader, accepting writes)"
	}
	fmt.Fprintf(w, "leader: %s\nanswered by: %s\n", leader, answered)
	if e := st.GetError(); e != "" {
		fmt.Fprintf(w, "error: %s\n", e)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tROLE\tTABLES\tVERSIONS\tLAG\tUP")
	for _, m := range st.GetMembers() {
		role := "follower"
		if m.GetLeader() {
			role = "leader"
		}
		up := "-"
		if s := m.GetStartedUnixMicros(); s > 0 {
			up = time.Since(time.UnixMicro(s)).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\n", m.GetAddr(), role, m.GetTables(), m.GetVersions(), m.GetLag(), up)
	}
	return tw.Flush()
}
