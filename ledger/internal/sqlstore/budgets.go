package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/policy"
)

const budgetColumns = `id, tenant, tools, tool_prefix, run_id, max_cost_micros, currency, max_remote_jobs, period, time_zone,
	per_operation_cap_micros, expires_at, note, created_at, created_by, closed_at, closed_by, breached_at`

func scanBudget(r Row) (*ledger.Budget, error) {
	var (
		b              ledger.Budget
		tools          string
		micros, capMic int64
		currency       string
		jobs           int64
	)
	err := r.Scan(&b.ID, &b.Tenant, &tools, &b.ToolPrefix, &b.RunID, &micros, &currency, &jobs, &b.Period, &b.TimeZone,
		&capMic, ts{&b.ExpiresAt}, &b.Note, ts{&b.CreatedAt}, &b.CreatedBy, ts{&b.ClosedAt}, &b.ClosedBy, ts{&b.BreachedAt})
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(tools), &b.Tools); err != nil {
		return nil, fmt.Errorf("budget %d: read its tools: %w", b.ID, err)
	}
	if len(b.Tools) == 0 {
		b.Tools = nil
	}
	b.MaxTotalCost = money.FromMicros(micros, currency)
	b.MaxRemoteJobs = int(jobs)
	if capMic != 0 {
		b.PerOperationCap = money.FromMicros(capMic, currency)
	}
	return &b, nil
}

const budgetReservationColumns = `id, budget_ref, operation_ref, amount_micros, settled_micros, currency, jobs, status, created_at, updated_at`

func scanBudgetReservation(r Row) (*ledger.BudgetReservation, error) {
	var (
		v               ledger.BudgetReservation
		amount, settled int64
		currency        string
		jobs            int64
	)
	err := r.Scan(&v.ID, &v.BudgetRef, &v.OperationRef, &amount, &settled, &currency, &jobs, &v.Status, ts{&v.CreatedAt}, ts{&v.UpdatedAt})
	if err != nil {
		return nil, err
	}
	v.Amount = money.FromMicros(amount, currency)
	v.Settled = money.FromMicros(settled, currency)
	v.RemoteJobs = int(jobs)
	return &v, nil
}

const budgetEventColumns = `id, budget_ref, kind, by_credential, data, created_at`

func scanBudgetEvent(r Row) (*ledger.BudgetEvent, error) {
	var (
		e    ledger.BudgetEvent
		data string
	)
	if err := r.Scan(&e.ID, &e.BudgetRef, &e.Kind, &e.By, &data, ts{&e.CreatedAt}); err != nil {
		return nil, err
	}
	e.Data = json.RawMessage(data)
	return &e, nil
}

// BudgetCreate implements ledger.Store.
func (s *Store) BudgetCreate(ctx context.Context, b *ledger.Budget) (*ledger.Budget, error) {
	if err := policy.CheckBudget(b); err != nil {
		return nil, err
	}
	tools, err := json.Marshal(slices.Sorted(slices.Values(b.Tools)))
	if err != nil {
		return nil, fmt.Errorf("budget: encode its tools: %w", err)
	}
	if b.Tools == nil {
		tools = []byte("[]")
	}
	zone := b.TimeZone
	if b.Period == ledger.BudgetPeriodNone && zone == "" {
		zone = "UTC"
	}
	now := s.now(b.CreatedAt)
	var out *ledger.Budget
	err = s.InTx(ctx, func(tx Tx) error {
		var err error
		out, err = scanBudget(tx.QueryRow(ctx, `INSERT INTO budgets (tenant, tools, tool_prefix, run_id, max_cost_micros, currency,
				max_remote_jobs, period, time_zone, per_operation_cap_micros, expires_at, note, created_at, created_by)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING `+budgetColumns,
			b.Tenant, string(tools), b.ToolPrefix, b.RunID, b.MaxTotalCost.Micros, money.Zero(b.MaxTotalCost.Currency).Currency,
			b.MaxRemoteJobs, b.Period, zone, b.PerOperationCap.Micros, b.ExpiresAt.UTC().Truncate(time.Microsecond), b.Note, now, b.CreatedBy))
		if err != nil {
			return fmt.Errorf("record the budget: %w", err)
		}
		return s.budgetEvent(ctx, tx, out.ID, ledger.BudgetCreated, b.CreatedBy, budgetTerms(out), now)
	})
	return out, err
}

// budgetTerms is what a budget_created event keeps of the terms.
func budgetTerms(b *ledger.Budget) map[string]any {
	return map[string]any{
		"tools": b.Tools, "tool_prefix": b.ToolPrefix, "run_id": b.RunID,
		"max_total_cost": b.MaxTotalCost.String(), "currency": b.MaxTotalCost.Currency, "max_remote_jobs": b.MaxRemoteJobs,
		"period": b.Period, "time_zone": b.TimeZone, "per_operation_cap": b.PerOperationCap.String(),
		"expires_at": b.ExpiresAt.UTC().Format(time.RFC3339Nano), "note": b.Note,
	}
}

func (s *Store) budgetEvent(ctx context.Context, tx Tx, budgetRef int64, kind ledger.BudgetEventKind, by string, data any, now time.Time) error {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("encode the %s event: %w", kind, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO budget_events (budget_ref, kind, by_credential, data, created_at) VALUES ($1, $2, $3, $4, $5)`,
		budgetRef, kind, by, string(b), now); err != nil {
		return fmt.Errorf("record the %s event of budget %d: %w", kind, budgetRef, err)
	}
	return nil
}

// BudgetList implements ledger.Store.
func (s *Store) BudgetList(ctx context.Context, p *ledger.BudgetListParams) ([]*ledger.Budget, error) {
	var (
		conds []string
		args  []any
	)
	if p.Tenant != "" {
		args = append(args, p.Tenant)
		conds = append(conds, fmt.Sprintf("tenant = $%d", len(args)))
	}
	if !p.IncludeClosed {
		args = append(args, s.now(p.Now))
		conds = append(conds, fmt.Sprintf("closed_at IS NULL AND expires_at > $%d", len(args)))
	}
	q := `SELECT ` + budgetColumns + ` FROM budgets`
	if len(conds) > 0 {
		q += ` WHERE ` + strings.Join(conds, " AND ")
	}
	return queryAll(ctx, s.drv.Reader(), scanBudget, q+` ORDER BY id`, args...)
}

// BudgetGet implements ledger.Store.
func (s *Store) BudgetGet(ctx context.Context, tenant string, id int64) (*ledger.Budget, error) {
	b, err := scanBudget(s.drv.Reader().QueryRow(ctx, `SELECT `+budgetColumns+` FROM budgets WHERE id = $1 AND tenant = $2`, id, tenant))
	if err != nil {
		return nil, s.notFound(err, fmt.Sprintf("budget %d of tenant %q", id, tenant))
	}
	return b, nil
}

// BudgetClose implements ledger.Store.
func (s *Store) BudgetClose(ctx context.Context, tenant string, id int64, by string, now time.Time) (*ledger.Budget, error) {
	if by == "" {
		return nil, errors.New("budget: closing needs the approver's credential")
	}
	now = s.now(now)
	var out *ledger.Budget
	err := s.InTx(ctx, func(tx Tx) error {
		b, err := scanBudget(tx.QueryRow(ctx, `SELECT `+budgetColumns+` FROM budgets WHERE id = $1 AND tenant = $2`+s.drv.ForUpdate(), id, tenant))
		if err != nil {
			return s.notFound(err, fmt.Sprintf("budget %d of tenant %q", id, tenant))
		}
		if !b.ClosedAt.IsZero() {
			out = b // closing twice keeps the first close
			return nil
		}
		if out, err = scanBudget(tx.QueryRow(ctx, `UPDATE budgets SET closed_at = $1, closed_by = $2 WHERE id = $3 RETURNING `+budgetColumns,
			now, by, id)); err != nil {
			return fmt.Errorf("close budget %d: %w", id, err)
		}
		return s.budgetEvent(ctx, tx, id, ledger.BudgetClosed, by, struct{}{}, now)
	})
	return out, err
}

// BudgetReservationList implements ledger.Store.
func (s *Store) BudgetReservationList(ctx context.Context, p *ledger.BudgetReservationListParams) ([]*ledger.BudgetReservation, error) {
	switch {
	case p.BudgetRef != 0:
		return queryAll(ctx, s.drv.Reader(), scanBudgetReservation,
			`SELECT `+budgetReservationColumns+` FROM budget_reservations WHERE budget_ref = $1 ORDER BY id`, p.BudgetRef)
	case p.OperationRef != 0:
		return queryAll(ctx, s.drv.Reader(), scanBudgetReservation,
			`SELECT `+budgetReservationColumns+` FROM budget_reservations WHERE operation_ref = $1 ORDER BY budget_ref`, p.OperationRef)
	}
	return nil, errors.New("budget reservations: select a budget or an operation")
}

// BudgetEventList implements ledger.Store.
func (s *Store) BudgetEventList(ctx context.Context, budgetRef int64) ([]*ledger.BudgetEvent, error) {
	return queryAll(ctx, s.drv.Reader(), scanBudgetEvent,
		`SELECT `+budgetEventColumns+` FROM budget_events WHERE budget_ref = $1 ORDER BY id`, budgetRef)
}

// coverByBudgets asks policy whether the tenant's budgets cover a call that
// has no approval of its own. It locks the rows of the open budgets whose
// scope matches, one by one in ID order (every acceptance takes them in the
// same order, so two never wait on each other), and reads their
// reservations of the current period under those locks: concurrent calls
// against one budget are decided one after another, and none reserves
// what another already holds.
func (s *Store) coverByBudgets(ctx context.Context, tx Tx, p *ledger.AcceptParams, now time.Time) (policy.Cover, error) {
	call := policy.BudgetCall{Tenant: p.Tenant, Tool: p.QualifiedTool(), RunID: p.RunID,
		Route: policy.Route{RemoteJobs: p.Approval.Jobs(), Estimate: money.FromMicros(p.Approval.Estimate.Micros, currencyOf(p))}}
	open, err := queryAll(ctx, tx, scanBudget, `SELECT `+budgetColumns+` FROM budgets
		WHERE tenant = $1 AND closed_at IS NULL AND expires_at > $2 ORDER BY id`, p.Tenant, now)
	if err != nil {
		return policy.Cover{}, fmt.Errorf("read the budgets of tenant %q: %w", p.Tenant, err)
	}
	var uses []policy.BudgetUse
	for _, b := range open {
		if !policy.BudgetMatches(b, call) {
			continue
		}
		// Decide on the budget as it is once locked: it may have closed.
		locked, err := scanBudget(tx.QueryRow(ctx, `SELECT `+budgetColumns+` FROM budgets WHERE id = $1`+s.drv.ForUpdate(), b.ID))
		if err != nil {
			return policy.Cover{}, fmt.Errorf("lock budget %d: %w", b.ID, err)
		}
		u := policy.BudgetUse{Budget: locked}
		if locked.Open(now) {
			from, _, err := policy.BudgetWindow(locked, now)
			if err != nil {
				return policy.Cover{}, err
			}
			q := `SELECT ` + budgetReservationColumns + ` FROM budget_reservations WHERE budget_ref = $1 AND status <> $2`
			args := []any{locked.ID, ledger.ReservationReleased}
			if !from.IsZero() {
				q += ` AND created_at >= $3`
				args = append(args, from)
			}
			if u.Reservations, err = queryAll(ctx, tx, scanBudgetReservation, q, args...); err != nil {
				return policy.Cover{}, fmt.Errorf("read the reservations of budget %d: %w", locked.ID, err)
			}
		}
		uses = append(uses, u)
	}
	return policy.CoverByBudgets(uses, call, now), nil
}

// reserveBudgets gives operation op, which budgets cover, an approval of
// its own carrying cover's ceiling and the route's jobs, and reserves the
// route against each budget. The caller reserves it against the approval.
func (s *Store) reserveBudgets(ctx context.Context, tx Tx, p *ledger.AcceptParams, op *ledger.Operation, cover policy.Cover, now time.Time) (*ledger.Approval, error) {
	ids := make([]string, len(cover.Budgets))
	expires := cover.Budgets[0].ExpiresAt
	for i, b := range cover.Budgets {
		ids[i] = fmt.Sprint(b.ID)
		if b.ExpiresAt.Before(expires) {
			expires = b.ExpiresAt
		}
	}
	a, err := s.insertApproval(ctx, tx, &ledger.Approval{
		Tenant: p.Tenant, OperationID: p.OperationID, Tool: p.QualifiedTool(), MaxTotalCost: cover.Ceiling,
		MaxRemoteJobs: p.Approval.Jobs(), RetryPolicy: p.RetryPolicy, ExpiresAt: expires, CreatedAt: now,
		CreatedBy: ledger.BudgetApprover + strings.Join(ids, ","),
	})
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `UPDATE operations SET approval_ref = $1 WHERE id = $2`, a.ID, op.ID); err != nil {
		return nil, fmt.Errorf("bind operation %d to its approval: %w", op.ID, err)
	}
	op.ApprovalID = a.ID
	for _, b := range cover.Budgets {
		if _, err := tx.Exec(ctx, `INSERT INTO budget_reservations (budget_ref, operation_ref, amount_micros, currency, jobs, status, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $7)`,
			b.ID, op.ID, p.Approval.Estimate.Micros, currencyOf(p), p.Approval.Jobs(), ledger.ReservationHeld, now); err != nil {
			return nil, fmt.Errorf("reserve against budget %d: %w", b.ID, err)
		}
	}
	return a, nil
}

// settleBudgets makes operation op's budget reservations follow its
// approval reservation, and, once they settle, records a breach on each
// budget whose ceiling the final cost takes it over ([policy.BudgetBreach])
// and flags the operation. It returns the breach events for the
// operation's chain. The budgets are locked in ID order, as acceptance
// locks them: of operations settling at once, the last sees all.
func (s *Store) settleBudgets(ctx context.Context, tx Tx, op *ledger.Operation, r *ledger.ReservationUpdate, now time.Time) ([]ledger.EventParams, bool, error) {
	// Only a change is a settlement: a reconciliation pass that settles
	// the same final cost again breaches nothing twice.
	n, err := tx.Exec(ctx, `UPDATE budget_reservations SET status = $1, settled_micros = $2, updated_at = $3
		WHERE operation_ref = $4 AND (status <> $1 OR settled_micros <> $2)`,
		r.Status, r.Settled.Micros, now, op.ID)
	if err != nil {
		return nil, false, fmt.Errorf("update the budget reservations of operation %d: %w", op.ID, err)
	}
	if n == 0 || r.Status != ledger.ReservationSettled {
		return nil, false, nil
	}
	mine, err := queryAll(ctx, tx, scanBudgetReservation,
		`SELECT `+budgetReservationColumns+` FROM budget_reservations WHERE operation_ref = $1 ORDER BY budget_ref`, op.ID)
	if err != nil {
		return nil, false, err
	}
	var events []ledger.EventParams
	for _, m := range mine {
		b, err := scanBudget(tx.QueryRow(ctx, `SELECT `+budgetColumns+` FROM budgets WHERE id = $1`+s.drv.ForUpdate(), m.BudgetRef))
		if err != nil {
			return nil, false, fmt.Errorf("lock budget %d: %w", m.BudgetRef, err)
		}
		from, to, err := policy.BudgetWindow(b, m.CreatedAt)
		if err != nil {
			return nil, false, err
		}
		q := `SELECT ` + budgetReservationColumns + ` FROM budget_reservations WHERE budget_ref = $1`
		args := []any{b.ID}
		if !from.IsZero() {
			q += ` AND created_at >= $2 AND created_at < $3`
			args = append(args, from, to)
		}
		rs, err := queryAll(ctx, tx, scanBudgetReservation, q, args...)
		if err != nil {
			return nil, false, fmt.Errorf("read the reservations of budget %d: %w", b.ID, err)
		}
		br, err := policy.BudgetBreach(b, rs, op.ID, money.FromMicros(r.Settled.Micros, m.Amount.Currency), nil)
		if err != nil || br == nil {
			if err != nil {
				return nil, false, err
			}
			continue
		}
		data := ledger.CostBoundaryBreachData{Budget: b.ID, BudgetTotal: br.Total.String(), Ceiling: br.Ceiling.String(),
			FinalCost: br.Final.String(), OverBy: br.Over.String()}
		if br.NotComparable {
			data = ledger.CostBoundaryBreachData{Budget: b.ID, Ceiling: br.Ceiling.Display(), FinalCost: br.Final.Display(),
				Reason: "amounts_not_comparable", UncountedReservations: br.UncountedReservations}
		}
		if _, err := tx.Exec(ctx, `UPDATE budgets SET breached_at = COALESCE(breached_at, $1) WHERE id = $2`, now, b.ID); err != nil {
			return nil, false, fmt.Errorf("flag the breach of budget %d: %w", b.ID, err)
		}
		if err := s.budgetEvent(ctx, tx, b.ID, ledger.BudgetBreached, "", map[string]any{
			"operation_ref": op.ID, "operation_id": op.OperationID, "final_cost": data.FinalCost, "budget_total": data.BudgetTotal,
			"ceiling": data.Ceiling, "over_by": data.OverBy, "reason": data.Reason,
		}, now); err != nil {
			return nil, false, err
		}
		events = append(events, ledger.EventParams{Kind: ledger.EventCostBoundaryBreach, Data: data})
	}
	return events, len(events) > 0, nil
}
