package sqlstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/secrets"
)

// LeaseClaim implements ledger.Store.
func (s *Store) LeaseClaim(ctx context.Context, opRef int64, owner string, until time.Time) (*ledger.Operation, error) {
	var op *ledger.Operation
	err := s.InTx(ctx, func(tx Tx) error {
		now := s.now(time.Time{})
		var err error
		op, err = scanOperation(tx.QueryRow(ctx, `UPDATE operations SET lease_owner = $1, lease_until = $2, updated_at = $3
			WHERE id = $4 AND (lease_owner IN ('', $5, $1) OR lease_until IS NULL OR lease_until < $3)
			RETURNING `+operationColumns, owner, s.now(until), now, opRef, ledger.LeaseQueued))
		if err == nil {
			return nil
		}
		if !errors.Is(s.drv.Interpret(err), ledger.ErrNotFound) {
			return err
		}
		if _, err := s.operationByID(ctx, tx, opRef); err != nil {
			return err
		}
		return fmt.Errorf("operation %d: %w", opRef, ledger.ErrLeaseHeld)
	})
	return op, err
}

// LeaseExtend implements ledger.Store.
func (s *Store) LeaseExtend(ctx context.Context, opRef int64, owner string, until time.Time) error {
	return s.InTx(ctx, func(tx Tx) error {
		n, err := tx.Exec(ctx, `UPDATE operations SET lease_until = $1 WHERE id = $2 AND lease_owner = $3`, s.now(until), opRef, owner)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("operation %d: %w", opRef, ledger.ErrLeaseHeld)
		}
		return nil
	})
}

func (s *Store) operationByID(ctx context.Context, q Querier, opRef int64) (*ledger.Operation, error) {
	op, err := scanOperation(q.QueryRow(ctx, `SELECT `+operationColumns+` FROM operations WHERE id = $1`+s.drv.ForUpdate(), opRef))
	if err != nil {
		return nil, s.notFound(err, fmt.Sprintf("operation %d", opRef))
	}
	return op, nil
}

// sameRound reports whether op's question round is w's. The columns hold
// the JSON as it was written, so what a reader got back compares byte for
// byte; empty and NULL are alike.
func sameRound(op *ledger.Operation, w *ledger.InputUpdate) bool {
	return bytes.Equal(op.InputRequests, w.Requests) && op.RequestState == w.RequestState && bytes.Equal(op.InputResponses, w.Responses)
}

// Transition implements ledger.Store.
func (s *Store) Transition(ctx context.Context, p *ledger.TransitionParams) (*ledger.Operation, error) {
	var out *ledger.Operation
	err := s.InTx(ctx, func(tx Tx) error {
		var err error
		out, err = s.transition(ctx, tx, p)
		return err
	})
	return out, err
}

func (s *Store) transition(ctx context.Context, tx Tx, p *ledger.TransitionParams) (*ledger.Operation, error) {
	now := s.now(p.Now)
	op, err := s.operationByID(ctx, tx, p.OperationRef)
	if err != nil {
		return nil, err
	}
	if len(p.From) > 0 && !slices.Contains(p.From, op.State) {
		return nil, fmt.Errorf("operation %d is %s, not %v: %w", op.ID, op.State, p.From, ledger.ErrStateChanged)
	}
	if p.Owner != "" && op.LeaseOwner != p.Owner {
		return nil, fmt.Errorf("operation %d is leased to %q: %w", op.ID, op.LeaseOwner, ledger.ErrLeaseHeld)
	}
	if p.RequireLeaseLapsed && !op.LeaseUntil.IsZero() && op.LeaseUntil.After(now) {
		return nil, fmt.Errorf("operation %d lease runs until %s: %w", op.ID, op.LeaseUntil.Format(time.RFC3339Nano), ledger.ErrStateChanged)
	}
	if p.CancelOnce {
		// The operation's row is locked (or the database serialises
		// writers): no other request can be recorded between this read
		// and this transaction's own.
		var n int
		if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM events WHERE operation_ref = $1 AND kind = $2`, op.ID, string(ledger.EventCancellationRequested)).Scan(&n); err != nil {
			return nil, fmt.Errorf("read the cancellation requests of operation %d: %w", op.ID, err)
		}
		if n > 0 {
			return nil, fmt.Errorf("operation %d: %w", op.ID, ledger.ErrCancelRequested)
		}
	}
	if w := p.InputWas; w != nil && !sameRound(op, w) {
		return nil, fmt.Errorf("operation %d's question round changed since it was read: %w", op.ID, ledger.ErrStateChanged)
	}

	var (
		sets []string
		args []any
	)
	set := func(col string, v any) {
		args = append(args, v)
		sets = append(sets, fmt.Sprintf("%s = $%d", col, len(args)))
	}
	set("updated_at", now)
	if p.To != "" && p.To != op.State {
		if op.State.Terminal() {
			return nil, fmt.Errorf("operation %d already ended %s and cannot become %s: %w (%w)", op.ID, op.State, p.To, ledger.ErrStateChanged, ledger.ErrIllegalTransition)
		}
		if !op.State.CanBecome(p.To) {
			return nil, fmt.Errorf("operation %d cannot go from %s to %s: %w", op.ID, op.State, p.To, ledger.ErrIllegalTransition)
		}
		if p.To == ledger.StateInputRequired && (p.Input == nil || len(p.Input.Requests) == 0) {
			return nil, fmt.Errorf("operation %d cannot become input_required without the question it waits on: %w", op.ID, ledger.ErrIllegalTransition)
		}
		set("state", p.To)
		if op.State == ledger.StateAwaitingApproval && p.To == ledger.StateCancelled {
			// The request dies with the operation it was for.
			if _, err := tx.Exec(ctx, `UPDATE approval_requests SET status = $1, decided_at = $2 WHERE operation_ref = $3 AND status = $4`,
				ledger.RequestCancelled, now, op.ID, ledger.RequestPending); err != nil {
				return nil, fmt.Errorf("cancel the approval request of operation %d: %w", op.ID, err)
			}
		}
		if p.To.Terminal() {
			set("ended_at", now)
		}
		if p.To != ledger.StateReview && op.ReviewReason != "" && p.ReviewReason == nil {
			set("review_reason", "")
		}
	}
	if p.StatusMessage != nil && (p.StatusMessageWas == nil || op.StatusMessage == *p.StatusMessageWas) {
		set("status_message", *p.StatusMessage)
	}
	if p.ReviewReason != nil {
		set("review_reason", *p.ReviewReason)
	}
	if len(p.Result) > 0 {
		set("result", string(p.Result))
	}
	if len(p.Error) > 0 {
		set("error", string(p.Error))
	}
	if p.IncrementSend {
		sets = append(sets, "send_count = send_count + 1")
	}
	if p.Lease != nil {
		set("lease_owner", p.Lease.Owner)
		set("lease_until", p.Lease.Until)
	}
	if p.CancelRequested && op.CancelRequestedAt.IsZero() {
		set("cancel_requested_at", now)
	}
	if p.CostBreach {
		set("cost_breach", true)
	}
	if p.ExpireKey {
		set("key_expired", true)
	}
	if p.EraseSecrets {
		if ended := p.To.Terminal() || (p.To == "" && op.State.Terminal()); !ended {
			return nil, fmt.Errorf("operation %d is %s and may still need its secret arguments: %w", op.ID, op.State, ledger.ErrStateChanged)
		}
		if op.SecretsAtRest.Held() {
			erased, err := secrets.Erase(op.Arguments, op.SecretArguments)
			if err != nil {
				return nil, fmt.Errorf("erase the secret arguments of operation %d: %w", op.ID, err)
			}
			set("arguments", string(erased))
			set("secrets_at_rest", ledger.SecretsErased)
		}
	}
	if in := p.Input; in != nil {
		if len(in.Requests) > 0 && p.To != ledger.StateInputRequired && (p.To != "" || op.State != ledger.StateInputRequired) {
			return nil, fmt.Errorf("operation %d: input requests are kept only while it is input_required: %w", op.ID, ledger.ErrIllegalTransition)
		}
		set("input_requests", jsonOrNull(in.Requests))
		set("request_state", in.RequestState)
		set("input_responses", jsonOrNull(in.Responses))
	}
	args = append(args, op.ID)
	if _, err := tx.Exec(ctx, `UPDATE operations SET `+strings.Join(sets, ", ")+fmt.Sprintf(` WHERE id = $%d`, len(args)), args...); err != nil {
		return nil, fmt.Errorf("update operation %d: %w", op.ID, err)
	}

	for _, j := range p.RemoteJobs {
		if err := s.upsertRemoteJob(ctx, tx, op, j, now); err != nil {
			return nil, err
		}
	}
	for _, c := range p.Charges {
		if err := s.upsertCharge(ctx, tx, op, c, now); err != nil {
			return nil, err
		}
	}
	if k := p.Creator; k != nil {
		if _, err := tx.Exec(ctx, `UPDATE attempts SET
				remote_accepted = CASE WHEN $1 = '' THEN remote_accepted ELSE $1 END,
				remote_effect = CASE WHEN $2 = '' THEN remote_effect ELSE $2 END,
				charge_status = CASE WHEN $3 = '' THEN charge_status ELSE $3 END,
				updated_at = $4
			WHERE operation_ref = $5 AND decision = $6`,
			string(k.RemoteAccepted), string(k.RemoteEffect), string(k.ChargeStatus), now, op.ID, ledger.DecisionCreated); err != nil {
			return nil, fmt.Errorf("update attempt knowledge: %w", err)
		}
	}
	events := p.Events
	if r := p.Reservation; r != nil {
		if _, err := tx.Exec(ctx, `UPDATE reservations SET status = $1, settled_micros = $2, updated_at = $3 WHERE operation_ref = $4`,
			r.Status, r.Settled.Micros, now, op.ID); err != nil {
			return nil, fmt.Errorf("update reservation: %w", err)
		}
		breaches, breached, err := s.settleBudgets(ctx, tx, op, r, now)
		if err != nil {
			return nil, err
		}
		if breached && !p.CostBreach {
			if _, err := tx.Exec(ctx, `UPDATE operations SET cost_breach = $1 WHERE id = $2`, true, op.ID); err != nil {
				return nil, fmt.Errorf("flag the cost breach of operation %d: %w", op.ID, err)
			}
		}
		events = append(slices.Clip(events), breaches...)
	}
	// op was read under its row lock: its head is the chain's.
	head := op.ChainHead
	for _, e := range events {
		if head, err = s.event(ctx, tx, op.ID, head, e.AttemptRef, e.Kind, e.Data, now); err != nil {
			return nil, err
		}
	}
	if err := enqueue(ctx, tx, p.Enqueue); err != nil {
		return nil, fmt.Errorf("enqueue jobs for operation %d: %w", op.ID, err)
	}
	return s.operationByID(ctx, tx, op.ID)
}

func (s *Store) upsertRemoteJob(ctx context.Context, tx Tx, op *ledger.Operation, j *ledger.RemoteJobUpsert, now time.Time) error {
	if j.RemoteJobID == "" || j.Upstream == "" {
		return errors.New("remote job: upstream and remote ID are required")
	}
	if j.RenameFrom != "" && j.RenameFrom != j.RemoteJobID {
		if _, err := tx.Exec(ctx, `UPDATE remote_jobs SET remote_id = $1, updated_at = $2
			WHERE operation_ref = $3 AND upstream = $4 AND remote_id = $5
			AND NOT EXISTS (SELECT 1 FROM remote_jobs WHERE operation_ref = $3 AND upstream = $4 AND remote_id = $1)`,
			j.RemoteJobID, now, op.ID, j.Upstream, j.RenameFrom); err != nil {
			return fmt.Errorf("re-key remote job %s: %w", j.RenameFrom, err)
		}
	}
	var intended, duplicate any
	if j.Intended != nil {
		intended = *j.Intended
	}
	if j.Duplicate != nil {
		duplicate = *j.Duplicate
	}
	var cancelAt any
	if j.CancelRequested {
		cancelAt = now
	}
	_, err := tx.Exec(ctx, `INSERT INTO remote_jobs (operation_ref, attempt_ref, upstream, endpoint, remote_id, upstream_task_id, kind, status,
			intended, duplicate, duplicate_resolved, result, cancel_requested_at, effect_reversed, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, COALESCE($9, false), COALESCE($10, false), $11, $12, $13, $14, $15, $15)
		ON CONFLICT (operation_ref, upstream, remote_id) DO UPDATE SET
			attempt_ref = COALESCE(remote_jobs.attempt_ref, excluded.attempt_ref),
			endpoint = CASE WHEN excluded.endpoint = '' THEN remote_jobs.endpoint ELSE excluded.endpoint END,
			upstream_task_id = CASE WHEN excluded.upstream_task_id = '' THEN remote_jobs.upstream_task_id ELSE excluded.upstream_task_id END,
			kind = CASE WHEN excluded.kind = '' THEN remote_jobs.kind ELSE excluded.kind END,
			status = CASE WHEN excluded.status = '' OR remote_jobs.status IN ('completed', 'failed', 'cancelled') THEN remote_jobs.status ELSE excluded.status END,
			intended = CASE WHEN $9 IS NULL THEN remote_jobs.intended ELSE excluded.intended END,
			duplicate = CASE WHEN $10 IS NULL THEN remote_jobs.duplicate ELSE excluded.duplicate END,
			duplicate_resolved = CASE WHEN excluded.duplicate_resolved = '' THEN remote_jobs.duplicate_resolved ELSE excluded.duplicate_resolved END,
			result = COALESCE(excluded.result, remote_jobs.result),
			cancel_requested_at = COALESCE(remote_jobs.cancel_requested_at, excluded.cancel_requested_at),
			effect_reversed = CASE WHEN excluded.effect_reversed = 'unknown' THEN remote_jobs.effect_reversed ELSE excluded.effect_reversed END,
			updated_at = excluded.updated_at`,
		op.ID, idOrNull(j.AttemptRef), j.Upstream, j.Endpoint, j.RemoteJobID, j.UpstreamTaskID, j.Kind, string(j.Status),
		intended, duplicate, j.DuplicateResolved, jsonOrNull(j.Result), cancelAt, knowledgeOrUnknown(j.EffectReversed), now)
	if err != nil {
		return fmt.Errorf("record remote job %s: %w", j.RemoteJobID, err)
	}
	return nil
}

func knowledgeOrUnknown(k ledger.Knowledge) string {
	if k == "" {
		return string(ledger.Unknown)
	}
	return string(k)
}

func (s *Store) upsertCharge(ctx context.Context, tx Tx, op *ledger.Operation, c *ledger.ChargeUpsert, now time.Time) error {
	if c.ProviderChargeID == "" {
		return errors.New("charge: the provider's charge ID is required")
	}
	_, err := tx.Exec(ctx, `INSERT INTO charges (operation_ref, remote_job_ref, provider_charge_id, amount_micros, currency, status, source, kind, created_at, updated_at)
		VALUES ($1, (SELECT id FROM remote_jobs WHERE operation_ref = $1 AND remote_id = $2), $3, $4, $5, $6, $7, $9, $8, $8)
		ON CONFLICT (operation_ref, provider_charge_id) DO UPDATE SET
			remote_job_ref = COALESCE(excluded.remote_job_ref, charges.remote_job_ref),
			amount_micros = excluded.amount_micros, currency = excluded.currency,
			status = excluded.status, source = excluded.source, kind = excluded.kind, updated_at = excluded.updated_at`,
		op.ID, c.RemoteJobID, c.ProviderChargeID, c.Amount.Micros, c.Amount.Currency, c.Status, c.Source, now, c.Kind)
	if err != nil {
		return fmt.Errorf("record charge %s: %w", c.ProviderChargeID, err)
	}
	return nil
}

// recoverQuery selects open operations whose lease has lapsed: those in
// the first three states, and those in the fourth held by a worker (a
// question asked within a call, which died with it, or by an upstream
// task whose poll job died); a question waiting for a later send holds no
// worker's lease. "ended_at
// IS NULL" says nothing the states do not; it is the predicate of the
// operations_open index, which a database uses only when a query repeats
// it.
const recoverQuery = `SELECT ` + operationColumns + ` FROM operations
	WHERE ended_at IS NULL AND state IN ($1, $2, $3, $6) AND (lease_until IS NULL OR lease_until < $4)
		AND (state <> $6 OR lease_owner NOT IN ('', $7))
	ORDER BY id LIMIT $5`

// OperationsToRecover implements ledger.Store.
func (s *Store) OperationsToRecover(ctx context.Context, now time.Time, limit int) ([]*ledger.Operation, error) {
	return queryAll(ctx, s.drv.Reader(), scanOperation, recoverQuery,
		ledger.StateAccepted, ledger.StateSending, ledger.StateRunning, s.now(now), limit, ledger.StateInputRequired, ledger.LeaseQueued)
}

// OperationsEndedBefore implements ledger.Store.
func (s *Store) OperationsEndedBefore(ctx context.Context, t time.Time, limit int) ([]*ledger.Operation, error) {
	return queryAll(ctx, s.drv.Reader(), scanOperation, `SELECT `+operationColumns+` FROM operations
		WHERE NOT key_expired AND ended_at IS NOT NULL AND ended_at < $1 ORDER BY id LIMIT $2`, s.now(t), limit)
}

// enqueue inserts jobs in tx. Those with unique options go through River's
// unique-aware insert, which skips a job already queued; the others (a
// step's next send or poll) through its fast path, as acceptances' jobs
// do: one INSERT, nothing read back.
func enqueue(ctx context.Context, tx Tx, jobs []river.InsertManyParams) error {
	var fast, unique []river.InsertManyParams
	for _, j := range jobs {
		if uniqueJob(j) {
			unique = append(unique, j)
		} else {
			fast = append(fast, j)
		}
	}
	if len(fast) > 0 {
		if err := tx.EnqueueFast(ctx, fast); err != nil {
			return err
		}
	}
	if len(unique) > 0 {
		return tx.Enqueue(ctx, unique)
	}
	return nil
}

// uniqueJob reports whether River would insert j only if no like job is
// queued: its own insert options or its kind's ask for uniqueness.
func uniqueJob(j river.InsertManyParams) bool {
	if j.InsertOpts != nil && !reflect.ValueOf(j.InsertOpts.UniqueOpts).IsZero() {
		return true
	}
	a, ok := j.Args.(river.JobArgsWithInsertOpts)
	return ok && !reflect.ValueOf(a.InsertOpts().UniqueOpts).IsZero()
}
