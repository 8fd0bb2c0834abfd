package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/taskgate/taskgate/internal/inert"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/worker"
)

// resolveHint lists the ways to resolve an operation.
const resolveHint = "taskgate ops resolve OPERATION_ID (--attach JOB | --resend | --fail | --accept-duplicate JOB | --cancel-duplicate JOB) [--note TEXT]"

func (e *env) opsResolveCmd() *cobra.Command {
	var (
		tenant string
		r      worker.Resolution
	)
	cmd := &cobra.Command{
		Use:   "resolve OPERATION_ID|TASK_ID",
		Short: "Resolve an operation waiting for review, or settle a duplicate remote job",
		Long: "resolve records a human's decision. For an operation in review: --attach JOB when the provider\n" +
			"shows the job the lost send started, --resend when you are sure the send started nothing, or\n" +
			"--fail to end it. For a duplicate remote job: --accept-duplicate JOB or --cancel-duplicate JOB.\n" +
			"The gateway carries the decision out; the decision and its author go into the ledger.",
		Example: "  taskgate ops resolve settlement-regression-842 --attach hosted-suite-9912 --note \"seen in the provider console\"",
		Args:    oneArg("the operation ID or task ID", resolveHint),
		RunE: func(cmd *cobra.Command, args []string) error {
			actions := []string{"attach", "resend", "fail", "accept-duplicate", "cancel-duplicate"}
			if err := exactlyOne(cmd, resolveHint, actions...); err != nil {
				return err
			}
			for _, f := range []struct {
				name string
				set  bool
			}{{"attach", r.Attach != ""}, {"resend", r.Resend}, {"fail", r.Fail}, {"accept-duplicate", r.AcceptDuplicate != ""}, {"cancel-duplicate", r.CancelDuplicate != ""}} {
				if cmd.Flags().Changed(f.name) && !f.set {
					return &usageError{msg: fmt.Sprintf("--%s was given without effect; it needs a remote job ID, or true", f.name), hint: resolveHint}
				}
			}
			r.Actor = e.actor()
			return e.withOperation(cmd.Context(), tenant, args[0], func(s ledger.Store, op *ledger.Operation) error {
				out, err := worker.Resolve(cmd.Context(), s, op, r)
				if err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "operation %s (task %s) is %s\n", inert.Terminal(out.OperationID), inert.Terminal(out.TaskID), out.State)
				fmt.Fprintf(e.stdout, "next: %s\n", nextAfter(r))
				return nil
			})
		},
	}
	operationTenantFlag(cmd, &tenant)
	f := cmd.Flags()
	f.StringVar(&r.Attach, "attach", "", "bind this provider job to the operation and follow it")
	f.BoolVar(&r.Resend, "resend", false, "send the call again: you vouch that the earlier send started nothing")
	f.BoolVar(&r.Fail, "fail", false, "end the operation as failed")
	f.StringVar(&r.AcceptDuplicate, "accept-duplicate", "", "accept this duplicate remote job as legitimate")
	f.StringVar(&r.CancelDuplicate, "cancel-duplicate", "", "ask the provider to cancel this duplicate remote job")
	f.StringVar(&r.Note, "note", "", "why, for the ledger and the receipt")
	return cmd
}

// nextAfter says what the gateway does with a resolution.
func nextAfter(r worker.Resolution) string {
	switch {
	case r.Attach != "":
		return fmt.Sprintf("the gateway will follow remote job %s and store its result", r.Attach)
	case r.Resend:
		return "the gateway will send the call again"
	case r.Fail:
		return "the gateway will not send it again; it will reconcile the remote jobs and charges already known"
	case r.AcceptDuplicate != "":
		return fmt.Sprintf("the receipt counts duplicate remote job %s as accepted", r.AcceptDuplicate)
	default:
		return fmt.Sprintf("the gateway will ask the provider to cancel remote job %s", r.CancelDuplicate)
	}
}
