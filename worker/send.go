package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/internal/crashpoint"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/taskwire"
)

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
		StatusMessage: new("sending to " + l.op.Upstream),
		Events:        []ledger.EventParams{{Kind: ledger.EventSendStarted, Data: ledger.SendStartedData{Send: l.op.SendCount + 1, Worker: l.owner, Credential: t.up.Credential()}}},
	})
	if err != nil {
		return err
	}
	crashpoint.Reach(crashpoint.AfterSendStarted)

	s, err := t.contract.PrepareSend(l.args, op.ProviderKey())
	if err != nil {
		return w.refused(ctx, l, -32602, err.Error())
	}
	params := &mcp.CallToolParams{Name: op.Tool, Arguments: s.Arguments}
	if len(s.Meta) > 0 {
		params.Meta = mcp.Meta(s.Meta)
	}
	if err := continuation(params, op); err != nil {
		return w.refused(ctx, l, -32603, err.Error())
	}
	var ttl *time.Duration
	if op.TTL > 0 {
		ttl = &op.TTL
	}
	log.Info("sending", "upstream", op.Upstream, "tool", op.Tool, "as_task", asTask, "send", op.SendCount)
	ask, told := w.elicitThroughTask(ctx, l)
	task, res, err := t.up.Send(ctx, params, s.Header, asTask, ttl, ask)
	crashpoint.Reach(crashpoint.AfterUpstreamAccept)
	var rpcErr *jsonrpc.Error
	switch {
	case err == nil:
	case errors.Is(err, ErrNotSent):
		// It never left: undo "send started" so that the next try sends.
		log.Warn("upstream not reachable; will send again", "err", err)
		if _, terr := l.transition(ctx, &ledger.TransitionParams{
			From: []ledger.State{ledger.StateSending}, To: ledger.StateAccepted, StatusMessage: new("waiting for " + op.Upstream),
			Events: []ledger.EventParams{{Kind: ledger.EventLookup, Data: ledger.LookupData{Answer: ledger.LookupNotSent, Detail: err.Error()}}},
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
	return w.finishDirect(ctx, l, t, res, told.declined.Load())
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
		From: []ledger.State{ledger.StateSending}, To: ledger.StateRunning, StatusMessage: new(statusOr(task.StatusMessage, "running at "+l.op.Upstream)),
		// A cancel kept while the call was sent left its reason, which stays.
		StatusMessageWas: &l.op.StatusMessage,
		// The answers of earlier rounds went with the send; only the
		// task's own questions are answered from now on.
		Input: &ledger.InputUpdate{},
		RemoteJobs: []*ledger.RemoteJobUpsert{{
			Upstream: l.op.Upstream, Endpoint: t.up.Endpoint(), RemoteJobID: task.ID, UpstreamTaskID: task.ID,
			Kind: ledger.JobKindUpstreamTask, Status: ledger.JobRunning, Intended: new(true), AttemptRef: t.creator,
		}},
		Creator: &ledger.AttemptKnowledge{RemoteAccepted: ledger.Yes},
		Events:  []ledger.EventParams{{Kind: ledger.EventRemoteJobBound, Data: ledger.RemoteJobData{Kind: ledger.JobKindUpstreamTask, RemoteJobID: task.ID}}},
		Enqueue: []river.InsertManyParams{job(PollArgs{Operation: l.opRef}, 0)},
	})
}

// finishDirect records a result the upstream returned directly; declined
// says the upstream was given the client's decline of its question within
// the call.
func (w *Worker) finishDirect(ctx context.Context, l *lease, t *target, res *mcp.CallToolResult, declined bool) error {
	ids := t.contract.RemoteJobIDs(res)
	first := ""
	if len(ids) > 0 {
		first = ids[0]
	}
	switch outcomeOf(res, first, declined) {
	case outcomeQuestion:
		return w.askClient(ctx, l, res)
	case outcomeNothingStarted:
		return w.declinedCall(ctx, l, res)
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
	jobResult := raw
	switch {
	case fansOut(l.op, ids):
		// One answer for several jobs: it is the operation's result, not
		// any one job's, and an error answer does not say which of them
		// failed; reconciliation asks the provider about each. A result
		// that names no job leaves them to the lookup to find.
		jobResult = nil
		if res.IsError {
			status = ledger.JobUnknown
		}
	case len(ids) == 0:
		// The provider names no job: the operation ID is its only handle.
		ids = []string{"call:" + l.op.ProviderKey()}
		first = ids[0]
	}
	jobs := make([]boundJob, len(ids))
	for i, id := range ids {
		jobs[i] = boundJob{id: id, status: status}
	}
	ups, events := bindJobs(l, t, jobs, jobResult, "")
	return w.settle(ctx, l, &ledger.TransitionParams{
		From: []ledger.State{ledger.StateSending, ledger.StateRunning}, To: ledger.StateCompleted, Result: raw, StatusMessage: new(""),
		RemoteJobs: ups,
		Creator:    &ledger.AttemptKnowledge{RemoteAccepted: ledger.Yes, RemoteEffect: effect},
		Events:     append(events, ledger.EventParams{Kind: ledger.EventResultStored, Data: ledger.ResultStoredData{IsError: new(res.IsError), RemoteJobID: first}}),
		Enqueue:    []river.InsertManyParams{job(ReconcileArgs{Operation: l.opRef}, 0)},
	})
}

// declinedCall records the error an upstream answered a call with after
// the client declined its question: the send started nothing. The decline
// already ended the operation and released its reservation.
func (w *Worker) declinedCall(ctx context.Context, l *lease, res *mcp.CallToolResult) error {
	msg := ledger.RedactSecretText("the user declined the upstream's question and the upstream answered: "+resultText(res), l.args, l.op.SecretArguments)
	_, err := l.transition(context.WithoutCancel(ctx), &ledger.TransitionParams{
		From:    []ledger.State{ledger.StateCancelled},
		Events:  []ledger.EventParams{{Kind: ledger.EventFailed, Data: ledger.FailedData{Message: msg, NothingStarted: true}}},
		Creator: &ledger.AttemptKnowledge{RemoteAccepted: ledger.No, RemoteEffect: ledger.No, ChargeStatus: ledger.No},
		Enqueue: []river.InsertManyParams{job(ReconcileArgs{Operation: l.opRef}, 0)},
	})
	if err == nil {
		w.logger(l.op).Info("the upstream answered the declined question with an error naming no job; nothing started")
	}
	return err
}

// resultText is the text content of res.
func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			if b.Len() > 0 {
				b.WriteString(" ")
			}
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// refused ends an operation whose call the upstream refused before any
// work could start (or that could not even be prepared): no remote job
// started, so its reservation is released.
func (w *Worker) refused(ctx context.Context, l *lease, code int64, msg string) error {
	event := ledger.EventParams{Kind: ledger.EventFailed, Data: ledger.FailedData{Code: code, Message: msg, NothingStarted: true}}
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
