package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/secrets"
)

const requestColumns = `id, tenant, operation_id, operation_ref, tool, arguments, fingerprint, estimate_micros, currency,
	remote_jobs, requested_by, status, created_at, expires_at, decided_at, decided_by, note, approval_ref`

func scanRequest(r Row) (*ledger.ApprovalRequest, error) {
	var (
		q        ledger.ApprovalRequest
		args     string
		micros   int64
		currency string
		jobs     int64
	)
	err := r.Scan(&q.ID, &q.Tenant, &q.OperationID, nullInt{&q.OperationRef}, &q.Tool, &args, &q.Fingerprint, &micros, &currency,
		&jobs, &q.RequestedBy, &q.Status, ts{&q.CreatedAt}, ts{&q.ExpiresAt}, ts{&q.DecidedAt}, &q.DecidedBy, &q.Note, nullInt{&q.ApprovalRef})
	if err != nil {
		return nil, err
	}
	q.Arguments = json.RawMessage(args)
	q.Estimate = money.FromMicros(micros, currency)
	q.RemoteJobs = int(jobs)
	return &q, nil
}

// insertRequest records the approval request of the call p describes,
// waiting operation opRef (0 for none), expiring RequestTTL from now.
// Its arguments keep no secret value: the operation, when there is one,
// holds the call itself.
func (s *Store) insertRequest(ctx context.Context, tx Tx, p *ledger.AcceptParams, opRef int64, now time.Time) (*ledger.ApprovalRequest, error) {
	args, err := secrets.Erase(argumentsOrEmpty(p.Arguments), p.SecretArguments)
	if err != nil {
		return nil, fmt.Errorf("redact the arguments of the approval request for %q: %w", p.OperationID, err)
	}
	req, err := scanRequest(tx.QueryRow(ctx, `INSERT INTO approval_requests (tenant, operation_id, operation_ref, tool, arguments,
			fingerprint, estimate_micros, currency, remote_jobs, requested_by, status, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING `+requestColumns,
		p.Tenant, p.OperationID, idOrNull(opRef), p.QualifiedTool(), string(args), p.Fingerprint, p.Approval.Estimate.Micros, currencyOf(p),
		p.Approval.Jobs(), p.Approval.RequestedBy, ledger.RequestPending, now, now.Add(p.Approval.RequestTTL).Truncate(time.Microsecond)))
	if err != nil {
		return nil, fmt.Errorf("record the approval request for %q: %w", p.OperationID, err)
	}
	return req, nil
}

// waitForApproval records the approval request of op, just created
// awaiting_approval, its event and the status message that says where an
// approver decides it.
func (s *Store) waitForApproval(ctx context.Context, tx Tx, p *ledger.AcceptParams, op *ledger.Operation, attemptRef int64, shortfall string, now time.Time) (*ledger.ApprovalRequest, error) {
	req, err := s.insertRequest(ctx, tx, p, op.ID, now)
	if err != nil {
		return nil, err
	}
	op.StatusMessage = budgetMessage(shortfall, waitingMessage(req))
	if _, err := tx.Exec(ctx, `UPDATE operations SET status_message = $1 WHERE id = $2`, op.StatusMessage, op.ID); err != nil {
		return nil, fmt.Errorf("record the status of operation %q: %w", p.OperationID, err)
	}
	data := ledger.ApprovalRequestData{RequestID: req.ID, RequestedBy: req.RequestedBy, ExpiresAt: req.ExpiresAt.Format(time.RFC3339)}
	head, err := s.chainHead(ctx, tx, op.ID)
	if err != nil {
		return nil, err
	}
	if _, err := s.event(ctx, tx, op.ID, head, attemptRef, ledger.EventApprovalRequested, data, now); err != nil {
		return nil, err
	}
	return req, nil
}

// waitingMessage is the status message of an operation waiting for req:
// that it waits, for which request, and where an approver decides it.
func waitingMessage(req *ledger.ApprovalRequest) string {
	return fmt.Sprintf("waiting for an approver to decide approval request %d (taskgate approval-requests approve %d, or POST /v1/approval-requests/%d/approve); nothing is sent before then, and it expires at %s",
		req.ID, req.ID, req.ID, req.ExpiresAt.UTC().Format(time.RFC3339))
}

// recordRequest names the pending request of a call whose client cannot
// take a task, recording one when there is none: a client that retries
// while it waits finds its request, not a new one each time.
func (s *Store) recordRequest(ctx context.Context, tx Tx, p *ledger.AcceptParams, now time.Time) (*ledger.ApprovalRequest, error) {
	req, err := scanRequest(tx.QueryRow(ctx, `SELECT `+requestColumns+` FROM approval_requests
		WHERE tenant = $1 AND operation_id = $2 AND fingerprint = $3 AND operation_ref IS NULL AND status = $4 AND expires_at > $5`,
		p.Tenant, p.OperationID, p.Fingerprint, ledger.RequestPending, now))
	switch err = s.drv.Interpret(err); {
	case err == nil:
		return req, nil
	case !errors.Is(err, ledger.ErrNotFound):
		return nil, fmt.Errorf("look up the approval request for %q: %w", p.OperationID, err)
	}
	// A pending request that has expired, not yet swept, gives way to the
	// new one: the index allows one pending request per call.
	if _, err := tx.Exec(ctx, `UPDATE approval_requests SET status = $1, decided_at = $2
		WHERE tenant = $3 AND operation_id = $4 AND fingerprint = $5 AND operation_ref IS NULL AND status = $6`,
		ledger.RequestExpired, now, p.Tenant, p.OperationID, p.Fingerprint, ledger.RequestPending); err != nil {
		return nil, fmt.Errorf("expire the approval request for %q: %w", p.OperationID, err)
	}
	return s.insertRequest(ctx, tx, p, 0, now)
}

// ApprovalRequestList implements ledger.Store.
func (s *Store) ApprovalRequestList(ctx context.Context, p *ledger.ApprovalRequestListParams) ([]*ledger.ApprovalRequest, error) {
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if p.Tenant != "" {
		where = append(where, "tenant = "+arg(p.Tenant))
	}
	if len(p.Statuses) > 0 {
		in := make([]string, len(p.Statuses))
		for i, st := range p.Statuses {
			in[i] = arg(st)
		}
		where = append(where, "status IN ("+strings.Join(in, ", ")+")")
	}
	if !p.ExpiredBy.IsZero() {
		where = append(where, "expires_at <= "+arg(s.now(p.ExpiredBy)))
	}
	if p.ApprovalRef != 0 {
		where = append(where, "approval_ref = "+arg(p.ApprovalRef))
	}
	if p.Tenant == "" && p.ExpiredBy.IsZero() {
		return nil, errors.New("list approval requests: a tenant is required")
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	q := `SELECT ` + requestColumns + ` FROM approval_requests WHERE ` + strings.Join(where, " AND ") + ` ORDER BY id DESC LIMIT ` + arg(limit)
	return queryAll(ctx, s.drv.Reader(), scanRequest, q, args...)
}

// ApprovalRequestGet implements ledger.Store.
func (s *Store) ApprovalRequestGet(ctx context.Context, tenant string, id int64) (*ledger.ApprovalRequest, error) {
	req, err := scanRequest(s.drv.Reader().QueryRow(ctx, `SELECT `+requestColumns+` FROM approval_requests WHERE id = $1 AND tenant = $2`, id, tenant))
	if err != nil {
		return nil, s.notFound(err, fmt.Sprintf("approval request %d", id))
	}
	return req, nil
}

// ApprovalRequestDecide implements ledger.Store. The waiting operation is
// locked first, as every transition locks it, and then the request is
// taken by a compare-and-set on its status: of two decisions, the second
// finds it decided.
func (s *Store) ApprovalRequestDecide(ctx context.Context, p *ledger.ApprovalRequestDecision) (*ledger.ApprovalRequestDecided, error) {
	switch {
	case p.Outcome == ledger.RequestApproved && p.Approval == nil:
		return nil, errors.New("approve an approval request: the approval's terms are required")
	case p.Outcome != ledger.RequestApproved && p.Outcome != ledger.RequestDeclined && p.Outcome != ledger.RequestExpired:
		return nil, fmt.Errorf("decide an approval request: %q is not approved, declined or expired", p.Outcome)
	}
	var out *ledger.ApprovalRequestDecided
	err := s.InTx(ctx, func(tx Tx) error {
		now := s.now(p.Now)
		req, err := scanRequest(tx.QueryRow(ctx, `SELECT `+requestColumns+` FROM approval_requests WHERE id = $1 AND ($2 = '' OR tenant = $2)`, p.ID, p.Tenant))
		if err != nil {
			return s.notFound(err, fmt.Sprintf("approval request %d", p.ID))
		}
		if req.OperationRef != 0 {
			if _, err := s.operationByID(ctx, tx, req.OperationRef); err != nil {
				return err
			}
		}
		expiry := "expires_at > $2"
		if p.Outcome == ledger.RequestExpired {
			expiry = "expires_at <= $2"
		}
		taken, err := scanRequest(tx.QueryRow(ctx, `UPDATE approval_requests SET status = $1, decided_at = $2, decided_by = $3, note = $4
			WHERE id = $5 AND status = $6 AND `+expiry+` RETURNING `+requestColumns,
			p.Outcome, now, p.By, p.Note, req.ID, ledger.RequestPending))
		if err != nil {
			if err = s.drv.Interpret(err); errors.Is(err, ledger.ErrNotFound) {
				return undecidable(req, p.Outcome)
			}
			return err
		}
		out = &ledger.ApprovalRequestDecided{Request: taken}
		if p.Outcome == ledger.RequestApproved {
			return s.approveRequest(ctx, tx, p, out, now)
		}
		return s.endRequest(ctx, tx, p, out, now)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// undecidable explains why req, as read before the compare-and-set, could
// not take outcome.
func undecidable(req *ledger.ApprovalRequest, outcome ledger.ApprovalRequestStatus) error {
	switch {
	case req.Status != ledger.RequestPending:
		by := ""
		if req.DecidedBy != "" {
			by = " by " + req.DecidedBy
		}
		return fmt.Errorf("approval request %d was %s%s at %s: %w", req.ID, req.Status, by, req.DecidedAt.UTC().Format(time.RFC3339), ledger.ErrRequestDecided)
	case outcome == ledger.RequestExpired:
		return fmt.Errorf("approval request %d expires only at %s: %w", req.ID, req.ExpiresAt.UTC().Format(time.RFC3339), ledger.ErrRequestDecided)
	}
	return fmt.Errorf("approval request %d expired at %s, before this decision: %w", req.ID, req.ExpiresAt.UTC().Format(time.RFC3339), ledger.ErrRequestDecided)
}

// approveRequest creates the approval and, for a waiting operation,
// reserves the request's route against it and queues the operation.
func (s *Store) approveRequest(ctx context.Context, tx Tx, p *ledger.ApprovalRequestDecision, out *ledger.ApprovalRequestDecided, now time.Time) error {
	req := out.Request
	a := *p.Approval
	a.Tenant, a.OperationID, a.Tool, a.CreatedBy, a.CreatedAt = req.Tenant, req.OperationID, req.Tool, p.By, now
	if a.RetryPolicy == "" {
		a.RetryPolicy = ledger.RetryLookupThenAttach
	}
	route := policy.Route{RemoteJobs: req.RemoteJobs, Estimate: req.Estimate}
	if v := policy.Admit(&a, req.Tool, policy.Usage{Spend: money.Zero(a.MaxTotalCost.Currency)}, route, false, now); !v.Allowed {
		return fmt.Errorf("approval request %d: %s: %w", req.ID, v.Message, ledger.ErrApprovalShort)
	}
	approval, err := s.insertApproval(ctx, tx, &a)
	if err != nil {
		return err
	}
	out.Approval = approval
	req.ApprovalRef = approval.ID
	if _, err := tx.Exec(ctx, `UPDATE approval_requests SET approval_ref = $1 WHERE id = $2`, approval.ID, req.ID); err != nil {
		return fmt.Errorf("record the approval of request %d: %w", req.ID, err)
	}
	if req.OperationRef == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `INSERT INTO reservations (approval_ref, operation_ref, amount_micros, currency, jobs, status, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $7)`,
		approval.ID, req.OperationRef, req.Estimate.Micros, req.Estimate.Currency, max(req.RemoteJobs, 1), ledger.ReservationHeld, now); err != nil {
		return fmt.Errorf("reserve against approval %d: %w", approval.ID, err)
	}
	if _, err := tx.Exec(ctx, `UPDATE operations SET approval_ref = $1 WHERE id = $2`, approval.ID, req.OperationRef); err != nil {
		return fmt.Errorf("bind operation %q to approval %d: %w", req.OperationID, approval.ID, err)
	}
	t := &ledger.TransitionParams{
		OperationRef: req.OperationRef, From: []ledger.State{ledger.StateAwaitingApproval}, To: ledger.StateAccepted,
		StatusMessage: new(""), Now: now,
		Events: []ledger.EventParams{{Kind: ledger.EventApprovalRequestApproved, Data: ledger.ApprovalRequestData{
			RequestID: req.ID, ApprovalID: approval.ID, Approver: p.By, Note: p.Note}}},
	}
	// The dispatch job queued here holds the operation until a worker
	// claims it, as an acceptance's does.
	if p.Enqueue != nil {
		op, err := s.operationByID(ctx, tx, req.OperationRef)
		if err != nil {
			return err
		}
		op.ApprovalID = approval.ID
		t.Enqueue = p.Enqueue(op)
		if p.QueueLease > 0 {
			t.Lease = &ledger.Lease{Owner: ledger.LeaseQueued, Until: now.Add(p.QueueLease).Truncate(time.Microsecond)}
		}
	}
	out.Operation, err = s.transition(ctx, tx, t)
	return err
}

// endRequest ends a declined or expired request's waiting operation
// failed, with a reason a model can act on; nothing was started.
func (s *Store) endRequest(ctx context.Context, tx Tx, p *ledger.ApprovalRequestDecision, out *ledger.ApprovalRequestDecided, now time.Time) error {
	req := out.Request
	if req.OperationRef == 0 {
		return nil
	}
	kind, reason := ledger.EventApprovalRequestDeclined, ledger.ReasonApprovalDeclined
	msg := fmt.Sprintf("an approver declined approval request %d for %s, so nothing was started; do not retry this work unless the user asks for it again", req.ID, req.Tool)
	if p.Note != "" {
		msg += " (the approver's note: " + p.Note + ")"
	}
	if p.Outcome == ledger.RequestExpired {
		kind, reason = ledger.EventApprovalRequestExpired, ledger.ReasonApprovalRequestExpired
		msg = fmt.Sprintf("approval request %d for %s expired at %s before an approver decided it, so nothing was started; to ask again, call the tool with a new operation ID",
			req.ID, req.Tool, req.ExpiresAt.UTC().Format(time.RFC3339))
	}
	rpcErr, err := json.Marshal(map[string]any{"code": -32602, "message": msg, "data": map[string]any{
		"reason": reason, "operation_id": req.OperationID, "approval_request": req.ID}})
	if err != nil {
		return err
	}
	out.Operation, err = s.transition(ctx, tx, &ledger.TransitionParams{
		OperationRef: req.OperationRef, From: []ledger.State{ledger.StateAwaitingApproval}, To: ledger.StateFailed,
		StatusMessage: &msg, Error: rpcErr, Now: now,
		Events: []ledger.EventParams{{Kind: kind, Data: ledger.ApprovalRequestData{RequestID: req.ID, Approver: p.By, Note: p.Note}}},
	})
	return err
}
