package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

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
			s, err := e.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			op, err := findOperation(cmd.Context(), s, tenant, args[0])
			if err != nil {
				return err
			}
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
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "the tenant the operation belongs to (needed when several tenants use the same operation ID)")
	cmd.Flags().StringVar(&format, "format", "yaml", "yaml, json or md")
	return cmd
}
