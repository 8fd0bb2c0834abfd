package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskgate/taskgate/internal/inert"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/secrets"
)

func (e *env) opsCmd() *cobra.Command {
	ops := &cobra.Command{
		Use:   "ops",
		Short: "Inspect and resolve operations in the ledger",
	}
	ops.AddCommand(e.opsListCmd(), e.opsShowCmd(), e.opsResolveCmd())
	group(ops)
	return ops
}

// states are every operation state, unfinished ones first.
func states() []ledger.State {
	return []ledger.State{
		ledger.StateAwaitingApproval, ledger.StateAccepted, ledger.StateSending, ledger.StateRunning, ledger.StateInputRequired, ledger.StateReview,
		ledger.StateCompleted, ledger.StateFailed, ledger.StateCancelled,
	}
}

// stateNames joins states for messages.
func stateNames(ss []ledger.State) string {
	names := make([]string, len(ss))
	for i, st := range ss {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}

func (e *env) opsListCmd() *cobra.Command {
	var (
		tenant string
		only   []string
		limit  int
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List operations, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			hint := "taskgate ops list --state review --limit 20"
			if limit < 1 {
				return &usageError{msg: fmt.Sprintf("--limit %d: list at least one operation", limit), hint: hint}
			}
			p := &ledger.OperationListParams{Tenant: tenant, Limit: limit}
			for _, st := range only {
				if !slices.Contains(states(), ledger.State(st)) {
					return &usageError{msg: fmt.Sprintf("--state %q is not an operation state; the states are %s", st, stateNames(states())), hint: hint}
				}
				p.States = append(p.States, ledger.State(st))
			}
			s, err := e.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			ops, err := s.OperationList(cmd.Context(), p)
			if err != nil {
				return err
			}
			if asJSON {
				views := make([]operationView, len(ops))
				for i, op := range ops {
					views[i] = viewOperation(op)
					// Arguments may hold secrets; ops show redacts them.
					views[i].Arguments = nil
				}
				return writeJSON(e.stdout, views)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "OPERATION ID\tTENANT\tTOOL\tSTATE\tTASK ID\tCREATED")
			for _, op := range ops {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", inert.Terminal(op.OperationID), inert.Terminal(op.Tenant), inert.Terminal(op.Upstream+"."+op.Tool),
					op.State, inert.Terminal(op.TaskID), stamp(op.CreatedAt))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "only this tenant's operations")
	cmd.Flags().StringSliceVar(&only, "state", nil, "only operations in these states (repeatable or comma-separated): "+stateNames(states()))
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many operations")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

func (e *env) opsShowCmd() *cobra.Command {
	var (
		tenant, archiveDir string
		asJSON             bool
	)
	cmd := &cobra.Command{
		Use:   "show OPERATION_ID|TASK_ID",
		Short: "Show one operation with its attempts, remote jobs, charges and events",
		Long: "Show one operation with its attempts, remote jobs, charges and events.\n\n" +
			"With --archive DIR it reads an archived operation (by its operation ID) from the archive instead of the ledger.",
		Args: oneArg("the operation ID or task ID", "taskgate ops show settlement-regression-842"),
		RunE: func(cmd *cobra.Command, args []string) error {
			write := func(d *detail) error {
				if asJSON {
					return writeJSON(e.stdout, d)
				}
				return d.writeText(e.stdout)
			}
			if archiveDir != "" {
				d, err := archivedDetail(archiveDir, tenant, args[0])
				if err != nil {
					return err
				}
				return write(d)
			}
			return e.withOperation(cmd.Context(), tenant, args[0], func(s ledger.Store, op *ledger.Operation) error {
				d, err := loadDetail(cmd.Context(), s, op)
				if err != nil {
					return err
				}
				return write(d)
			})
		},
	}
	operationTenantFlag(cmd, &tenant)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of text")
	cmd.Flags().StringVar(&archiveDir, "archive", "", "read the operation from this archive directory (taskgate archive --out) instead of the ledger")
	return cmd
}

// operationTenantFlag adds --tenant to a command that names one operation.
func operationTenantFlag(cmd *cobra.Command, tenant *string) {
	cmd.Flags().StringVar(tenant, "tenant", "", "the tenant the operation belongs to (needed when several tenants use the same operation ID)")
}

// withOperation opens the ledger, finds the operation that id names (see
// findOperation) and runs f with both; the ledger is closed afterwards.
func (e *env) withOperation(ctx context.Context, tenant, id string, f func(ledger.Store, *ledger.Operation) error) error {
	s, err := e.openStore(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	op, err := findOperation(ctx, s, tenant, id)
	if err != nil {
		return err
	}
	return f(s, op)
}

// findOperation resolves an operation ID or task ID, across tenants unless
// one is named, and refuses to guess between tenants. An ID that looks like
// a task ID is tried as one first, then as an operation ID, since a caller
// may choose any operation ID.
func findOperation(ctx context.Context, s ledger.Store, tenant, id string) (*ledger.Operation, error) {
	var ops []*ledger.Operation
	if strings.HasPrefix(id, "task-") {
		var err error
		if ops, err = s.OperationList(ctx, &ledger.OperationListParams{Tenant: tenant, TaskID: id, Limit: 2}); err != nil {
			return nil, err
		}
	}
	if len(ops) == 0 {
		var err error
		if ops, err = s.OperationList(ctx, &ledger.OperationListParams{Tenant: tenant, OperationID: id, Limit: 2}); err != nil {
			return nil, err
		}
	}
	switch len(ops) {
	case 0:
		if tenant != "" {
			return nil, fmt.Errorf("no operation %q for tenant %q in the ledger", id, tenant)
		}
		return nil, fmt.Errorf("no operation %q in the ledger", id)
	case 1:
		return ops[0], nil
	default:
		return nil, &usageError{
			msg:  fmt.Sprintf("operation ID %q is used by several tenants (%s, %s, …)", id, ops[0].Tenant, ops[1].Tenant),
			hint: fmt.Sprintf("taskgate ops show --tenant %s %s", inert.Shell(ops[0].Tenant), positional(id)),
		}
	}
}

// operationView is an operation as the CLI prints it in JSON.
type operationView struct {
	OperationID        string             `json:"operation_id"`
	Tenant             string             `json:"tenant"`
	TaskID             string             `json:"task_id"`
	Upstream           string             `json:"upstream"`
	Tool               string             `json:"tool"`
	Fingerprint        string             `json:"fingerprint"`
	State              ledger.State       `json:"state"`
	TaskStatus         string             `json:"task_status"`
	StatusMessage      string             `json:"status_message,omitempty"`
	ReviewReason       string             `json:"review_reason,omitempty"`
	RetryPolicy        ledger.RetryPolicy `json:"retry_policy,omitempty"`
	Approval           int64              `json:"approval,omitempty"`
	EstimatedCostUSD   string             `json:"estimated_cost_usd"`
	IntendedRemoteJobs int                `json:"intended_remote_jobs"`
	SendCount          int                `json:"send_count"`
	CostBoundaryBreach bool               `json:"flag_cost_boundary_breach"`
	Arguments          json.RawMessage    `json:"arguments,omitempty"`
	Result             json.RawMessage    `json:"result,omitempty"`
	Error              json.RawMessage    `json:"error,omitempty"`
	CreatedAt          time.Time          `json:"created_at"`
	UpdatedAt          time.Time          `json:"updated_at"`
	EndedAt            *time.Time         `json:"ended_at,omitempty"`
}

func viewOperation(op *ledger.Operation) operationView {
	v := operationView{
		OperationID: op.OperationID, Tenant: op.Tenant, TaskID: op.TaskID, Upstream: op.Upstream, Tool: op.Tool,
		Fingerprint: op.Fingerprint, State: op.State, TaskStatus: op.State.TaskStatus(), StatusMessage: op.StatusMessage,
		ReviewReason: op.ReviewReason, RetryPolicy: op.RetryPolicy, Approval: op.ApprovalID,
		EstimatedCostUSD: op.Estimate.String(), IntendedRemoteJobs: op.IntendedRemoteJobs, SendCount: op.SendCount,
		CostBoundaryBreach: op.CostBreach, Arguments: op.Arguments, Result: op.Result, Error: op.Error,
		CreatedAt: op.CreatedAt, UpdatedAt: op.UpdatedAt,
	}
	if !op.EndedAt.IsZero() {
		v.EndedAt = &op.EndedAt
	}
	return v
}

type attemptView struct {
	RequestID      string              `json:"request_id"`
	OperationID    string              `json:"operation_id"`
	Decision       ledger.Decision     `json:"decision"`
	Reason         string              `json:"reason,omitempty"`
	Source         string              `json:"source,omitempty"`
	ClientResult   ledger.ClientResult `json:"client_result"`
	RemoteAccepted ledger.Knowledge    `json:"remote_accepted"`
	RemoteEffect   ledger.Knowledge    `json:"remote_effect"`
	ChargeStatus   ledger.Knowledge    `json:"charge_status"`
	At             time.Time           `json:"at"`
	// TraceID is the trace the attempt was served in; empty when tracing
	// was off.
	TraceID string `json:"trace_id,omitempty"`
}

type remoteJobView struct {
	RemoteJobID       string               `json:"remote_job_id"`
	Upstream          string               `json:"upstream"`
	Endpoint          string               `json:"endpoint"`
	Kind              ledger.RemoteJobKind `json:"kind"`
	Status            ledger.JobStatus     `json:"status"`
	Intended          bool                 `json:"intended"`
	Duplicate         bool                 `json:"duplicate"`
	DuplicateResolved string               `json:"duplicate_resolved,omitempty"`
	EffectReversed    ledger.Knowledge     `json:"effect_reversed"`
	At                time.Time            `json:"at"`
}

type chargeView struct {
	ChargeID string              `json:"charge_id"`
	Amount   string              `json:"amount"`
	Currency string              `json:"currency"`
	Status   ledger.ChargeStatus `json:"status"`
	Kind     string              `json:"kind,omitempty"`
	Source   string              `json:"source,omitempty"`
	At       time.Time           `json:"at"`
}

type eventView struct {
	Kind ledger.EventKind `json:"kind"`
	Data json.RawMessage  `json:"data"`
	At   time.Time        `json:"at"`
}

type detail struct {
	estimate   money.Amount
	Operation  operationView   `json:"operation"`
	Attempts   []attemptView   `json:"attempts"`
	RemoteJobs []remoteJobView `json:"remote_jobs"`
	Charges    []chargeView    `json:"charges"`
	Events     []eventView     `json:"events"`
}

func loadDetail(ctx context.Context, s ledger.Store, op *ledger.Operation) (*detail, error) {
	atts, err := s.AttemptList(ctx, op.ID)
	if err != nil {
		return nil, err
	}
	jobs, err := s.RemoteJobList(ctx, op.ID)
	if err != nil {
		return nil, err
	}
	charges, err := s.ChargeList(ctx, op.ID)
	if err != nil {
		return nil, err
	}
	evs, err := s.EventList(ctx, op.ID)
	if err != nil {
		return nil, err
	}
	return newDetail(op, atts, jobs, charges, evs), nil
}

// newDetail is what ops show prints of op and what it owns, read from the
// ledger or from an archive.
func newDetail(op *ledger.Operation, atts []*ledger.Attempt, jobs []*ledger.RemoteJob, charges []*ledger.Charge, evs []*ledger.Event) *detail {
	d := &detail{estimate: op.Estimate, Operation: viewOperation(op), Attempts: []attemptView{}, RemoteJobs: []remoteJobView{}, Charges: []chargeView{}, Events: []eventView{}}
	for _, a := range atts {
		d.Attempts = append(d.Attempts, attemptView{
			RequestID: a.RequestID, OperationID: a.OperationID, Decision: a.Decision, Reason: a.Reason, Source: a.Source,
			ClientResult: a.ClientResult, RemoteAccepted: a.RemoteAccepted, RemoteEffect: a.RemoteEffect,
			ChargeStatus: a.ChargeStatus, At: a.CreatedAt, TraceID: a.TraceID(),
		})
	}
	for _, j := range jobs {
		d.RemoteJobs = append(d.RemoteJobs, remoteJobView{
			RemoteJobID: j.RemoteJobID, Upstream: j.Upstream, Endpoint: inert.URL(j.Endpoint), Kind: j.Kind, Status: j.Status,
			Intended: j.Intended, Duplicate: j.Duplicate, DuplicateResolved: j.DuplicateResolved, EffectReversed: j.EffectReversed, At: j.CreatedAt,
		})
	}
	for _, c := range charges {
		d.Charges = append(d.Charges, chargeView{ChargeID: c.ProviderChargeID, Amount: c.Amount.String(), Currency: c.Amount.Currency, Status: c.Status, Kind: c.Kind, Source: c.Source, At: c.CreatedAt})
	}
	d.Operation.Arguments = redact(op.Arguments, op.SecretArguments)
	for _, ev := range evs {
		d.Events = append(d.Events, eventView{Kind: ev.Kind, Data: ev.Data, At: ev.CreatedAt})
	}
	return d
}

// writeText prints d for a terminal. Every value from the ledger goes
// through [inert.Terminal] where it is printed: IDs, reasons, messages,
// provider IDs and event data alike.
func (d *detail) writeText(w io.Writer) error {
	op := d.Operation
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "operation\t%s\n", inert.Terminal(op.OperationID))
	fmt.Fprintf(tw, "tenant\t%s\n", inert.Terminal(op.Tenant))
	fmt.Fprintf(tw, "task\t%s (%s)\n", inert.Terminal(op.TaskID), op.TaskStatus)
	fmt.Fprintf(tw, "tool\t%s\n", inert.Terminal(op.Upstream+"."+op.Tool))
	fmt.Fprintf(tw, "state\t%s\n", op.State)
	if op.ReviewReason != "" {
		fmt.Fprintf(tw, "needs review\t%s\n", inert.Terminal(op.ReviewReason))
	}
	if op.StatusMessage != "" {
		fmt.Fprintf(tw, "status message\t%s\n", inert.Terminal(op.StatusMessage))
	}
	if op.Approval != 0 {
		fmt.Fprintf(tw, "approval\t%d\n", op.Approval)
	}
	fmt.Fprintf(tw, "estimated cost\t%s\n", d.estimate.Display())
	if op.CostBoundaryBreach {
		fmt.Fprintf(tw, "flag_cost_boundary_breach\ttrue\n")
	}
	fmt.Fprintf(tw, "fingerprint\t%s\n", op.Fingerprint)
	fmt.Fprintf(tw, "created\t%s\n", stamp(op.CreatedAt))
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(w, "\nattempts (%s)\n", attemptCounts(op.OperationID, d.Attempts))
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  REQUEST ID\tOPERATION ID\tDECISION\tREASON\tCLIENT RESULT\tREMOTE ACCEPTED\tAT\tTRACE")
	for _, a := range d.Attempts {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", inert.Terminal(a.RequestID), inert.Terminal(a.OperationID), a.Decision, inert.Terminal(dash(a.Reason)),
			a.ClientResult, a.RemoteAccepted, stamp(a.At), dash(a.TraceID))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(w, "\nremote jobs (%d)\n", len(d.RemoteJobs))
	if len(d.RemoteJobs) > 0 {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  JOB\tSTATUS\tINTENDED\tDUPLICATE\tUPSTREAM\tENDPOINT")
		for _, j := range d.RemoteJobs {
			fmt.Fprintf(tw, "  %s\t%s\t%t\t%t\t%s\t%s\n", inert.Terminal(j.RemoteJobID), j.Status, j.Intended, j.Duplicate, inert.Terminal(j.Upstream), inert.Terminal(j.Endpoint))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	fmt.Fprintf(w, "\ncharges (%d)\n", len(d.Charges))
	if len(d.Charges) > 0 {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  CHARGE\tAMOUNT\tSTATUS")
		for _, c := range d.Charges {
			status := string(c.Status)
			if c.Kind != "" {
				status += "\t" + inert.Terminal(c.Kind)
			}
			fmt.Fprintf(tw, "  %s\t%s %s\t%s\n", inert.Terminal(c.ChargeID), c.Amount, inert.Terminal(c.Currency), status)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	fmt.Fprintf(w, "\nevents (%d)\n", len(d.Events))
	for _, ev := range d.Events {
		fmt.Fprintf(w, "  %s  %-24s %s\n", stamp(ev.At), ev.Kind, inert.Terminal(string(ev.Data)))
	}
	return nil
}

// attemptCounts sums up an operation's attempts the way its receipt counts
// them: attempts under the operation ID apart from denied ones, whether
// those were denied under this operation ID or under another that repeated
// its arguments.
func attemptCounts(operationID string, atts []attemptView) string {
	var counted, deniedHere, deniedElsewhere int
	for _, a := range atts {
		switch {
		case a.Decision != ledger.DecisionDenied:
			counted++
		case a.OperationID == operationID:
			deniedHere++
		default:
			deniedElsewhere++
		}
	}
	parts := []string{fmt.Sprintf("%d under this operation ID", counted)}
	if deniedHere > 0 {
		parts = append(parts, fmt.Sprintf("%d denied under this operation ID", deniedHere))
	}
	switch deniedElsewhere {
	case 0:
	case 1:
		parts = append(parts, "1 denied under another")
	default:
		parts = append(parts, fmt.Sprintf("%d denied under others", deniedElsewhere))
	}
	if len(atts) == counted {
		return strconv.Itoa(counted)
	}
	return fmt.Sprintf("%d: %s", len(atts), strings.Join(parts, ", "))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// redact replaces the named top-level arguments' values, sealed or not,
// with [secrets.Redacted].
func redact(args json.RawMessage, secret []string) json.RawMessage {
	b, err := secrets.Erase(args, secret)
	if err != nil {
		return args
	}
	return b
}
