package cli

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskgate/taskgate/api"
	"github.com/taskgate/taskgate/internal/inert"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/worker"
)

const (
	requestsListHint   = "taskgate approval-requests list --tenant acme"
	requestApproveHint = "taskgate approval-requests approve 7 --tenant acme --note 'checked the suite'"
	requestDeclineHint = "taskgate approval-requests decline 7 --tenant acme --note 'not this week'"
)

func (e *env) approvalRequestsCmd() *cobra.Command {
	requests := &cobra.Command{
		Use:   "approval-requests",
		Short: "List, approve and decline the calls waiting for an approval",
		Long: "A consequential call that needs an approval it does not have waits as an approval request: its\n" +
			"task waits (or a client without tasks is told to retry once it is approved), and nothing is sent.\n" +
			"Approving it creates the approval and starts the call; declining it, or letting it expire, ends\n" +
			"it with nothing started.",
	}
	requests.AddCommand(e.requestsListCmd(), e.requestApproveCmd(), e.requestDeclineCmd())
	group(requests)
	return requests
}

func (e *env) requestsListCmd() *cobra.Command {
	var (
		tenant, status string
		asJSON         bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List a tenant's approval requests, newest first (pending ones unless --status)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, requestsListHint, "tenant"); err != nil {
				return err
			}
			var statuses []ledger.ApprovalRequestStatus
			if status != "all" {
				st := ledger.ApprovalRequestStatus(status)
				if !st.Valid() {
					return &usageError{msg: fmt.Sprintf("--status %q is not pending, approved, declined, expired, cancelled or all", status), hint: requestsListHint + " --status all"}
				}
				statuses = []ledger.ApprovalRequestStatus{st}
			}
			s, err := e.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			list, err := s.ApprovalRequestList(cmd.Context(), &ledger.ApprovalRequestListParams{Tenant: tenant, Statuses: statuses})
			if err != nil {
				return fmt.Errorf("list the approval requests of tenant %q: %w", tenant, err)
			}
			now := time.Now()
			views := make([]api.ApprovalRequestView, len(list))
			for i, q := range list {
				views[i] = api.ViewApprovalRequest(q, now)
			}
			if asJSON {
				return writeJSON(e.stdout, views)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tOPERATION ID\tTOOL\tESTIMATE\tJOBS\tREQUESTED BY\tEXPIRES\tSTATUS\tDECIDED BY")
			for _, v := range views {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s %s\t%d\t%s\t%s\t%s\t%s\n", v.ID, inert.Terminal(v.OperationID), inert.Terminal(v.Tool), v.Estimate, inert.Terminal(v.Currency),
					v.RemoteJobs, inert.Terminal(dash(v.RequestedBy)), stamp(v.ExpiresAt), v.Status, inert.Terminal(dash(v.DecidedBy)))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "the tenant whose approval requests to list")
	cmd.Flags().StringVar(&status, "status", string(ledger.RequestPending), "only requests in this status: pending, approved, declined, expired, cancelled, or all")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

func (e *env) requestApproveCmd() *cobra.Command {
	var (
		tenant, note string
		terms        api.ApprovalTerms
		asJSON       bool
	)
	cmd := &cobra.Command{
		Use:   "approve ID",
		Short: "Approve a waiting call: its route is reserved against the new approval and it starts",
		Long: "approve creates the approval the request asks for and, in the same transaction, reserves the call's\n" +
			"estimate and remote jobs against it and starts the call. The terms default to the request's estimate\n" +
			"and remote jobs, lookup_then_attach and 24h; terms short of the call's route are refused.",
		Example: "  " + requestApproveHint,
		Args:    oneArg("the approval request ID", requestApproveHint),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, id, err := e.openForTenantID(cmd, args[0], requestApproveHint, tenant, "approval request", requestsListHint)
			if err != nil {
				return err
			}
			defer s.Close()
			q, err := s.ApprovalRequestGet(cmd.Context(), tenant, id)
			if err != nil {
				return tenantLookupError(err, "read", tenant, "approval request", id, requestsListHint+" --status all")
			}
			terms.OperationID, terms.Tool = q.OperationID, q.Tool
			if terms.MaxTotalCost == "" {
				terms.MaxTotalCost, terms.Currency = q.Estimate.String(), q.Estimate.Currency
			}
			if terms.MaxRemoteJobs == 0 {
				terms.MaxRemoteJobs = max(q.RemoteJobs, 1)
			}
			now := time.Now()
			approval, err := terms.Approval(tenant, now)
			var fe *api.FieldError
			if errors.As(err, &fe) {
				return &usageError{msg: approveFlag(fe.Field, "max-total-cost") + ": " + fe.Problem, hint: requestApproveHint}
			}
			if err != nil {
				return err
			}
			by := "cli:" + e.actor()
			d, err := s.ApprovalRequestDecide(cmd.Context(), &ledger.ApprovalRequestDecision{
				Tenant: tenant, ID: id, Outcome: ledger.RequestApproved, Approval: approval, By: by, Note: note,
				Enqueue: worker.Dispatch, QueueLease: api.DefaultQueueLease, Now: now,
			})
			if errors.Is(err, ledger.ErrApprovalShort) {
				return &usageError{msg: err.Error(), hint: fmt.Sprintf("taskgate approval-requests approve %d --tenant %s --max-total-cost %s --max-remote-jobs %d", id, tenant, q.Estimate, max(q.RemoteJobs, 1))}
			}
			if err != nil {
				return fmt.Errorf("approve approval request %d: %w", id, err)
			}
			if asJSON {
				av := api.ViewApproval(d.Approval, now)
				return writeJSON(e.stdout, api.ApprovalRequestDecided{ApprovalRequest: api.ViewApprovalRequest(d.Request, now), Approval: &av})
			}
			next := "it starts now"
			if d.Operation == nil {
				next = "the client's retry with the same operation ID runs"
			}
			fmt.Fprintf(e.stdout, "approval request %d (operation %s, tool %s) approved by %s as approval %d: up to %s and %d remote job(s); %s\n",
				id, inert.Terminal(q.OperationID), inert.Terminal(q.Tool), inert.Terminal(by), d.Approval.ID, d.Approval.MaxTotalCost.Display(), d.Approval.MaxRemoteJobs, next)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&tenant, "tenant", "", "the tenant the request belongs to")
	f.StringVar(&terms.MaxTotalCost, "max-total-cost", "", "the most the operation may cost in total (default: the request's estimate)")
	f.StringVar(&terms.Currency, "currency", "", "the currency of --max-total-cost (default: the estimate's)")
	f.IntVar(&terms.MaxRemoteJobs, "max-remote-jobs", 0, "how many remote jobs it may start (default: the request's)")
	f.StringVar(&terms.RetryPolicy, "retry-policy", "lookup_then_attach", "lookup_then_attach or no_automatic_resend")
	f.DurationVar(&terms.ExpiresIn, "expires-in", 24*time.Hour, "the approval expires this long from now")
	f.StringVar(&note, "note", "", "a note for the record, shown in the receipt")
	f.BoolVar(&asJSON, "json", false, "print JSON instead of text")
	return cmd
}

func (e *env) requestDeclineCmd() *cobra.Command {
	var tenant, note string
	cmd := &cobra.Command{
		Use:     "decline ID",
		Short:   "Decline a waiting call: it ends failed approval_declined, with nothing started",
		Example: "  " + requestDeclineHint,
		Args:    oneArg("the approval request ID", requestDeclineHint),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, id, err := e.openForTenantID(cmd, args[0], requestDeclineHint, tenant, "approval request", requestsListHint)
			if err != nil {
				return err
			}
			defer s.Close()
			by := "cli:" + e.actor()
			d, err := s.ApprovalRequestDecide(cmd.Context(), &ledger.ApprovalRequestDecision{
				Tenant: tenant, ID: id, Outcome: ledger.RequestDeclined, By: by, Note: note,
			})
			if err != nil {
				return tenantLookupError(err, "decline", tenant, "approval request", id, requestsListHint+" --status all")
			}
			fmt.Fprintf(e.stdout, "approval request %d (operation %s, tool %s) declined by %s; nothing was started\n",
				id, inert.Terminal(d.Request.OperationID), inert.Terminal(d.Request.Tool), inert.Terminal(by))
			return nil
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "the tenant the request belongs to")
	cmd.Flags().StringVar(&note, "note", "", "why, for the record and the agent")
	return cmd
}
