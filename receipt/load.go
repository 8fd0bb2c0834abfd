package receipt

import (
	"context"
	"fmt"
	"time"

	"github.com/taskgate/taskgate/ledger"
)

// LoadOptions carry what the ledger does not know about an operation. The
// zero value describes an unpriced tool, the tenant as owner, the default
// invoice grace and the current time.
type LoadOptions struct {
	// Priced says the tool's provider contract prices it. The operation
	// records whether it did at acceptance; either is enough.
	Priced bool
	// Owner follows up next actions; empty means the operation's tenant.
	Owner string
	// InvoiceGrace is how long an invoice may lag; zero means
	// DefaultInvoiceGrace.
	InvoiceGrace time.Duration
	// Now is the receipt's generation time; zero means time.Now().
	Now time.Time
}

// Load reads from s everything [Build] needs for op: its attempts
// (including denied retries pointing at it), remote jobs, charges, events,
// the approval it ran under, that approval's reservations for op and the
// approval request that gave it, with the attempts refused while that
// request waited. It only reads.
func Load(ctx context.Context, s ledger.Store, op *ledger.Operation, opts *LoadOptions) (*Input, error) {
	var o LoadOptions
	if opts != nil {
		o = *opts
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	in := &Input{Operation: op, Priced: o.Priced, Owner: o.Owner, InvoiceGrace: o.InvoiceGrace, Now: o.Now}
	var err error
	if in.Attempts, err = s.AttemptList(ctx, op.ID); err != nil {
		return nil, fmt.Errorf("load attempts of operation %q for its receipt: %w", op.OperationID, err)
	}
	if in.RemoteJobs, err = s.RemoteJobList(ctx, op.ID); err != nil {
		return nil, fmt.Errorf("load remote jobs of operation %q for its receipt: %w", op.OperationID, err)
	}
	if in.Charges, err = s.ChargeList(ctx, op.ID); err != nil {
		return nil, fmt.Errorf("load charges of operation %q for its receipt: %w", op.OperationID, err)
	}
	if in.Events, err = s.EventList(ctx, op.ID); err != nil {
		return nil, fmt.Errorf("load events of operation %q for its receipt: %w", op.OperationID, err)
	}
	in.Priced = in.Priced || op.Priced
	if op.ApprovalID == 0 {
		return in, nil
	}
	if in.Approval, err = approvalByID(ctx, s, op); err != nil {
		return nil, err
	}
	if err := loadRequest(ctx, s, op, in); err != nil {
		return nil, err
	}
	if err := loadBudgets(ctx, s, op, in); err != nil {
		return nil, err
	}
	reservations, err := s.ReservationList(ctx, op.ApprovalID)
	if err != nil {
		return nil, fmt.Errorf("load reservations of approval %d for the receipt of operation %q: %w", op.ApprovalID, op.OperationID, err)
	}
	for _, r := range reservations {
		if r.OperationRef == op.ID {
			in.Reservations = append(in.Reservations, r)
		}
	}
	return in, nil
}

// approvalByID finds the approval op ran under.
func approvalByID(ctx context.Context, s ledger.Store, op *ledger.Operation) (*ledger.Approval, error) {
	a, err := s.ApprovalGet(ctx, op.ApprovalID)
	if err != nil {
		return nil, fmt.Errorf("load approval %d for the receipt of operation %q: %w", op.ApprovalID, op.OperationID, err)
	}
	return a, nil
}

// loadRequest finds the approval request an approver approved to give op
// its approval, if any. A request of a client that cannot take a task
// names no operation (none existed while it waited): the attempts of op's
// operation ID refused from the request until op was created are op's
// too.
func loadRequest(ctx context.Context, s ledger.Store, op *ledger.Operation, in *Input) error {
	list, err := s.ApprovalRequestList(ctx, &ledger.ApprovalRequestListParams{Tenant: op.Tenant, ApprovalRef: op.ApprovalID, Limit: 1})
	if err != nil {
		return fmt.Errorf("load the approval request of approval %d for the receipt of operation %q: %w", op.ApprovalID, op.OperationID, err)
	}
	// The approval is the request's only for the operation ID it asked
	// for.
	if len(list) == 0 || list[0].OperationID != op.OperationID {
		return nil
	}
	in.ApprovalRequest = list[0]
	if in.ApprovalRequest.OperationRef != 0 {
		return nil
	}
	refused, err := s.AttemptListRefused(ctx, &ledger.RefusedAttemptListParams{
		Tenant: op.Tenant, OperationID: op.OperationID, Fingerprint: in.ApprovalRequest.Fingerprint,
		From: in.ApprovalRequest.CreatedAt, To: op.CreatedAt,
	})
	if err != nil {
		return fmt.Errorf("load the attempts refused before operation %q for its receipt: %w", op.OperationID, err)
	}
	in.Attempts = append(refused, in.Attempts...)
	return nil
}

// loadBudgets finds the budgets that covered op, and what it holds
// against each.
func loadBudgets(ctx context.Context, s ledger.Store, op *ledger.Operation, in *Input) error {
	rs, err := s.BudgetReservationList(ctx, &ledger.BudgetReservationListParams{OperationRef: op.ID})
	if err != nil {
		return fmt.Errorf("load the budget reservations of operation %q for its receipt: %w", op.OperationID, err)
	}
	for _, r := range rs {
		b, err := s.BudgetGet(ctx, op.Tenant, r.BudgetRef)
		if err != nil {
			return fmt.Errorf("load budget %d for the receipt of operation %q: %w", r.BudgetRef, op.OperationID, err)
		}
		in.Budgets = append(in.Budgets, b)
	}
	in.BudgetReservations = rs
	return nil
}
