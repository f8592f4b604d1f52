package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// versionFlag is the --version N of commands that read a table as it was
// at one version (time travel): get, url, table describe.
type versionFlag struct {
	n   int64
	set bool // --version was given
}

func (v *versionFlag) addFlag(cmd *cobra.Command, usage string) {
	cmd.Flags().Int64Var(&v.n, "version", 0, usage)
}

// parse records whether --version was given and refuses a negative one as
// a usage error.
func (v *versionFlag) parse(cmd *cobra.Command) error {
	v.set = cmd.Flags().Changed("version")
	if v.set && v.n < 0 {
		return fmt.Errorf("%w: --version must not be negative", errUsage)
	}
	return nil
}

// at is the version asked for, nil for the latest.
func (v *versionFlag) at() *int64 {
	if !v.set {
		return nil
	}
	return &v.n
}
