package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/internal/crashpoint"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/provider"
	"github.com/taskgate/taskgate/taskwire"
)

// Remote job kinds.
const (
	KindUpstreamTask = "upstream_task"
	KindProviderJob  = "provider_job"
)

// dispatch moves an operation forward from whatever state it is in.
func (w *Worker) dispatch(ctx context.Context, l *lease) error {
	switch l.op.State {
	case ledger.StateAccepted:
		return w.send(ctx, l)
	case ledger.StateSending:
		return w.recoverSend(ctx, l, nil)
	case ledger.StateRunning:
		return w.poll(ctx, l)
	default:
		return nil
	}
}

// target is what dispatching an operation needs.
type target struct {
	contract *provider.Contract
	up       Upstream
	// creator is the row ID of the attempt that created the operation,
	// which its remote jobs are bound to.
	creator int64
}

// resolve finds the operation's contract, upstream and creating attempt;
// when the configuration no longer has the tool, the operation waits for a
// human. Everything here is read before anything is sent, so that a failed
// read never stands between a send and the record of what it started.
func (w *Worker) resolve(ctx context.Context, l *lease) (*target, error) {
	op := l.op
	c := w.catalog.Contract(op.Upstream, op.Tool)
	up, ok := w.upstreams.Upstream(op.Upstream)
	if c == nil || !ok {
		msg := fmt.Sprintf("the configuration no longer has consequential tool %s.%s; resolve with taskgate ops resolve", op.Upstream, op.Tool)
		_, err := l.transition(ctx, &ledger.TransitionParams{
			To: ledger.StateReview, ReviewReason: ptr("configuration_changed"), StatusMessage: &msg,
			Events: []ledger.EventParams{{Kind: ledger.EventRequireReview, Data: map[string]string{"reason": "configuration_changed"}}},
		})
		return nil, err
	}
	creator, err := w.creatorAttempt(ctx, op)
	if err != nil {
		return nil, err
	}
	return &target{contract: c, up: up, creator: creator}, nil
}

// send commits "send started", calls the upstream with the operation ID as
// the provider's idempotency key, and binds what comes back. An operation
// cancelled before it was sent never gets here: cancelling moves it to
// cancelled at once, and the cancel job releases its reservation.
func (w *Worker) send(ctx context.Context, l *lease) error {
	log := w.logger(l.op)
	t, err := w.resolve(ctx, l)
	if t == nil {
		return err
	}
	asTask, err := w.asTask(ctx, t, l.op.Tool)
	if err != nil {
		return err
	}
	op, err := l.transition(ctx, &ledger.TransitionParams{
		From: []ledger.State{ledger.StateAccepted}, To: ledger.StateSending, IncrementSend: true,
		StatusMessage: ptr("sending to " + l.op.Upstream),
		Events:        []ledger.EventParams{{Kind: ledger.EventSendStarted, Data: map[string]any{"send": l.op.SendCount + 1, "worker": l.owner}}},
	})
	if err != nil {
		return err
	}
	crashpoint.Reach(crashpoint.AfterSendStarted)

	s, err := t.contract.PrepareSend(op.Arguments, op.ProviderKey())
	if err != nil {
		return w.refused(ctx, l, -32602, err.Error())
	}
	params := &mcp.CallToolParams{Name: op.Tool, Arguments: s.Arguments}
	if len(s.Meta) > 0 {
		params.Meta = mcp.Meta(s.Meta)
	}
	var ttl *time.Duration
	if op.TTL > 0 {
		ttl = &op.TTL
	}
	log.Info("sending", "upstream", op.Upstream, "tool", op.Tool, "as_task", asTask, "send", op.SendCount)
	task, res, err := t.up.Send(ctx, params, s.Header, asTask, ttl)
	crashpoint.Reach(crashpoint.AfterUpstreamAccept)
	var rpcErr *jsonrpc.Error
	switch {
	case err == nil:
	case errors.Is(err, ErrNotSent):
		// It never left: undo "send started" so that the next try sends.
		log.Warn("upstream not reachable; will send again", "err", err)
		if _, terr := l.transition(ctx, &ledger.TransitionParams{
			From: []ledger.State{ledger.StateSending}, To: ledger.StateAccepted, StatusMessage: ptr("waiting for " + op.Upstream),
			Events: []ledger.EventParams{{Kind: ledger.EventLookup, Data: map[string]string{"answer": "not_sent", "detail": err.Error()}}},
		}); terr != nil {
			return terr
		}
		return err
	case errors.As(err, &rpcErr) && refusedBeforeStart(rpcErr.Code):
		// The upstream refused the request itself: nothing started.
		return w.refused(ctx, l, rpcErr.Code, rpcErr.Message)
	case ctx.Err() != nil:
		// This worker is stopping or lost its lease: leave "send started"
		// for whoever recovers the operation; they look up first.
		return ctx.Err()
	default:
		// A timeout, a broken connection or an error the upstream answered
		// while handling the call says nothing about whether the provider
		// accepted the work: look it up before anything else.
		log.Warn("upstream outcome unknown; looking up", "err", err)
		return w.recoverSend(ctx, l, err)
	}
	if task != nil {
		return w.bindTask(ctx, l, t, task)
	}
	return w.finishDirect(ctx, l, t, res)
}

// refusedBeforeStart reports whether a JSON-RPC error code means the
// upstream refused the request before handling it: invalid request,
// unknown method, invalid params. Any other error (an internal error, a
// server-defined code) may come after the provider started work.
func refusedBeforeStart(code int64) bool {
	return code == jsonrpc.CodeInvalidRequest || code == jsonrpc.CodeMethodNotFound || code == jsonrpc.CodeInvalidParams
}

// asTask decides whether to call the tool as a task. A 2026-07-28
// upstream is offered the extension and decides itself; a 2025-11-25
// upstream gets params.task only for a tool whose listed taskSupport is
// optional or required (a forbidden tool would refuse the call).
func (w *Worker) asTask(ctx context.Context, t *target, tool string) (bool, error) {
	switch t.up.OffersTasks() {
	case taskwire.EraNone:
		return false, nil
	case taskwire.EraLegacy:
		support, err := t.up.ToolTaskSupport(ctx, tool)
		if err != nil {
			return false, fmt.Errorf("read the task support of %s before sending: %w", tool, err)
		}
		return support == taskwire.TaskOptional || support == taskwire.TaskRequired, nil
	default:
		return true, nil
	}
}

// bindTask binds an upstream task as the operation's remote job.
func (w *Worker) bindTask(ctx context.Context, l *lease, t *target, task *taskwire.Task) error {
	return w.settle(ctx, l, &ledger.TransitionParams{
		From: []ledger.State{ledger.StateSending}, To: ledger.StateRunning, StatusMessage: ptr(statusOr(task.StatusMessage, "running at "+l.op.Upstream)),
		RemoteJobs: []*ledger.RemoteJobUpsert{{
			Upstream: l.op.Upstream, Endpoint: t.up.Endpoint(), RemoteID: task.ID, UpstreamTaskID: task.ID,
			Kind: KindUpstreamTask, Status: ledger.JobRunning, Intended: ptr(true), AttemptRef: t.creator,
		}},
		Creator: &ledger.AttemptKnowledge{RemoteAccepted: ledger.Yes},
		Events:  []ledger.EventParams{{Kind: ledger.EventRemoteJobBound, Data: map[string]string{"remote_job_id": task.ID, "kind": KindUpstreamTask}}},
		Jobs:    []river.InsertManyParams{job(PollArgs{Operation: l.opRef}, 0)},
	})
}

// finishDirect records a result the upstream returned directly.
func (w *Worker) finishDirect(ctx context.Context, l *lease, t *target, res *mcp.CallToolResult) error {
	if len(res.InputRequests) > 0 {
		msg := "the upstream asked for input, which a background call cannot give"
		_, err := l.transition(ctx, &ledger.TransitionParams{
			To: ledger.StateReview, ReviewReason: ptr("upstream_input_required"), StatusMessage: &msg,
			Events: []ledger.EventParams{{Kind: ledger.EventRequireReview, Data: map[string]string{"reason": "upstream_input_required"}}},
		})
		return err
	}
	jobID := t.contract.JobID(res)
	if jobID == "" {
		// The provider names no job: the operation ID is its only handle.
		jobID = "call:" + l.op.ProviderKey()
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("encode the upstream result: %w", err)
	}
	status := ledger.JobCompleted
	effect := ledger.Yes
	if res.IsError {
		status, effect = ledger.JobFailed, ledger.Unknown
	}
	return w.settle(ctx, l, &ledger.TransitionParams{
		From: []ledger.State{ledger.StateSending, ledger.StateRunning}, To: ledger.StateCompleted, Result: raw, StatusMessage: ptr(""),
		RemoteJobs: []*ledger.RemoteJobUpsert{{
			Upstream: l.op.Upstream, Endpoint: t.up.Endpoint(), RemoteID: jobID, Kind: KindProviderJob, Status: status,
			Intended: ptr(true), AttemptRef: t.creator, Result: raw,
		}},
		Creator: &ledger.AttemptKnowledge{RemoteAccepted: ledger.Yes, RemoteEffect: effect},
		Events: []ledger.EventParams{
			{Kind: ledger.EventRemoteJobBound, Data: map[string]string{"remote_job_id": jobID, "kind": KindProviderJob}},
			{Kind: ledger.EventResultStored, Data: map[string]any{"remote_job_id": jobID, "is_error": res.IsError}},
		},
		Jobs: []river.InsertManyParams{job(ReconcileArgs{Operation: l.opRef}, 0)},
	})
}

// settle applies a transition that records what a send or a look at a
// remote job learnt. When the operation changed under this job — it was
// cancelled, or another worker took it over — the transition cannot
// apply, but what was learnt is recorded all the same: a remote job is
// never lost, and the job of an operation whose cancellation was
// requested is cancelled at the provider too.
func (w *Worker) settle(ctx context.Context, l *lease, p *ledger.TransitionParams) error {
	// The record must outlive this job: its context ends when the lease is
	// lost, and then the ledger, not the context, must say so.
	ctx = context.WithoutCancel(ctx)
	_, err := l.transition(ctx, p)
	if err == nil || len(p.RemoteJobs) == 0 || !errors.Is(err, ledger.ErrStateChanged) && !errors.Is(err, ledger.ErrLeaseHeld) {
		return err
	}
	cur, gerr := w.store.OperationGet(ctx, &ledger.OperationGetParams{ID: l.opRef})
	if gerr != nil {
		return errors.Join(err, gerr)
	}
	bound := false
	keep := &ledger.TransitionParams{OperationRef: l.opRef, RemoteJobs: p.RemoteJobs, Creator: p.Creator}
	for _, e := range p.Events {
		switch e.Kind {
		case ledger.EventLookup:
			keep.Events = append(keep.Events, e)
		case ledger.EventRemoteJobBound:
			bound = true
		}
	}
	for _, j := range p.RemoteJobs {
		data := map[string]string{
			"remote_job_id": j.RemoteID, "kind": j.Kind, "status": string(j.Status),
			"operation_state": string(cur.State), "detail": "recorded after the operation changed under the worker",
		}
		kind := ledger.EventRemoteJobObserved
		if bound {
			kind = ledger.EventRemoteJobBound
		}
		keep.Events = append(keep.Events, ledger.EventParams{Kind: kind, Data: data})
		if !cur.CancelRequestedAt.IsZero() {
			keep.Jobs = append(keep.Jobs, job(CancelArgs{Operation: l.opRef, Job: j.RemoteID}, 0))
		}
	}
	if len(keep.Jobs) == 0 && cur.State.Terminal() {
		keep.Jobs = append(keep.Jobs, job(ReconcileArgs{Operation: l.opRef}, 0))
	}
	if _, kerr := w.store.Transition(ctx, keep); kerr != nil {
		return errors.Join(err, fmt.Errorf("record the remote job of an operation that changed: %w", kerr))
	}
	w.logger(cur).Warn("the operation changed while its remote job was being recorded; the job is recorded apart",
		"state", cur.State, "cancel_requested", !cur.CancelRequestedAt.IsZero(), "err", err)
	return nil
}

// recoverSend handles "send started" without a binding: look up first.
// cause is what made the outcome uncertain, when this worker saw it.
func (w *Worker) recoverSend(ctx context.Context, l *lease, cause error) error {
	t, err := w.resolve(ctx, l)
	if t == nil {
		return err
	}
	op := l.op
	why := ""
	if cause != nil {
		why = " (" + cause.Error() + ")"
	}
	if !t.contract.CanLookup() {
		return w.review(ctx, l, ledger.ReasonNoAutomaticResend,
			"the send may have reached the provider"+why+" and its contract offers no lookup; nothing is re-sent automatically")
	}
	retry, err := w.retryPolicy(ctx, op, t.contract)
	if err != nil {
		return err
	}
	since, err := w.sinceSend(ctx, op)
	if err != nil {
		return err
	}
	lr := t.contract.Lookup(ctx, t.up, op.ProviderKey(), op.Arguments)
	if ctx.Err() != nil {
		// A lookup cut short by this worker stopping proves nothing.
		return ctx.Err()
	}
	d := provider.Decide(lr, retry, t.contract.Policy.Contract.Lookup.NotFoundSafeAfter, since)
	w.logger(op).Info("looked up after an uncertain send", "answer", lr.Answer, "job", lr.JobID, "action", d.Action, "retry_policy", retry, "detail", lr.Detail)
	lookupEvent := ledger.EventParams{Kind: ledger.EventLookup, Data: map[string]any{
		"answer": lr.Answer, "remote_job_id": lr.JobID, "action": d.Action, "detail": lr.Detail, "since_send_ms": since.Milliseconds(),
		"retry_policy": retry,
	}}

	switch d.Action {
	case provider.ActionAttach:
		return w.settle(ctx, l, &ledger.TransitionParams{
			From: []ledger.State{ledger.StateSending}, To: ledger.StateRunning, StatusMessage: ptr("attached to " + lr.JobID),
			RemoteJobs: []*ledger.RemoteJobUpsert{{
				Upstream: op.Upstream, Endpoint: t.up.Endpoint(), RemoteID: lr.JobID, Kind: KindProviderJob,
				Status: lr.Answer.JobStatus(), Intended: ptr(true), AttemptRef: t.creator,
			}},
			Creator: &ledger.AttemptKnowledge{RemoteAccepted: ledger.Yes},
			Events:  []ledger.EventParams{lookupEvent, boundVia(lr.JobID, "lookup")},
			Jobs:    []river.InsertManyParams{job(PollArgs{Operation: l.opRef}, 0)},
		})
	case provider.ActionFetch:
		return w.fetchAndFinish(ctx, l, t, lr.JobID, &lookupEvent)
	case provider.ActionRecordFailure:
		return w.settle(ctx, l, &ledger.TransitionParams{
			From: []ledger.State{ledger.StateSending}, To: ledger.StateFailed, StatusMessage: ptr("the provider reports job " + lr.JobID + " " + string(lr.Answer)),
			Error: rpcError(-32603, fmt.Sprintf("the provider reports job %s %s; it is not re-run automatically", lr.JobID, lr.Answer)),
			RemoteJobs: []*ledger.RemoteJobUpsert{{
				Upstream: op.Upstream, Endpoint: t.up.Endpoint(), RemoteID: lr.JobID, Kind: KindProviderJob,
				Status: lr.Answer.JobStatus(), Intended: ptr(true), AttemptRef: t.creator,
			}},
			Creator: &ledger.AttemptKnowledge{RemoteAccepted: ledger.Yes},
			Events: []ledger.EventParams{lookupEvent, boundVia(lr.JobID, "lookup"),
				{Kind: ledger.EventFailed, Data: map[string]string{"remote_job_id": lr.JobID}}},
			Jobs: []river.InsertManyParams{job(ReconcileArgs{Operation: l.opRef}, 0)},
		})
	case provider.ActionWait:
		if _, err := l.transition(ctx, &ledger.TransitionParams{Events: []ledger.EventParams{lookupEvent}}); err != nil {
			return err
		}
		return river.JobSnooze(d.RetryAfter)
	case provider.ActionResend:
		if _, err := l.transition(ctx, &ledger.TransitionParams{
			From: []ledger.State{ledger.StateSending}, To: ledger.StateAccepted, Events: []ledger.EventParams{lookupEvent},
		}); err != nil {
			return err
		}
		return w.send(ctx, l)
	default:
		if _, err := l.transition(ctx, &ledger.TransitionParams{Events: []ledger.EventParams{lookupEvent}}); err != nil {
			return err
		}
		detail := lr.Detail
		if detail == "" {
			detail = fmt.Sprintf("the provider answered %s", lr.Answer)
			if lr.JobID == "" && lr.Answer != provider.NotFound {
				detail += " without naming a job"
			}
		}
		return w.review(ctx, l, d.Reason, "cannot tell whether the provider started the work ("+detail+"); nothing is re-sent until a human resolves it")
	}
}

// retryPolicy is the strictest of the retry policies that apply to op: the
// one recorded when it was accepted, its approval's, and the tool's now.
func (w *Worker) retryPolicy(ctx context.Context, op *ledger.Operation, c *provider.Contract) (string, error) {
	approved := ""
	if op.ApprovalID != 0 {
		a, err := w.store.ApprovalGet(ctx, op.ApprovalID)
		if err != nil {
			return "", fmt.Errorf("read the retry policy of approval %d: %w", op.ApprovalID, err)
		}
		approved = a.RetryPolicy
	}
	return policy.StrictestRetry(op.RetryPolicy, approved, c.Policy.RetryPolicy), nil
}

func boundVia(jobID, via string) ledger.EventParams {
	return ledger.EventParams{Kind: ledger.EventRemoteJobBound, Data: map[string]string{"remote_job_id": jobID, "kind": KindProviderJob, "via": via}}
}

// fetchAndFinish records a completed job's result; lookup, when set, is the
// lookup that found the job, which is bound by this.
func (w *Worker) fetchAndFinish(ctx context.Context, l *lease, t *target, jobID string, lookup *ledger.EventParams) error {
	op := l.op
	var res *mcp.CallToolResult
	if t.contract.CanFetch() {
		f, err := t.contract.Fetch(ctx, t.up, jobID, op.ProviderKey(), op.Arguments)
		if err != nil {
			return fmt.Errorf("fetch the result of job %s: %w", jobID, err)
		}
		res = f.Result
	}
	if res == nil {
		res = &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("job %s completed at %s; the provider contract offers no way to fetch its result", jobID, op.Upstream)}}}
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return err
	}
	var events []ledger.EventParams
	if lookup != nil {
		events = append(events, *lookup, boundVia(jobID, "lookup"))
	}
	return w.settle(ctx, l, &ledger.TransitionParams{
		From: []ledger.State{ledger.StateSending, ledger.StateRunning}, To: ledger.StateCompleted, Result: raw, StatusMessage: ptr(""),
		RemoteJobs: []*ledger.RemoteJobUpsert{{
			Upstream: op.Upstream, Endpoint: t.up.Endpoint(), RemoteID: jobID, Kind: KindProviderJob, Status: ledger.JobCompleted,
			Intended: ptr(true), AttemptRef: t.creator, Result: raw,
		}},
		Creator: &ledger.AttemptKnowledge{RemoteAccepted: ledger.Yes, RemoteEffect: ledger.Yes},
		Events:  append(events, ledger.EventParams{Kind: ledger.EventResultStored, Data: map[string]string{"remote_job_id": jobID, "via": "fetch"}}),
		Jobs:    []river.InsertManyParams{job(ReconcileArgs{Operation: l.opRef}, 0)},
	})
}

// errStillRunning is how one look at a remote job says "not yet".
var errStillRunning = errors.New("the remote job is still running")

// pollBudget is how long one poll job follows a remote job before it gives
// its worker slot back to the other operations being followed. Short waits
// happen inside the job: River releases a snoozed job only on its
// scheduler's next pass, seconds later.
const pollBudget = riverSchedulerLag

// poll follows the bound remote job until it ends, looking every
// UpstreamPoll for up to pollBudget, then snoozes.
func (w *Worker) poll(ctx context.Context, l *lease) error {
	deadline := w.clock().Add(pollBudget)
	for {
		err := w.pollOnce(ctx, l)
		if !errors.Is(err, errStillRunning) {
			return err
		}
		wait := min(w.cfg.Worker.UpstreamPoll, deadline.Sub(w.clock()))
		if wait <= 0 {
			return river.JobSnooze(w.cfg.Worker.UpstreamPoll)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.stopping:
			// Hand the job back at once; the next start picks it up.
			return river.JobSnooze(0)
		case <-time.After(wait):
		}
	}
}

// pollOnce looks at the bound remote job once.
func (w *Worker) pollOnce(ctx context.Context, l *lease) error {
	t, err := w.resolve(ctx, l)
	if t == nil {
		return err
	}
	op := l.op
	jobs, err := w.store.RemoteJobList(ctx, op.ID)
	if err != nil {
		return err
	}
	var bound *ledger.RemoteJob
	for _, j := range jobs {
		if j.Intended {
			bound = j
		}
	}
	if bound == nil {
		return w.review(ctx, l, ledger.ReasonUpstreamOutcomeUnknown, "the operation is running but no remote job is bound")
	}
	if bound.Kind == KindUpstreamTask && bound.UpstreamTaskID != "" {
		return w.pollTask(ctx, l, t, bound)
	}
	return w.pollJob(ctx, l, t, bound)
}

// pollJob looks at a provider job through the provider contract.
func (w *Worker) pollJob(ctx context.Context, l *lease, t *target, bound *ledger.RemoteJob) error {
	op := l.op
	if !t.contract.CanFetch() && !t.contract.CanLookup() {
		return w.review(ctx, l, ledger.ReasonUpstreamOutcomeUnknown, fmt.Sprintf(
			"job %s cannot be followed: the provider contract can neither fetch a job nor look the operation up; resolve it with --fail once the provider's own record shows how it ended", bound.RemoteID))
	}
	f, err := t.contract.Fetch(ctx, t.up, bound.RemoteID, op.ProviderKey(), op.Arguments)
	if err != nil {
		w.logger(op).Warn("poll failed; trying again", "remote_job_id", bound.RemoteID, "err", err)
		return errStillRunning
	}
	crashpoint.Reach(crashpoint.WhilePolling)
	switch f.Answer {
	case provider.Completed:
		return w.fetchAndFinish(ctx, l, t, bound.RemoteID, nil)
	case provider.Failed, provider.Cancelled:
		return w.finishFailed(ctx, l, t, bound.RemoteID, f.Answer.JobStatus(), fmt.Sprintf("the provider reports job %s %s", bound.RemoteID, f.Answer), nil)
	default:
		return errStillRunning
	}
}

// pollTask follows an upstream MCP task.
func (w *Worker) pollTask(ctx context.Context, l *lease, t *target, bound *ledger.RemoteJob) error {
	op := l.op
	task, err := t.up.GetTask(ctx, bound.UpstreamTaskID)
	if rpcErr := (*jsonrpc.Error)(nil); errors.As(err, &rpcErr) {
		// The upstream answered that it does not know the task (unknown,
		// or expired): asking it again changes nothing. The provider's
		// own record may still say how the job went.
		w.logger(op).Warn("the upstream no longer knows the task; following the job through the provider contract",
			"upstream_task_id", bound.UpstreamTaskID, "err", err)
		if !t.contract.CanFetch() && !t.contract.CanLookup() {
			return w.review(ctx, l, ledger.ReasonUpstreamOutcomeUnknown, fmt.Sprintf(
				"the upstream no longer knows task %s (%s) and the provider contract can neither fetch a job nor look the operation up; resolve it once the provider's own record shows how it ended",
				bound.UpstreamTaskID, rpcErr.Message))
		}
		return w.pollJob(ctx, l, t, bound)
	}
	if err != nil {
		w.logger(op).Warn("tasks/get failed; trying again", "upstream_task_id", bound.UpstreamTaskID, "err", err)
		return errStillRunning
	}
	if !task.Status.IsTerminal() {
		crashpoint.Reach(crashpoint.WhilePolling)
		if task.StatusMessage != "" && task.StatusMessage != op.StatusMessage {
			if _, err := l.transition(ctx, &ledger.TransitionParams{StatusMessage: ptr(task.StatusMessage)}); err != nil {
				return err
			}
		}
		return errStillRunning
	}
	switch {
	case task.Status == taskwire.StatusCompleted,
		// 2025-11-25 reports a tool result with isError:true as a failed
		// task without an error: the result is the outcome.
		task.Status == taskwire.StatusFailed && task.Error == nil && t.up.OffersTasks() == taskwire.EraLegacy:
		res, err := t.up.TaskResult(ctx, task.ID)
		if err != nil {
			var rpcErr *jsonrpc.Error
			if errors.As(err, &rpcErr) {
				return w.finishFailed(ctx, l, t, bound.RemoteID, ledger.JobFailed, rpcErr.Message, rpcError(rpcErr.Code, rpcErr.Message))
			}
			return fmt.Errorf("read the result of upstream task %s: %w", task.ID, err)
		}
		return w.finishTask(ctx, l, t, bound, res)
	case task.Status == taskwire.StatusFailed:
		var raw json.RawMessage
		msg := statusOr(task.StatusMessage, "the upstream task failed")
		if task.Error != nil {
			raw, _ = json.Marshal(task.Error)
			msg = task.Error.Message
		}
		return w.finishFailed(ctx, l, t, bound.RemoteID, ledger.JobFailed, msg, raw)
	default: // cancelled upstream
		return w.finishFailed(ctx, l, t, bound.RemoteID, ledger.JobCancelled, "the upstream cancelled the task", nil)
	}
}

// finishTask records a completed upstream task's result; the provider's job
// ID, when the result names one, replaces the task ID as the job's key.
func (w *Worker) finishTask(ctx context.Context, l *lease, t *target, bound *ledger.RemoteJob, res *mcp.CallToolResult) error {
	raw, err := json.Marshal(res)
	if err != nil {
		return err
	}
	jobID := bound.RemoteID
	if id := t.contract.JobID(res); id != "" {
		jobID = id
	}
	status, effect := ledger.JobCompleted, ledger.Yes
	if res.IsError {
		status, effect = ledger.JobFailed, ledger.Unknown
	}
	return w.settle(ctx, l, &ledger.TransitionParams{
		From: []ledger.State{ledger.StateRunning}, To: ledger.StateCompleted, Result: raw, StatusMessage: ptr(""),
		RemoteJobs: []*ledger.RemoteJobUpsert{{
			Upstream: l.op.Upstream, RemoteID: jobID, RenameFrom: bound.RemoteID, Status: status, Result: raw,
		}},
		Creator: &ledger.AttemptKnowledge{RemoteEffect: effect},
		Events:  []ledger.EventParams{{Kind: ledger.EventResultStored, Data: map[string]any{"remote_job_id": jobID, "is_error": res.IsError}}},
		Jobs:    []river.InsertManyParams{job(ReconcileArgs{Operation: l.opRef}, 0)},
	})
}

// finishFailed ends the operation as failed after its remote job failed.
func (w *Worker) finishFailed(ctx context.Context, l *lease, t *target, jobID string, status ledger.JobStatus, msg string, rpcErr json.RawMessage) error {
	if rpcErr == nil {
		rpcErr = rpcError(-32603, msg)
	}
	to := ledger.StateFailed
	if status == ledger.JobCancelled {
		to = ledger.StateCancelled
	}
	return w.settle(ctx, l, &ledger.TransitionParams{
		From: []ledger.State{ledger.StateRunning, ledger.StateSending}, To: to, Error: rpcErr, StatusMessage: &msg,
		RemoteJobs: []*ledger.RemoteJobUpsert{{Upstream: l.op.Upstream, Endpoint: t.up.Endpoint(), RemoteID: jobID, Status: status}},
		Events:     []ledger.EventParams{{Kind: ledger.EventFailed, Data: map[string]string{"remote_job_id": jobID, "message": msg}}},
		Jobs:       []river.InsertManyParams{job(ReconcileArgs{Operation: l.opRef}, 0)},
	})
}

// refused ends an operation whose call the upstream refused before any
// work could start (or that could not even be prepared): no remote job
// started, so its reservation is released.
func (w *Worker) refused(ctx context.Context, l *lease, code int64, msg string) error {
	event := ledger.EventParams{Kind: ledger.EventFailed, Data: map[string]any{"code": code, "message": msg, "nothing_started": true}}
	nothing := &ledger.AttemptKnowledge{RemoteAccepted: ledger.No, RemoteEffect: ledger.No, ChargeStatus: ledger.No}
	ctx = context.WithoutCancel(ctx)
	_, err := l.transition(ctx, &ledger.TransitionParams{
		From: []ledger.State{ledger.StateSending}, To: ledger.StateFailed, Error: rpcError(code, msg), StatusMessage: &msg,
		Events:      []ledger.EventParams{event},
		Reservation: &ledger.ReservationUpdate{Status: ledger.ReservationReleased},
		Creator:     nothing,
	})
	if errors.Is(err, ledger.ErrStateChanged) || errors.Is(err, ledger.ErrLeaseHeld) {
		// The operation changed meanwhile (it was cancelled): the refusal
		// is still what this send came to, and lets reconciliation release
		// what was reserved for it.
		_, err = w.store.Transition(ctx, &ledger.TransitionParams{OperationRef: l.opRef, Events: []ledger.EventParams{event}, Creator: nothing})
	}
	return err
}

// review stops the operation for a human.
func (w *Worker) review(ctx context.Context, l *lease, reason, msg string) error {
	w.logger(l.op).Warn("operation needs review", "reason", reason, "message", msg)
	_, err := l.transition(ctx, &ledger.TransitionParams{
		To: ledger.StateReview, ReviewReason: &reason, StatusMessage: &msg,
		Events: []ledger.EventParams{{Kind: ledger.EventRequireReview, Data: map[string]string{"reason": reason, "message": msg}}},
	})
	return err
}

// sinceSend is how long ago the latest send started; zero when none did.
func (w *Worker) sinceSend(ctx context.Context, op *ledger.Operation) (time.Duration, error) {
	evs, err := w.store.EventList(ctx, op.ID)
	if err != nil {
		return 0, fmt.Errorf("read when operation %s was last sent: %w", op.OperationID, err)
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Kind == ledger.EventSendStarted {
			return w.clock().Sub(evs[i].CreatedAt), nil
		}
	}
	return 0, nil
}

// creatorAttempt is the row ID of the attempt that created the operation;
// zero when the ledger has none (an operation written by hand).
func (w *Worker) creatorAttempt(ctx context.Context, op *ledger.Operation) (int64, error) {
	atts, err := w.store.AttemptList(ctx, op.ID)
	if err != nil {
		return 0, fmt.Errorf("read the attempts of operation %s: %w", op.OperationID, err)
	}
	for _, a := range atts {
		if a.OperationRef == op.ID && a.Decision == ledger.DecisionCreated {
			return a.ID, nil
		}
	}
	return 0, nil
}

func rpcError(code int64, msg string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"code": code, "message": msg})
	return b
}

func statusOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
