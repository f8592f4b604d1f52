package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/wire/lakepb"
)

// urlOptions are the flags of `lake url`.
type urlOptions struct {
	endpointOptions
	table   string
	key     string
	expires time.Duration
	json    bool
	version versionFlag
}

func (o *urlOptions) addFlags(cmd *cobra.Command) {
	o.endpointOptions.addFlags(cmd)
	f := cmd.Flags()
	f.StringVarP(&o.table, "table", "t", "", "table whose row names the object (required)")
	f.StringVar(&o.key, "key", "", "the object's FILE key (required)")
	f.DurationVar(&o.expires, "expires", 0, "how long the URL works, e.g. 1h (default 15m; at most the server's --url-max-expiry)")
	f.BoolVar(&o.json, "json", false, "print the URL and its expiry as one JSON object")
	o.version.addFlag(cmd, "the key's row must be in this version of the table (time travel); it may have been deleted since")
	_ = cmd.MarkFlagRequired("table")
	_ = cmd.MarkFlagRequired("key")
}

func newURLCommand(g *globalOptions) *cobra.Command {
	o := &urlOptions{}
	cmd := &cobra.Command{
		Use:   "url --table T --key K [--expires DUR] [--version N]",
		Short: "Print a URL that reads one object without lake or stage credentials",
		Long: `Print a URL that reads the object at key K with a plain HTTP GET (curl,
a browser), for a while. The metadata service signs it with the stage's
credentials; whoever holds the URL reads the object until it expires, so
treat it as a secret. A read token may ask for one.

K must be the FILE key of a row of the table's current version, or of
version N with --version N. On an S3
stage the URL is presigned and works for --expires (default 15 minutes;
longer than the server's --url-max-expiry, by default 7 days, is
refused). On a local stage it is the object's file:// URL, which works
only where the stage directory is.` + endpointHelp,
		Example: `  lake url --table clips --key objects/2026/12/01/0193…-a.mp4
  curl -o a.mp4 "$(lake url -t clips --key objects/2026/12/01/0193…-a.mp4 --expires 1h)"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.expires < 0 {
				return fmt.Errorf("%w: --expires must be positive", errUsage)
			}
			if err := o.version.parse(cmd); err != nil {
				return err
			}
			c, err := o.connect(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer c.Close()
			return runURL(cmd.Context(), c, o, cmd.OutOrStdout())
		},
	}
	o.addFlags(cmd)
	return cmd
}

// urlLine is the --json output; expires_at is empty when the URL does not
// expire.
type urlLine struct {
	URL       string `json:"url"`
	ExpiresAt string `json:"expires_at,omitempty"`
}

func runURL(ctx context.Context, c *client.Client, o *urlOptions, w io.Writer) error {
	var res *lakepb.ObjectUrl
	var err error
	if v := o.version.at(); v != nil {
		res, err = c.URLAt(ctx, o.table, o.key, o.expires, *v)
	} else {
		res, err = c.URL(ctx, o.table, o.key, o.expires)
	}
	if err != nil {
		return err
	}
	if !o.json {
		_, err := fmt.Fprintln(w, res.GetUrl())
		return err
	}
	line := urlLine{URL: res.GetUrl()}
	if at := res.GetExpiresAtUnixMicros(); at != 0 {
		line.ExpiresAt = time.UnixMicro(at).UTC().Format(time.RFC3339)
	}
	return json.NewEncoder(w).Encode(line)
}
