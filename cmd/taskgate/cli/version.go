package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/taskgate/taskgate/internal/buildinfo"
)

func (e *env) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, build time and Go version of this binary",
		Long: "version prints what the binary was built from, as the Go toolchain recorded it: the module\n" +
			"version (a release tag, or a pseudo-version for an untagged commit), the commit and its time,\n" +
			"and the Go version. The same values are in /metrics (taskgate_build_info) and in the\n" +
			"serverInfo an MCP client is given. taskgate --version prints the same.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := noLedger(cmd, "reads no ledger"); err != nil {
				return err
			}
			fmt.Fprint(e.stdout, buildinfo.Read().String())
			return nil
		},
	}
}

// versionTemplate is what --version prints: the version command's text.
// Module versions and commit hashes hold no template braces.
func versionTemplate() string { return buildinfo.Read().String() }
