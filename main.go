// Command lake is a data lake for large unstructured files: the bytes go
// straight to a managed stage, their metadata rows are committed as table
// versions and queried with SQL over Arrow Flight SQL.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit statuses, bbolt's convention: 2 for a command called wrongly, so a
// script can tell a typo from a failure.
const (
	exitFailure = 1
	exitUsage   = 2
)

// run executes `lake args…` and returns its exit status; errors go to
// stderr prefixed with "lake:".
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	if !errors.Is(err, errUsage) {
		// Cobra reports an unknown command from Find, before any hook
		// runs. Find has no side effects: if it fails now, that was it.
		if _, _, ferr := root.Find(args); ferr != nil {
			err = usageError{err}
		}
	}
	fmt.Fprintln(stderr, "lake:", err)
	if errors.Is(err, errUsage) {
		return exitUsage
	}
	return exitFailure
}

// globalOptions are flags every command takes.
type globalOptions struct {
	logLevel string
}

func (o *globalOptions) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return nil, fmt.Errorf("%w: --log-level: %w", errUsage, err)
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
	root.AddCommand(newRmCommand(g))
	root.AddCommand(newGCCommand(g))
	root.AddCommand(newURLCommand(g))
	markUsageErrors(root)
	return root
}

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// errUsage marks errors in how a command was called (exit status 2).
var errUsage = errors.New("usage")

// usageError marks an error of cobra's (unknown flag or command, bad flag
// value, wrong arguments, missing required flag) as a usage error without
// changing its text.
type usageError struct{ error }

func (e usageError) Is(target error) bool { return target == errUsage }
func (e usageError) Unwrap() error        { return e.error }

// markUsageErrors makes cobra's own complaints about how root was called
// usage errors: flag parsing through the flag error function (inherited
// by every subcommand), argument counts by wrapping each command's Args,
// required flags by checking them in a pre-run hook of root, which cobra
// would otherwise check after every hook. Call it once the tree is
// complete.
func markUsageErrors(root *cobra.Command) {
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := cmd.ValidateRequiredFlags(); err != nil {
			return usageError{err}
		}
		if err := cmd.ValidateFlagGroups(); err != nil {
			return usageError{err}
		}
		return nil
	}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if args := c.Args; args != nil {
			c.Args = func(cmd *cobra.Command, a []string) error {
				if err := args(cmd, a); err != nil {
					return usageError{err}
				}
				return nil
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
