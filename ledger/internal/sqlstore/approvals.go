package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/taskgate/taskgate/ledger"
)

// approvalFor returns the newest approval for (tenant, operation ID), or nil.
// Its tool is checked by policy, so that a mismatch gets its own reason.
func (s *Store) approvalFor(ctx context.Context, q Querier, tenant, operationID, tool string) (*ledger.Approval, error) {
	a, err := scanApproval(q.QueryRow(ctx, `SELECT `+approvalColumns+` FROM approvals
		WHERE tenant = $1 AND operation_id = $2 ORDER BY (tool = $3) DESC, (revoked_at IS NULL) DESC, id DESC LIMIT 1`,
		tenant, operationID, tool))
	if err != nil {
		if errors.Is(s.drv.Interpret(err), ledger.ErrNotFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("load approval for %q: %w", operationID, err)
	}
	return a, nil
}

func (s *Store) approvalByID(ctx context.Context, q Querier, id int64) (*ledger.Approval, error) {
	a, err := scanApproval(q.QueryRow(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE id = $1`, id))
	if err != nil {
		return nil, s.notFound(err, fmt.Sprintf("approval %d", id))
	}
	return a, nil
}

// ApprovalCreate implements ledger.Store.
func (s *Store) ApprovalCreate(ctx context.Context, a *ledger.Approval) (*ledger.Approval, error) {
	switch {
	case a.Tenant == "" || a.OperationID == "" || a.Tool == "":
		return nil, errors.New("approval: tenant, operation ID and tool are required")
	case a.MaxRemoteJobs < 1:
		return nil, fmt.Errorf("approval: max remote jobs must be at least 1 (got %d)", a.MaxRemoteJobs)
	case a.MaxTotalCost.Micros < 0:
		return nil, fmt.Errorf("approval: max total cost cannot be negative (got %s)", a.MaxTotalCost)
	case a.ExpiresAt.IsZero():
		return nil, errors.New("approval: an expiry time is required")
	}
	var out *ledger.Approval
	err := s.InTx(ctx, func(tx Tx) error {
		var err error
		out, err = s.insertApproval(ctx, tx, a)
		return err
	})
	return out, err
}

// insertApproval writes a inside tx; a zero CreatedAt is the store's clock.
func (s *Store) insertApproval(ctx context.Context, tx Tx, a *ledger.Approval) (*ledger.Approval, error) {
	out, err := scanApproval(tx.QueryRow(ctx, `INSERT INTO approvals (tenant, operation_id, tool, max_cost_micros, currency,
			max_remote_jobs, retry_policy, expires_at, created_at, created_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING `+approvalColumns,
		a.Tenant, a.OperationID, a.Tool, a.MaxTotalCost.Micros, a.MaxTotalCost.Currency, a.MaxRemoteJobs, a.RetryPolicy,
		a.ExpiresAt.UTC().Truncate(time.Microsecond), s.now(a.CreatedAt), a.CreatedBy))
	if err != nil {
		return nil, fmt.Errorf("record the approval for %q: %w", a.OperationID, err)
	}
	return out, nil
}

// ApprovalList implements ledger.Store.
func (s *Store) ApprovalList(ctx context.Context, p *ledger.ApprovalListParams) ([]*ledger.Approval, error) {
	q := `SELECT ` + approvalColumns + ` FROM approvals WHERE tenant = $1`
	args := []any{p.Tenant}
	if p.OperationID != "" {
		q += ` AND operation_id = $2`
		args = append(args, p.OperationID)
	}
	if !p.IncludeRevoked {
		q += ` AND revoked_at IS NULL`
	}
	return queryAll(ctx, s.drv.Reader(), scanApproval, q+` ORDER BY id`, args...)
}

// ApprovalRevoke implements ledger.Store.
func (s *Store) ApprovalRevoke(ctx context.Context, tenant string, id int64, now time.Time) (*ledger.Approval, error) {
	var out *ledger.Approval
	err := s.InTx(ctx, func(tx Tx) error {
		var err error
		out, err = scanApproval(tx.QueryRow(ctx, `UPDATE approvals SET revoked_at = COALESCE(revoked_at, $1)
			WHERE id = $2 AND tenant = $3 RETURNING `+approvalColumns, s.now(now), id, tenant))
		if err != nil {
			return s.notFound(err, fmt.Sprintf("approval %d of tenant %q", id, tenant))
		}
		return nil
	})
	return out, err
}

// ReservationList implements ledger.Store.
func (s *Store) ReservationList(ctx context.Context, approvalRef int64) ([]*ledger.Reservation, error) {
	return queryAll(ctx, s.drv.Reader(), scanReservation,
		`SELECT `+reservationColumns+` FROM reservations WHERE approval_ref = $1 ORDER BY id`, approvalRef)
}

// ApprovalGet implements ledger.Store.
func (s *Store) ApprovalGet(ctx context.Context, id int64) (*ledger.Approval, error) {
	return s.approvalByID(ctx, s.drv.Reader(), id)
}
