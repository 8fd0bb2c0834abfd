package cli

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskgate/taskgate/api"
	"github.com/taskgate/taskgate/internal/inert"
	"github.com/taskgate/taskgate/ledger"
)

const (
	budgetCreateHint = "taskgate budgets create --tenant acme --tool-prefix hosted_test. --max-total-cost 100.00 --max-remote-jobs 10 --period day --time-zone Europe/Berlin --expires-in 720h --note 'CI suites'"
	budgetsListHint  = "taskgate budgets list --tenant acme"
)

func (e *env) budgetsCmd() *cobra.Command {
	budgets := &cobra.Command{
		Use:   "budgets",
		Short: "Create, list, show and close budgets: spend approved in advance for many operations",
		Long: "A budget lets a tenant's agents run paid tools without asking, within what an approver set: a scope\n" +
			"(tools by name or prefix, optionally one run ID), a ceiling on total cost and on remote jobs per\n" +
			"period (a calendar day, week or month in a time zone, or none), a per-operation cap and an expiry.\n" +
			"A call to a tool with approval: required and no approval of its own runs when every open budget\n" +
			"that matches it has room for its whole route; otherwise it waits for an approver as before.",
	}
	budgets.AddCommand(e.budgetCreateCmd(), e.budgetsListCmd(), e.budgetShowCmd(), e.budgetCloseCmd())
	group(budgets)
	return budgets
}

func (e *env) budgetCreateCmd() *cobra.Command {
	var (
		tenant, expiresAt string
		terms             api.BudgetTerms
		asJSON            bool
	)
	cmd := &cobra.Command{
		Use:     "create",
		Short:   "Create a budget for a tenant's agents",
		Example: "  " + budgetCreateHint,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, budgetCreateHint, "tenant", "max-total-cost", "max-remote-jobs"); err != nil {
				return err
			}
			if err := exactlyOne(cmd, budgetCreateHint, "expires-in", "expires-at"); err != nil {
				return err
			}
			if expiresAt != "" {
				at, err := time.Parse(time.RFC3339, expiresAt)
				if err != nil {
					return &usageError{msg: fmt.Sprintf("--expires-at %q is not an RFC 3339 time", expiresAt), hint: budgetCreateHint}
				}
				terms.ExpiresAt = at
			}
			terms.CreatedBy = e.actor()
			now := time.Now()
			b, err := terms.Budget(tenant, now)
			if err != nil {
				var fe *api.FieldError
				if errors.As(err, &fe) {
					return &usageError{msg: budgetFlag(fe.Field) + ": " + fe.Problem, hint: budgetCreateHint}
				}
				return err
			}
			s, err := e.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			created, err := s.BudgetCreate(cmd.Context(), b)
			if err != nil {
				return fmt.Errorf("store the budget: %w", err)
			}
			return e.printBudget(api.ViewBudget(created, nil, now), asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&tenant, "tenant", "", "the tenant whose agents may spend within the budget")
	f.StringSliceVar(&terms.Tools, "tool", nil, "a tool the budget covers, qualified by its upstream (UPSTREAM.TOOL); repeat for more")
	f.StringVar(&terms.ToolPrefix, "tool-prefix", "", "the budget covers the tools whose qualified names start with this, e.g. hosted_test.")
	f.StringVar(&terms.RunID, "run-id", "", "the budget covers only calls that carry this run ID")
	f.StringVar(&terms.MaxTotalCost, "max-total-cost", "", "the most the covered operations may cost in a period, a decimal such as 100.00")
	f.StringVar(&terms.Currency, "currency", "USD", "the currency of the amounts")
	f.IntVar(&terms.MaxRemoteJobs, "max-remote-jobs", 0, "how many remote jobs the covered operations may start in a period")
	f.StringVar(&terms.Period, "period", "none", "none, day, week (from Monday) or month: when the ceilings renew")
	f.StringVar(&terms.TimeZone, "time-zone", "UTC", "the IANA time zone whose midnights begin the periods")
	f.StringVar(&terms.PerOperationCap, "per-operation-cap", "", "the highest estimate of a call the budget covers; unset: none")
	f.DurationVar(&terms.ExpiresIn, "expires-in", 0, "the budget expires this long from now, e.g. 720h")
	f.StringVar(&expiresAt, "expires-at", "", "the budget expires at this RFC 3339 time")
	f.StringVar(&terms.Note, "note", "", "why the budget exists, for whoever reads it later")
	f.BoolVar(&asJSON, "json", false, "print JSON instead of text")
	return cmd
}

// budgetFlag names the flag that gave a budget term.
func budgetFlag(field string) string {
	switch field {
	case "tools":
		return "--tool"
	case "budget":
		return "the budget"
	}
	return "--" + strings.ReplaceAll(field, "_", "-")
}

// printBudget prints one budget's view.
func (e *env) printBudget(v api.BudgetView, asJSON bool) error {
	if asJSON {
		return writeJSON(e.stdout, v)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "id\t%d\n", v.ID)
	fmt.Fprintf(tw, "tenant\t%s\n", inert.Terminal(v.Tenant))
	fmt.Fprintf(tw, "scope\t%s\n", inert.Terminal(budgetScope(v)))
	fmt.Fprintf(tw, "max_total_cost\t%s %s\n", v.MaxTotalCost, v.Currency)
	fmt.Fprintf(tw, "max_remote_jobs\t%d\n", v.MaxRemoteJobs)
	fmt.Fprintf(tw, "period\t%s (%s)\n", v.Period, inert.Terminal(v.TimeZone))
	fmt.Fprintf(tw, "per_operation_cap\t%s\n", dash(v.PerOperationCap))
	fmt.Fprintf(tw, "committed\t%s %s, %d remote job(s)\n", v.Committed, v.Currency, v.RemoteJobsCommitted)
	fmt.Fprintf(tw, "remaining\t%s %s, %d remote job(s)\n", v.Remaining, v.Currency, v.RemoteJobsRemaining)
	if !v.PeriodEnd.IsZero() {
		fmt.Fprintf(tw, "period_ends\t%s\n", v.PeriodEnd.Format(time.RFC3339))
	}
	fmt.Fprintf(tw, "expires_at\t%s\n", v.ExpiresAt.Format(time.RFC3339))
	fmt.Fprintf(tw, "status\t%s\n", v.Status)
	fmt.Fprintf(tw, "created_by\t%s\n", inert.Terminal(v.CreatedBy))
	if v.ClosedBy != "" {
		fmt.Fprintf(tw, "closed_by\t%s at %s\n", inert.Terminal(v.ClosedBy), stamp(v.ClosedAt))
	}
	if !v.BreachedAt.IsZero() {
		fmt.Fprintf(tw, "breached_at\t%s\n", stamp(v.BreachedAt))
	}
	fmt.Fprintf(tw, "note\t%s\n", inert.Terminal(dash(v.Note)))
	return tw.Flush()
}

// budgetScope says in a few words which calls a budget covers.
func budgetScope(v api.BudgetView) string {
	var parts []string
	switch {
	case len(v.Tools) > 0 && v.ToolPrefix != "":
		parts = append(parts, strings.Join(v.Tools, ",")+" or "+v.ToolPrefix+"*")
	case len(v.Tools) > 0:
		parts = append(parts, strings.Join(v.Tools, ","))
	case v.ToolPrefix != "":
		parts = append(parts, v.ToolPrefix+"*")
	default:
		parts = append(parts, "every tool")
	}
	if v.RunID != "" {
		parts = append(parts, "run "+v.RunID)
	}
	return strings.Join(parts, ", ")
}

func (e *env) budgetsListCmd() *cobra.Command {
	var (
		p      ledger.BudgetListParams
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List a tenant's open budgets with what their current periods have left",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, budgetsListHint, "tenant"); err != nil {
				return err
			}
			s, err := e.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			now := time.Now()
			p.Now = now
			list, err := s.BudgetList(cmd.Context(), &p)
			if err != nil {
				return fmt.Errorf("list the budgets of tenant %q: %w", p.Tenant, err)
			}
			views := make([]api.BudgetView, len(list))
			for i, b := range list {
				rs, err := s.BudgetReservationList(cmd.Context(), &ledger.BudgetReservationListParams{BudgetRef: b.ID})
				if err != nil {
					return fmt.Errorf("read the reservations of budget %d: %w", b.ID, err)
				}
				views[i] = api.ViewBudget(b, rs, now)
			}
			if asJSON {
				return writeJSON(e.stdout, views)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSCOPE\tPERIOD\tMAX TOTAL COST\tREMAINING\tJOBS LEFT\tEXPIRES\tSTATUS")
			for _, v := range views {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s %s\t%s\t%d of %d\t%s\t%s\n", v.ID, inert.Terminal(budgetScope(v)), v.Period, v.MaxTotalCost, v.Currency,
					v.Remaining, v.RemoteJobsRemaining, v.MaxRemoteJobs, stamp(v.ExpiresAt), v.Status)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&p.Tenant, "tenant", "", "the tenant whose budgets to list")
	cmd.Flags().BoolVar(&p.IncludeClosed, "all", false, "include closed and expired budgets")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

func (e *env) budgetShowCmd() *cobra.Command {
	var (
		tenant string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show a budget, what its current period has committed and what is left",
		Args:  oneArg("the budget ID", "taskgate budgets show ID --tenant acme"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, id, err := e.openForTenantID(cmd, args[0], "taskgate budgets show ID --tenant acme", tenant, "budget", "taskgate budgets list --all --tenant "+tenant)
			if err != nil {
				return err
			}
			defer s.Close()
			b, err := s.BudgetGet(cmd.Context(), tenant, id)
			if err != nil {
				return tenantLookupError(err, "read", tenant, "budget", id, "taskgate budgets list --all --tenant "+tenant)
			}
			rs, err := s.BudgetReservationList(cmd.Context(), &ledger.BudgetReservationListParams{BudgetRef: id})
			if err != nil {
				return fmt.Errorf("read the reservations of budget %d: %w", id, err)
			}
			return e.printBudget(api.ViewBudget(b, rs, time.Now()), asJSON)
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "the tenant the budget belongs to")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of text")
	return cmd
}

func (e *env) budgetCloseCmd() *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "close ID",
		Short: "Close a budget: it covers no new call, and what it holds stays reserved until settled",
		Args:  oneArg("the budget ID", "taskgate budgets close ID --tenant acme"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, id, err := e.openForTenantID(cmd, args[0], "taskgate budgets close ID --tenant acme", tenant, "budget", "taskgate budgets list --all --tenant "+tenant)
			if err != nil {
				return err
			}
			defer s.Close()
			b, err := s.BudgetClose(cmd.Context(), tenant, id, e.actor(), time.Time{})
			if err != nil {
				return tenantLookupError(err, "close", tenant, "budget", id, "taskgate budgets list --all --tenant "+tenant)
			}
			fmt.Fprintf(e.stdout, "budget %d closed at %s by %s; it covers no new call\n", b.ID, stamp(b.ClosedAt), inert.Terminal(b.ClosedBy))
			return nil
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "the tenant the budget belongs to")
	return cmd
}
