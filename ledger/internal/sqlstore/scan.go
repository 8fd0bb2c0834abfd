package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

// ts scans a timestamp stored either as timestamptz or as Unix microseconds;
// NULL becomes the zero time.
type ts struct{ t *time.Time }

func (s ts) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*s.t = time.Time{}
	case int64:
		*s.t = time.UnixMicro(v).UTC()
	case time.Time:
		*s.t = v.UTC()
	default:
		return fmt.Errorf("cannot scan %T into a timestamp", src)
	}
	return nil
}

// nullInt scans a nullable integer; NULL becomes 0.
type nullInt struct{ v *int64 }

func (s nullInt) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*s.v = 0
	case int64:
		*s.v = v
	case int32:
		*s.v = int64(v)
	default:
		return fmt.Errorf("cannot scan %T into an integer", src)
	}
	return nil
}

// nullJSON scans a nullable text column holding JSON; NULL becomes nil.
type nullJSON struct{ v *json.RawMessage }

func (s nullJSON) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*s.v = nil
	case string:
		*s.v = json.RawMessage(v)
	case []byte:
		*s.v = append(json.RawMessage(nil), v...)
	default:
		return fmt.Errorf("cannot scan %T into JSON", src)
	}
	return nil
}

func idOrNull(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

func jsonOrNull(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

const operationColumns = `id, tenant, operation_id, task_id, upstream, tool, fingerprint, arguments,
	state, status_message, review_reason, result, error, approval_ref, retry_policy,
	estimate_micros, currency, intended_remote_jobs, send_count, cost_breach, ttl_ms,
	cancel_requested_at, lease_owner, lease_until, created_at, updated_at, ended_at, priced, secret_arguments, secrets_at_rest,
	input_channel, input_requests, request_state, input_responses, chain_head, provider_key, contract`

func scanOperation(r Row) (*ledger.Operation, error) {
	var (
		o        ledger.Operation
		args     string
		estimate int64
		currency string
		ttlMS    int64
		intended int64
		sends    int64
		secret   sql.NullString
		atRest   sql.NullString
		key      sql.NullString
	)
	err := r.Scan(&o.ID, &o.Tenant, &o.OperationID, &o.TaskID, &o.Upstream, &o.Tool, &o.Fingerprint, &args,
		&o.State, &o.StatusMessage, &o.ReviewReason, nullJSON{&o.Result}, nullJSON{&o.Error}, nullInt{&o.ApprovalID}, &o.RetryPolicy,
		&estimate, &currency, &intended, &sends, &o.CostBreach, &ttlMS,
		ts{&o.CancelRequestedAt}, &o.LeaseOwner, ts{&o.LeaseUntil}, ts{&o.CreatedAt}, ts{&o.UpdatedAt}, ts{&o.EndedAt}, &o.Priced, &secret, &atRest,
		&o.InputChannel, nullJSON{&o.InputRequests}, &o.RequestState, nullJSON{&o.InputResponses}, &o.ChainHead, &key, nullJSON{&o.Contract})
	if err != nil {
		return nil, err
	}
	if secret.Valid {
		if err := json.Unmarshal([]byte(secret.String), &o.SecretArguments); err != nil {
			return nil, fmt.Errorf("operation %d: secret arguments %q: %w", o.ID, secret.String, err)
		}
	}
	o.Arguments = json.RawMessage(args)
	o.SecretsAtRest = ledger.SecretsAtRest(atRest.String)
	o.StoredProviderKey = key.String
	o.Estimate = money.FromMicros(estimate, currency)
	o.TTL = time.Duration(ttlMS) * time.Millisecond
	o.IntendedRemoteJobs = int(intended)
	o.SendCount = int(sends)
	return &o, nil
}

const attemptColumns = `id, request_id, tenant, operation_id, operation_ref, related_ref, decision, reason,
	fingerprint, source, client_result, remote_accepted, remote_effect, charge_status, created_at, updated_at, run_id, session_id, trace_parent`

func scanAttempt(r Row) (*ledger.Attempt, error) {
	var a ledger.Attempt
	err := r.Scan(&a.ID, &a.RequestID, &a.Tenant, &a.OperationID, nullInt{&a.OperationRef}, nullInt{&a.RelatedRef},
		&a.Decision, &a.Reason, &a.Fingerprint, &a.Source, &a.ClientResult, &a.RemoteAccepted, &a.RemoteEffect,
		&a.ChargeStatus, ts{&a.CreatedAt}, ts{&a.UpdatedAt}, &a.RunID, &a.SessionID, &a.TraceParent)
	if err != nil {
		return nil, err
	}
	return &a, nil
}

const remoteJobColumns = `id, operation_ref, attempt_ref, upstream, endpoint, remote_id, upstream_task_id, kind, status, intended,
	duplicate, duplicate_resolved, result, cancel_requested_at, effect_reversed, created_at, updated_at`

func scanRemoteJob(r Row) (*ledger.RemoteJob, error) {
	var j ledger.RemoteJob
	err := r.Scan(&j.ID, &j.OperationRef, nullInt{&j.AttemptRef}, &j.Upstream, &j.Endpoint, &j.RemoteJobID, &j.UpstreamTaskID, &j.Kind, &j.Status,
		&j.Intended, &j.Duplicate, &j.DuplicateResolved, nullJSON{&j.Result}, ts{&j.CancelRequestedAt}, &j.EffectReversed,
		ts{&j.CreatedAt}, ts{&j.UpdatedAt})
	if err != nil {
		return nil, err
	}
	return &j, nil
}

const chargeColumns = `id, operation_ref, remote_job_ref, provider_charge_id, amount_micros, currency, status, source,
	kind, created_at, updated_at`

func scanCharge(r Row) (*ledger.Charge, error) {
	var (
		c        ledger.Charge
		micros   int64
		currency string
	)
	err := r.Scan(&c.ID, &c.OperationRef, nullInt{&c.RemoteJobRef}, &c.ProviderChargeID, &micros, &currency, &c.Status,
		&c.Source, &c.Kind, ts{&c.CreatedAt}, ts{&c.UpdatedAt})
	if err != nil {
		return nil, err
	}
	c.Amount = money.FromMicros(micros, currency)
	return &c, nil
}

const approvalColumns = `id, tenant, operation_id, tool, max_cost_micros, currency, max_remote_jobs, retry_policy,
	expires_at, created_at, revoked_at, created_by`

func scanApproval(r Row) (*ledger.Approval, error) {
	var (
		a        ledger.Approval
		micros   int64
		currency string
		maxJobs  int64
	)
	err := r.Scan(&a.ID, &a.Tenant, &a.OperationID, &a.Tool, &micros, &currency, &maxJobs, &a.RetryPolicy,
		ts{&a.ExpiresAt}, ts{&a.CreatedAt}, ts{&a.RevokedAt}, &a.CreatedBy)
	if err != nil {
		return nil, err
	}
	a.MaxTotalCost = money.FromMicros(micros, currency)
	a.MaxRemoteJobs = int(maxJobs)
	return &a, nil
}

const reservationColumns = `id, approval_ref, operation_ref, amount_micros, settled_micros, currency, jobs, status,
	created_at, updated_at`

func scanReservation(r Row) (*ledger.Reservation, error) {
	var (
		v               ledger.Reservation
		amount, settled int64
		currency        string
		jobs            int64
	)
	err := r.Scan(&v.ID, &v.ApprovalRef, &v.OperationRef, &amount, &settled, &currency, &jobs, &v.Status,
		ts{&v.CreatedAt}, ts{&v.UpdatedAt})
	if err != nil {
		return nil, err
	}
	v.Amount = money.FromMicros(amount, currency)
	v.Settled = money.FromMicros(settled, currency)
	v.RemoteJobs = int(jobs)
	return &v, nil
}

const eventColumns = `id, operation_ref, attempt_ref, kind, data, created_at, hash, prev_hash`

func scanEvent(r Row) (*ledger.Event, error) {
	var (
		e          ledger.Event
		data       string
		hash, prev sql.NullString
	)
	if err := r.Scan(&e.ID, nullInt{&e.OperationRef}, nullInt{&e.AttemptRef}, &e.Kind, &data, ts{&e.CreatedAt}, &hash, &prev); err != nil {
		return nil, err
	}
	e.Data = json.RawMessage(data)
	e.Hash, e.PrevHash = hash.String, prev.String
	return &e, nil
}

// queryAll runs query and scans every row with scan.
func queryAll[T any](ctx context.Context, q Querier, scan func(Row) (*T, error), query string, args ...any) ([]*T, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func stringOrNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}
