package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/policy"
)

// acceptRequest is one write that joins a group commit: an acceptance, or
// the record of what an attempt's client got.
type acceptRequest struct {
	ctx    context.Context
	p      *ledger.AcceptParams
	result *clientResult
	done   chan acceptResponse
}

type clientResult struct {
	requestID string
	r         ledger.ClientResult
}

type acceptResponse struct {
	res *ledger.AcceptResult
	err error
}

// Accept implements ledger.Store. Concurrent calls are committed in groups:
// one transaction holds several decisions, so that many acceptances share
// one durable commit; a group that fails is retried member by member, so
// one bad request never fails the others. No caller is answered before its
// group has committed.
func (s *Store) Accept(ctx context.Context, p *ledger.AcceptParams) (*ledger.AcceptResult, error) {
	if err := validateAccept(p); err != nil {
		return nil, err
	}
	return s.group(ctx, &acceptRequest{ctx: ctx, p: p, done: make(chan acceptResponse, 1)})
}

// AttemptSetClientResult implements ledger.Store. It joins the group
// commits of acceptances: every answered attempt records one, and each
// would otherwise cost a durable commit of its own.
func (s *Store) AttemptSetClientResult(ctx context.Context, requestID string, r ledger.ClientResult) error {
	_, err := s.group(ctx, &acceptRequest{ctx: ctx, result: &clientResult{requestID: requestID, r: r}, done: make(chan acceptResponse, 1)})
	return err
}

// group commits req in a group and waits for the group's commit. The
// caller's own goroutine leads the group when fewer than maxLeaders are
// committing: an acceptance alone then costs no handoff to another
// goroutine and back. Otherwise req waits in pending for the next leader.
func (s *Store) group(ctx context.Context, req *acceptRequest) (*ledger.AcceptResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil, ledger.ErrClosed
	}
	s.pending = append(s.pending, req)
	lead := s.leaders < s.maxLeaders
	if lead {
		s.leaders++
		s.wg.Add(1)
	}
	s.mu.Unlock()
	if lead {
		s.lead()
	}
	select {
	case r := <-req.done:
		return r.res, r.err
	case <-ctx.Done():
	}
	// A request still waiting has not been decided: withdraw it. Once a
	// leader has taken it, wait for the commit even though ctx ended: the
	// decision may already be durable, and the caller must learn which.
	s.mu.Lock()
	if i := slices.Index(s.pending, req); i >= 0 {
		s.pending = slices.Delete(s.pending, i, i+1)
		s.mu.Unlock()
		return nil, ctx.Err()
	}
	s.mu.Unlock()
	r := <-req.done
	return r.res, r.err
}

// lead commits the oldest waiting requests as one group. Leadership then
// passes to a new goroutine while requests wait, so that the leading
// caller gets its answer without committing everyone else's.
func (s *Store) lead() {
	defer s.wg.Done()
	s.mu.Lock()
	n := min(len(s.pending), s.batch)
	batch := slices.Clone(s.pending[:n])
	s.pending = slices.Delete(s.pending, 0, n)
	s.mu.Unlock()

	s.commitBatch(batch)

	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) > 0 {
		s.wg.Add(1)
		go s.lead()
		return
	}
	s.leaders--
}

func validateAccept(p *ledger.AcceptParams) error {
	switch {
	case p == nil:
		return errors.New("accept: nil params")
	case p.Tenant == "":
		return errors.New("accept: tenant is required")
	case p.OperationID == "":
		return errors.New("accept: operation ID is required")
	case p.RequestID == "":
		return errors.New("accept: request ID is required")
	case p.TaskID == "":
		return errors.New("accept: task ID is required")
	case p.Fingerprint == "":
		return errors.New("accept: fingerprint is required")
	case p.Tool == "":
		return errors.New("accept: tool is required")
	case !p.InputChannel.Valid():
		return fmt.Errorf("accept: unknown input channel %q", p.InputChannel)
	case p.Approval.Request != ledger.RequestNone && p.Approval.Request != ledger.RequestWait && p.Approval.Request != ledger.RequestRecord:
		return fmt.Errorf("accept: unknown approval request mode %q", p.Approval.Request)
	case p.Approval.Request != ledger.RequestNone && p.Approval.RequestTTL <= 0:
		return errors.New("accept: an approval request needs a positive lifetime")
	case len(p.Contract) > 0 && (!json.Valid(p.Contract) || !utf8.Valid(p.Contract)):
		return errors.New("accept: the declared provider contract is not valid UTF-8 JSON")
	}
	return nil
}

// errCommitterPanic wraps a panic while deciding a group: its members are
// answered with it, and leadership passes on to the next group.
var errCommitterPanic = errors.New("acceptance failed unexpectedly")

// recoverAnswer is deferred by commitBatch: a panic anywhere in a group
// answers every member not yet answered, so that no caller waits forever
// and the leader goes on to hand over.
func (s *Store) recoverAnswer(batch []*acceptRequest) {
	r := recover()
	if r == nil {
		return
	}
	err := fmt.Errorf("%w: %v", errCommitterPanic, r)
	s.log.Error("group commit recovered from a panic", "err", err)
	for _, req := range batch {
		select {
		case req.done <- acceptResponse{err: err}:
		default: // already answered
		}
	}
}

// commitBatch decides and commits a group of acceptances and answers each.
func (s *Store) commitBatch(batch []*acceptRequest) {
	defer s.recoverAnswer(slices.Clone(batch))
	live := batch[:0]
	for _, req := range batch {
		if err := req.ctx.Err(); err != nil {
			req.done <- acceptResponse{err: err}
			continue
		}
		live = append(live, req)
	}
	if len(live) == 0 {
		return
	}
	// No deadline of the caller's: a deadline makes the driver watch every
	// statement with a goroutine. SQLite's busy timeout bounds its lock
	// waits; the PostgreSQL driver bounds each statement itself.
	ctx := context.Background()

	// A group is optimistic: the first request that fails rolls the whole
	// group back, and its members are then committed one by one, so that
	// each fails or succeeds on its own. Failures are rare (input is
	// validated first), and savepoints would cost two statements a request.
	results := make([]acceptResponse, len(live))
	grouped := len(live) > 1
	// A client waits for the group: it goes past the line of other
	// writes, to the write connection itself.
	err := s.inTx(ctx, func(tx Tx) (err error) {
		// A panic (in a caller's Jobs function, say) must roll the group
		// back like any failure, not leave its transaction open.
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%w: %v", errCommitterPanic, r)
			}
		}()
		var jobs []river.InsertManyParams
		for i, req := range live {
			res, j, err := s.apply(ctx, tx, req)
			if err != nil {
				return err
			}
			results[i] = acceptResponse{res: res}
			jobs = append(jobs, j...)
		}
		if len(jobs) > 0 {
			if err := tx.EnqueueFast(ctx, jobs); err != nil {
				return fmt.Errorf("enqueue dispatch jobs: %w", err)
			}
		}
		return nil
	})
	if err != nil && grouped {
		// Let each request succeed or fail on its own.
		s.log.Warn("group acceptance failed; committing one by one", "size", len(live), "err", err)
		for _, req := range live {
			s.commitBatch([]*acceptRequest{req})
		}
		return
	}
	for i, req := range live {
		if err != nil {
			results[i] = acceptResponse{err: err}
		}
		req.done <- results[i]
	}
}

// apply performs one grouped write inside tx.
func (s *Store) apply(ctx context.Context, tx Tx, req *acceptRequest) (*ledger.AcceptResult, []river.InsertManyParams, error) {
	if req.result != nil {
		return nil, nil, s.setClientResult(ctx, tx, req.result.requestID, req.result.r)
	}
	return s.acceptOne(ctx, tx, req.p)
}

// setClientResult records what an attempt's client got, with its event.
func (s *Store) setClientResult(ctx context.Context, tx Tx, requestID string, r ledger.ClientResult) error {
	now := s.now(time.Time{})
	var (
		id, opRef int64
		head      sql.NullString
	)
	// The same statement reads the operation's chain head and locks its
	// row: recording a client result costs no round trip for the chain.
	err := tx.QueryRow(ctx, `UPDATE attempts SET client_result = $1, updated_at = $2 WHERE request_id = $3
		RETURNING id, operation_ref, (SELECT chain_head FROM operations WHERE id = attempts.operation_ref`+s.drv.ForNoKeyUpdate()+`)`,
		r, now, requestID).Scan(&id, nullInt{&opRef}, &head)
	if err != nil {
		return s.notFound(err, fmt.Sprintf("attempt %q", requestID))
	}
	kind := ledger.EventClientResult
	if r == ledger.ClientDisconnected || r == ledger.ClientTimedOut {
		kind = ledger.EventClientStoppedWatching
	}
	_, err = s.event(ctx, tx, opRef, head.String, id, kind, ledger.ClientResultData{ClientResult: r, RequestID: requestID}, now)
	return err
}

// acceptOne applies the acceptance table to one request inside tx.
func (s *Store) acceptOne(ctx context.Context, tx Tx, p *ledger.AcceptParams) (*ledger.AcceptResult, []river.InsertManyParams, error) {
	now := s.now(p.Now)
	var stored *ledger.Operation
	if p.Approval.Required {
		// Policy looks at an approval before anything is inserted, so it
		// must first know whether the operation is new.
		var err error
		if stored, err = s.operationByKey(ctx, tx, p.Tenant, p.OperationID); err != nil {
			return nil, nil, err
		}
	}
	if stored == nil {
		// Without an approval to consult, inserting is the cheapest way to
		// ask: ON CONFLICT tells a stored operation apart in one statement.
		res, jobs, err := s.create(ctx, tx, p, now)
		if err != nil || res != nil {
			return res, jobs, err
		}
		// The operation exists (another transaction may have created it
		// first; it is committed now): decide against it.
		if stored, err = s.operationByKey(ctx, tx, p.Tenant, p.OperationID); err != nil {
			return nil, nil, err
		}
		if stored == nil {
			return nil, nil, fmt.Errorf("operation %q vanished during acceptance", p.OperationID)
		}
	}

	decision, reason := ledger.DecideKeyed(stored, p.Fingerprint, p.Arguments, p.KeyArgument)
	att, err := s.insertAttempt(ctx, tx, p, stored.ID, 0, decision, reason, now)
	if err != nil {
		return nil, nil, err
	}
	// An attached attempt writes nothing but its attempt row: replays are
	// the hot path of a retrying client. A conflict is worth an event.
	if decision == ledger.DecisionConflict {
		head, err := s.chainHead(ctx, tx, stored.ID)
		if err != nil {
			return nil, nil, err
		}
		if _, err := s.event(ctx, tx, stored.ID, head, att.ID, ledger.EventConflict, ledger.ConflictData{Reason: reason, RequestID: p.RequestID}, now); err != nil {
			return nil, nil, err
		}
	}
	res := &ledger.AcceptResult{Decision: decision, Reason: reason, Operation: stored, Attempt: att}
	if decision == ledger.DecisionConflict {
		res.Message = fmt.Sprintf("operation ID %q was first used with different arguments; use a new operation ID for different work, or resend the original arguments to retry", p.OperationID)
	}
	return res, nil, nil
}

// create inserts a new operation, or returns (nil, nil, nil) when the
// operation exists: another transaction inserted the same (tenant,
// operation ID) first.
func (s *Store) create(ctx context.Context, tx Tx, p *ledger.AcceptParams, now time.Time) (*ledger.AcceptResult, []river.InsertManyParams, error) {
	// An operation ID whose operation was archived stays taken for its
	// retention: a late retry is told so, and starts nothing.
	if t, err := s.archivedKey(ctx, tx, p.Tenant, p.OperationID, now); err != nil || t != nil {
		if err != nil {
			return nil, nil, err
		}
		return s.deny(ctx, tx, p, 0, policy.Verdict{Reason: ledger.ReasonOperationArchived, Message: archivedMessage(p.OperationID, t)}, "", false, now)
	}
	var approval *ledger.Approval
	// waiting: the call has no approval at all, and its client holds a
	// task while an approval request waits for an approver.
	waiting := false
	// cover: budgets admit the call, which has no approval of its own.
	var cover policy.Cover
	// shortfall: which budget could not cover the call, and by how much.
	shortfall := ""
	if p.Approval.Required {
		var (
			verdict policy.Verdict
			related int64
			err     error
		)
		approval, related, verdict, err = s.admit(ctx, tx, p, now)
		if err != nil {
			return nil, nil, err
		}
		if !verdict.Allowed && verdict.Reason == ledger.ReasonApprovalRequired && related == 0 && !p.Approval.NoBudgets {
			if cover, err = s.coverByBudgets(ctx, tx, p, now); err != nil {
				return nil, nil, err
			}
			shortfall = cover.Shortfall
			if cover.Covered {
				verdict = policy.Verdict{Allowed: true}
			} else {
				verdict.Message = budgetMessage(shortfall, verdict.Message)
			}
		}
		if !verdict.Allowed {
			// Locking the approval may have waited for a concurrent attempt
			// that created this very operation. Under read committed its
			// reservation is visible now, and so is the operation: the
			// attempt is decided against it (attached or conflict), never
			// denied for the job that its own operation holds.
			if existing, err := s.operationByKey(ctx, tx, p.Tenant, p.OperationID); err != nil || existing != nil {
				return nil, nil, err
			}
			// A call with no approval, or only an expired or revoked one
			// for its own operation ID, may ask an approver for one; a retry
			// under a new operation ID may not.
			unapproved := verdict.Reason == ledger.ReasonApprovalRequired || verdict.Reason == ledger.ReasonApprovalExpired && related == 0
			waiting = unapproved && p.Approval.Request == ledger.RequestWait
			if !waiting {
				return s.deny(ctx, tx, p, related, verdict, shortfall, unapproved && p.Approval.Request == ledger.RequestRecord, now)
			}
		}
	}

	var approvalRef int64
	if approval != nil {
		approvalRef = approval.ID
	}
	// The dispatch job enqueued below holds the operation until a worker
	// claims it; should it never run, the lease lapses and recovery starts.
	leaseOwner, leaseUntil := "", time.Time{}
	state := ledger.StateAccepted
	if waiting {
		// Nothing is queued or leased: no worker may touch the operation
		// until an approver approves, and recovery passes it by.
		state = ledger.StateAwaitingApproval
	} else if p.Enqueue != nil && p.QueueLease > 0 {
		leaseOwner, leaseUntil = ledger.LeaseQueued, now.Add(p.QueueLease).Truncate(time.Microsecond)
	}
	op := &ledger.Operation{
		Tenant: p.Tenant, OperationID: p.OperationID, TaskID: p.TaskID, Upstream: p.Upstream, Tool: p.Tool,
		Fingerprint: p.Fingerprint, Arguments: argumentsOrEmpty(p.Arguments), State: state,
		ApprovalID: approvalRef, RetryPolicy: p.RetryPolicy, Estimate: money.FromMicros(p.Approval.Estimate.Micros, currencyOf(p)),
		IntendedRemoteJobs: p.Approval.Jobs(), TTL: p.TTL.Truncate(time.Millisecond), Priced: p.Priced, SecretArguments: secretNames(p.SecretArguments),
		InputChannel: p.InputChannel, LeaseOwner: leaseOwner, LeaseUntil: leaseUntil, CreatedAt: now, UpdatedAt: now,
		StoredProviderKey: ledger.NewProviderKey(), Contract: contractOrNil(p.Contract),
	}
	secret, err := secretOrNull(p.SecretArguments)
	if err != nil {
		return nil, nil, err
	}
	if err := s.sealSecrets(op); err != nil {
		return nil, nil, err
	}
	// Only the row ID comes back: the rest is what was just written.
	id, err := tx.InsertID(ctx, `INSERT INTO operations (tenant, operation_id, task_id, upstream, tool, fingerprint, arguments,
			state, approval_ref, retry_policy, estimate_micros, currency, ttl_ms, lease_owner, lease_until, created_at, updated_at,
			intended_remote_jobs, priced, secret_arguments, schema_version, secrets_at_rest, input_channel, provider_key, contract)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $15, $16, $14, $14, $17, $18, $19, $20, $21, $22, $23, $24)
		ON CONFLICT (tenant, operation_id) WHERE NOT key_expired DO NOTHING`,
		op.Tenant, op.OperationID, op.TaskID, op.Upstream, op.Tool, op.Fingerprint, string(op.Arguments),
		op.State, idOrNull(approvalRef), op.RetryPolicy, op.Estimate.Micros, op.Estimate.Currency, op.TTL.Milliseconds(), now,
		leaseOwner, leaseUntil, op.IntendedRemoteJobs, op.Priced, secret, s.drv.SchemaVersion(), stringOrNull(string(op.SecretsAtRest)), string(op.InputChannel),
		op.StoredProviderKey, jsonOrNull(op.Contract))
	if err != nil {
		if errors.Is(s.drv.Interpret(err), ledger.ErrNotFound) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("insert operation: %w", err)
	}
	op.ID = id
	if cover.Covered {
		// The approval is written only now that the operation is: had
		// another attempt created it first, nothing would be left behind.
		if approval, err = s.reserveBudgets(ctx, tx, p, op, cover, now); err != nil {
			return nil, nil, err
		}
	}
	if approval != nil {
		if _, err := tx.Exec(ctx, `INSERT INTO reservations (approval_ref, operation_ref, amount_micros, currency, jobs, status, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $7)`,
			approval.ID, op.ID, p.Approval.Estimate.Micros, currencyOf(p), p.Approval.Jobs(), ledger.ReservationHeld, now); err != nil {
			return nil, nil, fmt.Errorf("reserve against approval %d: %w", approval.ID, err)
		}
	}
	// The operation and its created attempt are the record of the
	// acceptance: no event repeats them.
	att, err := s.insertAttempt(ctx, tx, p, op.ID, 0, ledger.DecisionCreated, "", now)
	if err != nil {
		return nil, nil, err
	}
	if waiting {
		// The waiting task's status message says which budget was short.
		req, err := s.waitForApproval(ctx, tx, p, op, att.ID, shortfall, now)
		if err != nil {
			return nil, nil, err
		}
		return &ledger.AcceptResult{Decision: ledger.DecisionCreated, Operation: op, Attempt: att, Request: req, Message: op.StatusMessage}, nil, nil
	}
	var jobs []river.InsertManyParams
	if p.Enqueue != nil {
		jobs = p.Enqueue(op)
	}
	return &ledger.AcceptResult{Decision: ledger.DecisionCreated, Operation: op, Attempt: att}, jobs, nil
}

// deny records the attempt denied for verdict, pointing at the related
// operation it repeats, if any. With record, the denial names the call's
// approval request, recorded for it when none is pending, so that a human
// can approve it and the client retry.
//
// shortfall, when not empty, says which budget could not cover the call.
func (s *Store) deny(ctx context.Context, tx Tx, p *ledger.AcceptParams, related int64, verdict policy.Verdict, shortfall string, record bool, now time.Time) (*ledger.AcceptResult, []river.InsertManyParams, error) {
	res := &ledger.AcceptResult{Decision: ledger.DecisionDenied, Reason: verdict.Reason, Message: verdict.Message}
	if record {
		req, err := s.recordRequest(ctx, tx, p, now)
		if err != nil {
			return nil, nil, err
		}
		res.Request = req
		res.Message = budgetMessage(shortfall, fmt.Sprintf("this call needs an approval it does not have (%s); approval request %d asks an approver for one (taskgate approval-requests approve %d); once it is approved, retry with the same operation ID. The request expires at %s",
			verdict.Reason, req.ID, req.ID, req.ExpiresAt.UTC().Format(time.RFC3339)))
	}
	att, err := s.insertAttempt(ctx, tx, p, 0, related, ledger.DecisionDenied, verdict.Reason, now)
	if err != nil {
		return nil, nil, err
	}
	// A denied retry is an event of the operation it repeats.
	var head string
	if related != 0 {
		if head, err = s.chainHead(ctx, tx, related); err != nil {
			return nil, nil, err
		}
	}
	if _, err := s.event(ctx, tx, related, head, att.ID, ledger.EventDenied, ledger.DeniedData{OperationID: p.OperationID, Reason: verdict.Reason, RequestID: p.RequestID}, now); err != nil {
		return nil, nil, err
	}
	res.Attempt = att
	return res, nil, nil
}

// admit finds the approval a new operation would run under and asks policy
// whether it admits one more remote job. An approval for the operation ID
// itself comes first; failing that, a new operation ID that repeats the
// arguments of an operation under an approval is that approval's retry.
func (s *Store) admit(ctx context.Context, tx Tx, p *ledger.AcceptParams, now time.Time) (*ledger.Approval, int64, policy.Verdict, error) {
	var related int64
	approval, err := s.approvalFor(ctx, tx, p.Tenant, p.OperationID, p.QualifiedTool())
	if err != nil {
		return nil, 0, policy.Verdict{}, err
	}
	if approval == nil {
		var ref, approvalRef int64
		err := tx.QueryRow(ctx, `SELECT id, approval_ref FROM operations
			WHERE tenant = $1 AND fingerprint = $2 AND approval_ref IS NOT NULL ORDER BY id DESC LIMIT 1`,
			p.Tenant, p.Fingerprint).Scan(&ref, nullInt{&approvalRef})
		switch {
		case err == nil:
			related = ref
			if approval, err = s.approvalByID(ctx, tx, approvalRef); err != nil {
				return nil, 0, policy.Verdict{}, err
			}
		case !errors.Is(s.drv.Interpret(err), ledger.ErrNotFound):
			return nil, 0, policy.Verdict{}, err
		}
	}
	if approval == nil {
		// The same arguments waiting for an approval under another
		// operation ID are this call's original: a retry, not new work.
		// (A waiting operation has not ended: the open index finds it.)
		var ref int64
		var waitingID string
		err := tx.QueryRow(ctx, `SELECT id, operation_id FROM operations
			WHERE ended_at IS NULL AND state = $3 AND tenant = $1 AND fingerprint = $2 AND operation_id <> $4 ORDER BY id DESC LIMIT 1`,
			p.Tenant, p.Fingerprint, ledger.StateAwaitingApproval, p.OperationID).Scan(&ref, &waitingID)
		switch {
		case err == nil:
			return nil, ref, policy.WaitingRetry(waitingID), nil
		case !errors.Is(s.drv.Interpret(err), ledger.ErrNotFound):
			return nil, 0, policy.Verdict{}, err
		}
		return nil, 0, policy.Admit(nil, p.QualifiedTool(), policy.Usage{}, route(p), false, now), nil
	}
	// Lock the approval so that concurrent reservations against it are
	// decided one after another, and decide on the approval as it is once
	// locked: it may have been revoked since it was first read.
	id := approval.ID
	if approval, err = scanApproval(tx.QueryRow(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE id = $1`+s.drv.ForUpdate(), id)); err != nil {
		return nil, 0, policy.Verdict{}, s.notFound(err, fmt.Sprintf("approval %d", id))
	}
	rs, err := queryAll(ctx, tx, scanReservation, `SELECT `+reservationColumns+` FROM reservations WHERE approval_ref = $1`, approval.ID)
	if err != nil {
		return nil, 0, policy.Verdict{}, err
	}
	used := policy.Committed(rs, approval.MaxTotalCost.Currency)
	return approval, related, policy.Admit(approval, p.QualifiedTool(), used, route(p), related != 0, now), nil
}

// budgetMessage puts the budget shortfall, if any, before msg.
func budgetMessage(shortfall, msg string) string {
	if shortfall == "" {
		return msg
	}
	return "no budget covers this call: " + shortfall + "; " + msg
}

// route is what the call would start, as policy weighs it.
func route(p *ledger.AcceptParams) policy.Route {
	return policy.Route{RemoteJobs: p.Approval.Jobs(), Estimate: p.Approval.Estimate}
}

func currencyOf(p *ledger.AcceptParams) string {
	if p.Approval.Estimate.Currency != "" {
		return p.Approval.Estimate.Currency
	}
	return "USD"
}

// contractOrNil copies a declared contract for the operation, so that
// the caller's later use of its slice cannot change what was recorded; an
// empty one is the configuration's contract, nil.
func contractOrNil(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return slices.Clone(b)
}

func argumentsOrEmpty(b []byte) []byte {
	if len(b) == 0 {
		return []byte("{}")
	}
	return b
}

func (s *Store) insertAttempt(ctx context.Context, tx Tx, p *ledger.AcceptParams, opRef, relatedRef int64, d ledger.Decision, reason string, now time.Time) (*ledger.Attempt, error) {
	remote := attemptRemoteDefault(d)
	a := &ledger.Attempt{
		RequestID: p.RequestID, Tenant: p.Tenant, OperationID: p.OperationID, OperationRef: opRef, RelatedRef: relatedRef,
		Decision: d, Reason: reason, Fingerprint: p.Fingerprint, Source: p.Source, ClientResult: ledger.ClientUnknown,
		RemoteAccepted: remote, RemoteEffect: remote, ChargeStatus: remote, RunID: p.RunID, SessionID: p.SessionID, TraceParent: p.TraceParent,
		CreatedAt: now, UpdatedAt: now,
	}
	// Only the row ID comes back: the rest is what was just written.
	var err error
	a.ID, err = tx.InsertID(ctx, `INSERT INTO attempts (request_id, tenant, operation_id, operation_ref, related_ref,
			decision, reason, fingerprint, source, client_result, remote_accepted, remote_effect, charge_status, created_at, updated_at,
			run_id, session_id, trace_parent)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $11, $12, $12, $13, $14, $15)`,
		p.RequestID, p.Tenant, p.OperationID, idOrNull(opRef), idOrNull(relatedRef), d, reason, p.Fingerprint, p.Source,
		ledger.ClientUnknown, remote, now, p.RunID, p.SessionID, p.TraceParent)
	if err != nil {
		return nil, fmt.Errorf("record attempt %s: %w", p.RequestID, err)
	}
	return a, nil
}

// attemptRemoteDefault: an attempt that started nothing is known to have
// caused nothing remotely; a created one is unknown until dispatch says.
func attemptRemoteDefault(d ledger.Decision) ledger.Knowledge {
	if d == ledger.DecisionCreated {
		return ledger.Unknown
	}
	return ledger.No
}

// sealSecrets seals op's secret argument values in place with the store's
// key ring, bound to the operation's identity, or notes that they stay in
// plain text when the store has none. It runs before the operation is
// written: no plaintext of a secret reaches the database when a key is
// configured.
func (s *Store) sealSecrets(op *ledger.Operation) error {
	if len(op.SecretArguments) == 0 {
		return nil
	}
	if s.ring == nil {
		op.SecretsAtRest = ledger.SecretsPlaintext
		return nil
	}
	sealed, err := s.ring.Seal(op.Arguments, op.SecretArguments, op.SecretScope())
	if err != nil {
		return fmt.Errorf("seal the secret arguments of operation %q: %w", op.OperationID, err)
	}
	op.Arguments, op.SecretsAtRest = sealed, ledger.SecretsSealed
	return nil
}

// secretNames is the operation's own copy of the names, nil for none: as
// the ledger reads them back.
func secretNames(names []string) []string {
	if len(names) == 0 {
		return nil
	}
	return slices.Clone(names)
}

// secretOrNull encodes the names of secret arguments, or NULL for none.
func secretOrNull(names []string) (any, error) {
	if len(names) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(names)
	if err != nil {
		return nil, fmt.Errorf("encode secret argument names: %w", err)
	}
	return string(b), nil
}

// archivedMessage tells the caller of a retry of an archived operation
// what happened to it and what to do instead.
func archivedMessage(operationID string, t *ledger.Tombstone) string {
	return fmt.Sprintf("operation ID %q belongs to an operation that ended at %s and was archived; it will not run again. Its result and receipt are in the archive (task %s); use a new operation ID for new work",
		operationID, t.EndedAt.UTC().Format(time.RFC3339), t.TaskID)
}
