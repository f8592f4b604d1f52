package main

import (
	"context"
	"os"

	"github.com/spf13/cobra"

	"github.com/lakedata/lake/client"
)

// defaultEndpoint is where `lake serve` listens by default (DESIGN §6).
const defaultEndpoint = "grpc://127.0.0.1:50051"

// endpointOptions are the flags of every command that talks to a lake
// endpoint. The token comes only from LAKE_TOKEN: a flag would show it in
// the process list and the shell history.
type endpointOptions struct {
	endpoint      string
	tlsCA         string
	checkpointDir string
}

func (o *endpointOptions) addFlags(cmd *cobra.Command) {
	def := os.Getenv("LAKE_ENDPOINT")
	if def == "" {
		def = defaultEndpoint
	}
	f := cmd.Flags()
	f.StringVar(&o.endpoint, "endpoint", def, "lake endpoint: grpc://host:port, grpc+tls://host:port or host:port (env LAKE_ENDPOINT)")
	f.StringVar(&o.tlsCA, "tls-ca", "", "PEM file of the CAs to trust for a grpc+tls endpoint (default: the system roots)")
	f.StringVar(&o.checkpointDir, "checkpoint-dir", "", "where resumable uploads keep their checkpoints (default $XDG_STATE_HOME/lake/uploads or ~/.local/state/lake/uploads)")
}

// connect opens a client; the caller closes it.
func (o *endpointOptions) connect(ctx context.Context, g *globalOptions) (*client.Client, error) {
	logger, err := g.logger()
	if err != nil {
		return nil, err
	}
	opts := []client.Option{client.WithLogger(logger), client.WithTLSCA(o.tlsCA)}
	if o.checkpointDir != "" {
		opts = append(opts, client.WithCheckpointDir(o.checkpointDir))
	}
	if tok := os.Getenv("LAKE_TOKEN"); tok != "" {
		opts = append(opts, client.WithToken(tok))
	}
	return client.Connect(ctx, o.endpoint, opts...)
}

// endpointHelp is appended to the Long help of client commands.
const endpointHelp = `

The endpoint comes from --endpoint, else $LAKE_ENDPOINT, else
grpc://127.0.0.1:50051; a bearer token, if the service wants one, from
$LAKE_TOKEN.`
