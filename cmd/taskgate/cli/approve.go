package cli

import (
	"errors"
	"fmt"
	"os/user"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskgate/taskgate/api"
	"github.com/taskgate/taskgate/internal/inert"
	"github.com/taskgate/taskgate/ledger"
)

// approveHint is a complete approve command to copy from.
const approveHint = "taskgate approve --tenant acme --operation-id settlement-regression-842 --tool hosted_test.run_suite --max-total-cost 20.00 --max-remote-jobs 1 --expires-in 24h"

// approveFlag names the flag that sets an approval term, so that a bad
// term is reported under the name the user typed: ceiling is the flag that
// gave max_total_cost, which may be its deprecated name.
func approveFlag(field, ceiling string) string {
	if field == "max_total_cost" {
		return "--" + ceiling
	}
	return "--" + strings.ReplaceAll(field, "_", "-")
}

func (e *env) approveCmd() *cobra.Command {
	var (
		tenant    string
		terms     api.ApprovalTerms
		expiresAt string
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:   "approve",
		Short: "Approve an operation: a tool, a spend ceiling, a remote-job limit, a retry policy and an expiry",
		Long: "approve records what a human approved for one operation ID: the tool it may call, the most it may\n" +
			"cost in total, how many remote jobs it may start, how a lost send may be retried, and until when.\n" +
			"Amounts are decimals such as 20.00, never exponents.",
		Example: "  " + approveHint,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ceiling := "max-total-cost"
			if cmd.Flags().Changed("max-cost") {
				if cmd.Flags().Changed("max-total-cost") {
					return &usageError{msg: "--max-cost is the deprecated name of --max-total-cost; give only --max-total-cost", hint: approveHint}
				}
				ceiling = "max-cost"
			}
			if err := requireFlags(cmd, approveHint, "tenant", "operation-id", "tool", ceiling, "max-remote-jobs"); err != nil {
				return err
			}
			if err := exactlyOne(cmd, approveHint, "expires-in", "expires-at"); err != nil {
				return err
			}
			if expiresAt != "" {
				at, err := time.Parse(time.RFC3339, expiresAt)
				if err != nil {
					return &usageError{msg: fmt.Sprintf("--expires-at %q is not an RFC 3339 time", expiresAt), hint: strings.Replace(approveHint, "--expires-in 24h", "--expires-at 2026-09-01T12:00:00Z", 1)}
				}
				terms.ExpiresAt = at
			}
			terms.CreatedBy = e.actor()
			now := time.Now()
			approval, err := terms.Approval(tenant, now)
			if err != nil {
				var fe *api.FieldError
				if errors.As(err, &fe) {
					return &usageError{msg: approveFlag(fe.Field, ceiling) + ": " + fe.Problem, hint: approveHint}
				}
				return err
			}
			s, err := e.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			created, err := s.ApprovalCreate(cmd.Context(), approval)
			if err != nil {
				return fmt.Errorf("store the approval: %w", err)
			}
			v := api.ViewApproval(created, now)
			if asJSON {
				return writeJSON(e.stdout, v)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "id\t%d\n", v.ID)
			fmt.Fprintf(tw, "tenant\t%s\n", inert.Terminal(v.Tenant))
			fmt.Fprintf(tw, "operation_id\t%s\n", inert.Terminal(v.OperationID))
			fmt.Fprintf(tw, "tool\t%s\n", inert.Terminal(v.Tool))
			fmt.Fprintf(tw, "max_total_cost\t%s %s\n", v.MaxTotalCost, v.Currency)
			fmt.Fprintf(tw, "max_remote_jobs\t%d\n", v.MaxRemoteJobs)
			fmt.Fprintf(tw, "retry_policy\t%s\n", v.RetryPolicy)
			fmt.Fprintf(tw, "expires_at\t%s\n", v.ExpiresAt.Format(time.RFC3339))
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&tenant, "tenant", "", "the tenant whose agent will run the operation")
	f.StringVar(&terms.OperationID, "operation-id", "", "the operation ID the agent will call the tool with")
	f.StringVar(&terms.Tool, "tool", "", "the tool, qualified by its upstream: UPSTREAM.TOOL")
	f.StringVar(&terms.MaxTotalCost, "max-total-cost", "", "the most the operation may cost in total, a decimal such as 20.00")
	f.StringVar(&terms.MaxTotalCost, "max-cost", "", "the old name of --max-total-cost")
	_ = f.MarkDeprecated("max-cost", "use --max-total-cost; --max-cost will be removed in the next release")
	// The flag library writes the deprecation notice to the flag set's
	// output, which cobra would copy to stdout, into --json's answer.
	f.SetOutput(e.stderr)
	f.StringVar(&terms.Currency, "currency", "USD", "the currency of --max-total-cost")
	f.IntVar(&terms.MaxRemoteJobs, "max-remote-jobs", 0, "how many remote jobs the operation may start")
	f.StringVar(&terms.RetryPolicy, "retry-policy", "lookup_then_attach", "lookup_then_attach or no_automatic_resend")
	f.DurationVar(&terms.ExpiresIn, "expires-in", 0, "the approval expires this long from now, e.g. 24h")
	f.StringVar(&expiresAt, "expires-at", "", "the approval expires at this RFC 3339 time")
	f.BoolVar(&asJSON, "json", false, "print JSON instead of text")
	return cmd
}

func (e *env) approvalsCmd() *cobra.Command {
	approvals := &cobra.Command{
		Use:   "approvals",
		Short: "List and revoke approvals",
	}
	approvals.AddCommand(e.approvalsListCmd(), e.approvalsRevokeCmd())
	group(approvals)
	return approvals
}

func (e *env) approvalsListCmd() *cobra.Command {
	var (
		p      ledger.ApprovalListParams
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List a tenant's approvals, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, "taskgate approvals list --tenant acme", "tenant"); err != nil {
				return err
			}
			s, err := e.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			list, err := s.ApprovalList(cmd.Context(), &p)
			if err != nil {
				return fmt.Errorf("list approvals of tenant %q: %w", p.Tenant, err)
			}
			now := time.Now()
			views := make([]api.ApprovalView, len(list))
			for i, a := range list {
				views[i] = api.ViewApproval(a, now)
			}
			if asJSON {
				return writeJSON(e.stdout, views)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tOPERATION ID\tTOOL\tMAX TOTAL COST\tMAX JOBS\tRETRY POLICY\tEXPIRES\tSTATUS")
			for _, v := range views {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s %s\t%d\t%s\t%s\t%s\n", v.ID, inert.Terminal(v.OperationID), inert.Terminal(v.Tool), v.MaxTotalCost, inert.Terminal(v.Currency),
					v.MaxRemoteJobs, inert.Terminal(string(v.RetryPolicy)), stamp(v.ExpiresAt), v.Status)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&p.Tenant, "tenant", "", "the tenant whose approvals to list")
	cmd.Flags().StringVar(&p.OperationID, "operation-id", "", "only approvals for this operation ID")
	cmd.Flags().BoolVar(&p.IncludeRevoked, "all", false, "include revoked approvals")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

func (e *env) approvalsRevokeCmd() *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke an approval: it covers no new work from now on",
		Args:  oneArg("the approval ID", "taskgate approvals revoke ID --tenant acme"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, id, err := e.openForTenantID(cmd, args[0], "taskgate approvals revoke ID --tenant acme", tenant, "approval", "taskgate approvals list --tenant "+tenant)
			if err != nil {
				return err
			}
			defer s.Close()
			a, err := s.ApprovalRevoke(cmd.Context(), tenant, id, time.Time{})
			if err != nil {
				return tenantLookupError(err, "revoke", tenant, "approval", id, "taskgate approvals list --all --tenant "+tenant)
			}
			fmt.Fprintf(e.stdout, "approval %d (operation %s, tool %s) revoked at %s; it covers no new work\n",
				a.ID, inert.Terminal(a.OperationID), inert.Terminal(a.Tool), stamp(a.RevokedAt))
			return nil
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "the tenant the approval belongs to")
	return cmd
}

// requireFlags is a usage error naming every listed flag that was not
// given, or was given an empty value; hint is a complete command to copy
// openForTenantID starts a command about one of a tenant's things: it
// requires --tenant (usage is the command as it should be written), reads
// the ID argument of noun, with listHint saying where IDs are listed, and
// opens the ledger, which the caller closes.
func (e *env) openForTenantID(cmd *cobra.Command, arg, usage, tenant, noun, listHint string) (ledger.Store, int64, error) {
	if err := requireFlags(cmd, usage, "tenant"); err != nil {
		return nil, 0, err
	}
	id, err := idArg(arg, noun, listHint)
	if err != nil {
		return nil, 0, err
	}
	s, err := e.openStore(cmd.Context())
	if err != nil {
		return nil, 0, err
	}
	return s, id, nil
}

// idArg reads the positive ID argument of a command about one noun
// ("budget", "approval request"); hint says where to find IDs.
func idArg(arg, noun, hint string) (int64, error) {
	id, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || id <= 0 {
		return 0, &usageError{msg: fmt.Sprintf("%s ID %q is not a positive number", noun, arg), hint: hint}
	}
	return id, nil
}

// tenantLookupError is err from doing something ("read", "close") to the
// tenant's noun id: a usage error saying the tenant has none such when the
// ledger found none, with hint saying where to look, else err wrapped.
func tenantLookupError(err error, doing, tenant, noun string, id int64, hint string) error {
	if errors.Is(err, ledger.ErrNotFound) {
		return &usageError{msg: fmt.Sprintf("tenant %q has no %s %d", tenant, noun, id), hint: hint}
	}
	return fmt.Errorf("%s %s %d: %w", doing, noun, id, err)
}

// from.
func requireFlags(cmd *cobra.Command, hint string, names ...string) error {
	var missing []string
	for _, n := range names {
		if !cmd.Flags().Changed(n) {
			missing = append(missing, "--"+n)
		}
	}
	for _, n := range names {
		if f := cmd.Flags().Lookup(n); cmd.Flags().Changed(n) && strings.TrimSpace(f.Value.String()) == "" {
			return &usageError{msg: fmt.Sprintf("--%s is empty; give it a value", n), hint: hint}
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return &usageError{msg: fmt.Sprintf("%s is required", missing[0]), hint: hint}
	default:
		return &usageError{msg: fmt.Sprintf("%s are required", strings.Join(missing, ", ")), hint: hint}
	}
}

// exactlyOne is a usage error unless exactly one of the listed flags was
// given.
func exactlyOne(cmd *cobra.Command, hint string, names ...string) error {
	var given []string
	for _, n := range names {
		if cmd.Flags().Changed(n) {
			given = append(given, "--"+n)
		}
	}
	if len(given) == 1 {
		return nil
	}
	all := "--" + strings.Join(names, ", --")
	if len(given) == 0 {
		return &usageError{msg: fmt.Sprintf("one of %s is required", all), hint: hint}
	}
	return &usageError{msg: fmt.Sprintf("%s cannot be combined; give exactly one of %s", strings.Join(given, " and "), all), hint: hint}
}

// oneArg accepts exactly one argument, named what; anything else is a
// usage error with hint.
func oneArg(what, hint string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) == 1 {
			return nil
		}
		return &usageError{msg: fmt.Sprintf("expected one argument, %s; got %d", what, len(args)), hint: hint}
	}
}

// actor names the human at the keyboard for the ledger: the OS user, else
// $USER, else "cli".
func (e *env) actor() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := e.getenv("USER"); u != "" {
		return u
	}
	return "cli"
}
