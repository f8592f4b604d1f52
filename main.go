// Command lake is a data lake for large unstructured files: the bytes go
// straight to a managed stage, their metadata rows are committed as table
// versions and queried with SQL over Arrow Flight SQL.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCommand()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "lake:", err)
		os.Exit(1)
	}
}

// globalOptions are flags every command takes.
type globalOptions struct {
	logLevel string
}

func (o *globalOptions) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})), nil
}

func newRootCommand() *cobra.Command {
	g := &globalOptions{}
	root := &cobra.Command{
		Use:   "lake",
		Short: "A data lake for large unstructured files, with SQL over their metadata",
		Long: `lake keeps large files (videos, model weights) in a managed stage and the
tabular metadata that describes them in versioned tables you query with SQL
from any Arrow Flight SQL client.

File bytes never pass through a lake server: clients upload them straight to
the stage, then commit one small metadata row.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	root.AddCommand(newServeCommand(g))
	root.AddCommand(newPutCommand(g))
	root.AddCommand(newSQLCommand(g))
	root.AddCommand(newTableCommand(g))
	root.AddCommand(newGetCommand(g))
	root.AddCommand(newUploadsCommand(g))
	root.AddCommand(newStatusCommand(g))
	root.AddCommand(newVerifyCommand(g))
	return root
}

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// errUsage marks errors in how a command was called.
var errUsage = errors.New("usage")
