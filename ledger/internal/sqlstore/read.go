package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/taskgate/taskgate/ledger"
)

// operationByKey loads the operation for (tenant, operation ID) inside tx,
// or nil when there is none.
func (s *Store) operationByKey(ctx context.Context, q Querier, tenant, operationID string) (*ledger.Operation, error) {
	op, err := scanOperation(q.QueryRow(ctx, `SELECT `+operationColumns+` FROM operations WHERE tenant = $1 AND operation_id = $2 AND NOT key_expired`, tenant, operationID))
	if err != nil {
		if errors.Is(s.drv.Interpret(err), ledger.ErrNotFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("load operation %q: %w", operationID, err)
	}
	return op, nil
}

// OperationGet implements ledger.Store.
func (s *Store) OperationGet(ctx context.Context, p *ledger.OperationGetParams) (*ledger.Operation, error) {
	var (
		where string
		args  []any
		what  string
	)
	switch {
	case p.ID != 0:
		where, args, what = "id = $1", []any{p.ID}, fmt.Sprintf("operation %d", p.ID)
	case p.Tenant != "" && p.TaskID != "":
		where, args, what = "tenant = $1 AND task_id = $2", []any{p.Tenant, p.TaskID}, fmt.Sprintf("task %q", p.TaskID)
	case p.Tenant != "" && p.OperationID != "":
		where, args, what = "tenant = $1 AND operation_id = $2 AND NOT key_expired", []any{p.Tenant, p.OperationID}, fmt.Sprintf("operation %q", p.OperationID)
	default:
		return nil, errors.New("operation get: give a row ID, or a tenant with a task ID or operation ID")
	}
	op, err := scanOperation(s.drv.Reader().QueryRow(ctx, `SELECT `+operationColumns+` FROM operations WHERE `+where, args...))
	if err != nil {
		return nil, s.notFound(err, what)
	}
	return op, nil
}

// OperationList implements ledger.Store.
func (s *Store) OperationList(ctx context.Context, p *ledger.OperationListParams) ([]*ledger.Operation, error) {
	var (
		conds []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if p.Tenant != "" {
		conds = append(conds, "tenant = "+arg(p.Tenant))
	}
	if p.OperationID != "" {
		conds = append(conds, "operation_id = "+arg(p.OperationID))
	}
	if p.TaskID != "" {
		conds = append(conds, "task_id = "+arg(p.TaskID))
	}
	if len(p.OperationIDs) > 0 {
		ph := make([]string, len(p.OperationIDs))
		for i, id := range p.OperationIDs {
			ph[i] = arg(id)
		}
		conds = append(conds, "operation_id IN ("+strings.Join(ph, ", ")+")")
	}
	// A run is what its created and attached attempts reached. The
	// indexes on run_id and session_id hold only attempts that name one;
	// the "<> ''" lets a planner use them for a parameter.
	runOf := func(column, value string) string {
		return "id IN (SELECT operation_ref FROM attempts WHERE " + column + " = " + arg(value) + " AND " + column + " <> '' AND decision IN (" +
			arg(string(ledger.DecisionCreated)) + ", " + arg(string(ledger.DecisionAttached)) + "))"
	}
	if p.RunID != "" {
		conds = append(conds, runOf("run_id", p.RunID))
	}
	if p.SessionID != "" {
		conds = append(conds, runOf("session_id", p.SessionID))
	}
	if !p.CreatedFrom.IsZero() {
		conds = append(conds, "created_at >= "+arg(p.CreatedFrom))
	}
	if !p.CreatedBefore.IsZero() {
		conds = append(conds, "created_at < "+arg(p.CreatedBefore))
	}
	if len(p.States) > 0 {
		ph := make([]string, len(p.States))
		for i, st := range p.States {
			ph[i] = arg(string(st))
		}
		conds = append(conds, "state IN ("+strings.Join(ph, ", ")+")")
	}
	if p.BeforeID > 0 {
		conds = append(conds, "id < "+arg(p.BeforeID))
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	q := `SELECT ` + operationColumns + ` FROM operations`
	if len(conds) > 0 {
		q += " WHERE " + strings.Join(conds, " AND ")
	}
	q += " ORDER BY id DESC LIMIT " + arg(limit)
	return queryAll(ctx, s.drv.Reader(), scanOperation, q, args...)
}

// AttemptList implements ledger.Store.
func (s *Store) AttemptList(ctx context.Context, operationRef int64) ([]*ledger.Attempt, error) {
	return queryAll(ctx, s.drv.Reader(), scanAttempt,
		`SELECT `+attemptColumns+` FROM attempts WHERE operation_ref = $1 OR related_ref = $1 ORDER BY id`, operationRef)
}

// AttemptListRefused implements ledger.Store.
func (s *Store) AttemptListRefused(ctx context.Context, p *ledger.RefusedAttemptListParams) ([]*ledger.Attempt, error) {
	return queryAll(ctx, s.drv.Reader(), scanAttempt, `SELECT `+attemptColumns+` FROM attempts
		WHERE tenant = $1 AND operation_id = $2 AND operation_ref IS NULL AND related_ref IS NULL
			AND fingerprint = $3 AND decision = $4 AND created_at >= $5 AND created_at <= $6 ORDER BY id`,
		p.Tenant, p.OperationID, p.Fingerprint, ledger.DecisionDenied, p.From.UTC().Truncate(time.Microsecond), p.To.UTC().Truncate(time.Microsecond))
}

// AttemptRecord implements ledger.Store.
func (s *Store) AttemptRecord(ctx context.Context, p *ledger.AttemptRecordParams) (*ledger.Attempt, error) {
	if p.RequestID == "" || p.Tenant == "" {
		return nil, errors.New("attempt record: request ID and tenant are required")
	}
	var att *ledger.Attempt
	err := s.InTx(ctx, func(tx Tx) error {
		now := s.now(p.Now)
		var err error
		att, err = s.insertAttempt(ctx, tx, &ledger.AcceptParams{
			RequestID: p.RequestID, Tenant: p.Tenant, OperationID: p.OperationID, Fingerprint: p.Fingerprint, Source: p.Source,
			RunID: p.RunID, SessionID: p.SessionID, TraceParent: p.TraceParent,
		}, 0, 0, p.Decision, p.Reason, now)
		if err != nil {
			return err
		}
		_, err = s.event(ctx, tx, 0, "", att.ID, ledger.EventDenied, ledger.DeniedData{Reason: p.Reason, RequestID: p.RequestID}, now)
		return err
	})
	return att, err
}

// EventList implements ledger.Store.
func (s *Store) EventList(ctx context.Context, operationRef int64) ([]*ledger.Event, error) {
	return queryAll(ctx, s.drv.Reader(), scanEvent,
		`SELECT `+eventColumns+` FROM events WHERE operation_ref = $1 ORDER BY id`, operationRef)
}

// RemoteJobList implements ledger.Store.
func (s *Store) RemoteJobList(ctx context.Context, operationRef int64) ([]*ledger.RemoteJob, error) {
	return queryAll(ctx, s.drv.Reader(), scanRemoteJob,
		`SELECT `+remoteJobColumns+` FROM remote_jobs WHERE operation_ref = $1 ORDER BY id`, operationRef)
}

// ChargeList implements ledger.Store.
func (s *Store) ChargeList(ctx context.Context, operationRef int64) ([]*ledger.Charge, error) {
	return queryAll(ctx, s.drv.Reader(), scanCharge,
		`SELECT `+chargeColumns+` FROM charges WHERE operation_ref = $1 ORDER BY id`, operationRef)
}

// OperationCount implements ledger.Store.
func (s *Store) OperationCount(ctx context.Context, states []ledger.State) (int, error) {
	if len(states) == 0 {
		return 0, nil
	}
	ph := make([]string, len(states))
	args := make([]any, len(states))
	for i, st := range states {
		ph[i], args[i] = fmt.Sprintf("$%d", i+1), string(st)
	}
	var n int64
	err := s.drv.Reader().QueryRow(ctx, `SELECT count(*) FROM operations WHERE state IN (`+strings.Join(ph, ", ")+`)`, args...).Scan(&n)
	return int(n), err
}
