package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/receipt"
)

func (e *env) receiptCmd() *cobra.Command {
	var tenant, format string
	cmd := &cobra.Command{
		Use:   "receipt OPERATION_ID|TASK_ID",
		Short: "Print an operation's receipt: attempts, remote jobs, charges, status and next actions",
		Args:  oneArg("the operation ID or task ID", "taskgate receipt settlement-regression-842 --format md"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains([]string{"yaml", "json", "md"}, strings.ToLower(format)) {
				return &usageError{msg: fmt.Sprintf("--format %q is not a receipt format; use yaml, json or md", format), hint: "taskgate receipt " + args[0] + " --format md"}
			}
			return e.withOperation(cmd.Context(), tenant, args[0], func(s ledger.Store, op *ledger.Operation) error {
				in, err := receipt.Load(cmd.Context(), s, op, nil)
				if err != nil {
					return err
				}
				out, err := receipt.Render(receipt.Build(in), format)
				if err != nil {
					return err
				}
				_, err = e.stdout.Write(out)
				return err
			})
		},
	}
	operationTenantFlag(cmd, &tenant)
	cmd.Flags().StringVar(&format, "format", "yaml", "yaml, json or md")
	return cmd
}
