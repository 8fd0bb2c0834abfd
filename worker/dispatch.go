package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/provider"
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
	case ledger.StateInputRequired:
		return w.waitingQuestion(ctx, l)
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
	c := w.catalog.ForOperation(op.Upstream, op.Tool, op.Contract)
	up, ok := w.upstreams.Upstream(op.Upstream, op.Tenant)
	if c == nil || !ok {
		msg := fmt.Sprintf("the configuration no longer has consequential tool %s.%s; resolve with taskgate ops resolve", op.Upstream, op.Tool)
		_, err := l.transition(ctx, &ledger.TransitionParams{
			To: ledger.StateReview, ReviewReason: new(ledger.ReasonConfigurationChanged), StatusMessage: &msg,
			Events: []ledger.EventParams{{Kind: ledger.EventRequireReview, Data: ledger.RequireReviewData{Reason: ledger.ReasonConfigurationChanged}}},
		})
		return nil, err
	}
	creator, err := w.creatorAttempt(ctx, op)
	if err != nil {
		return nil, err
	}
	return &target{contract: c, up: up, creator: creator}, nil
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
		data := ledger.RemoteJobData{
			Detail: "recorded after the operation changed under the worker", Kind: j.Kind, OperationState: cur.State,
			RemoteJobID: j.RemoteJobID, Status: j.Status,
		}
		kind := ledger.EventRemoteJobObserved
		if bound {
			kind = ledger.EventRemoteJobBound
		}
		keep.Events = append(keep.Events, ledger.EventParams{Kind: kind, Data: data})
		if !cur.CancelRequestedAt.IsZero() {
			keep.Enqueue = append(keep.Enqueue, job(CancelArgs{Operation: l.opRef, Job: j.RemoteJobID}, 0))
		}
	}
	if len(keep.Enqueue) == 0 && cur.State.Terminal() {
		keep.Enqueue = append(keep.Enqueue, job(ReconcileArgs{Operation: l.opRef}, 0))
	}
	if _, kerr := w.store.Transition(ctx, keep); kerr != nil {
		return errors.Join(err, fmt.Errorf("record the remote job of an operation that changed: %w", kerr))
	}
	if cur.State == ledger.StateCancelled && !cur.CancelRequestedAt.IsZero() {
		// A client may cancel at any time, also while its send comes
		// back: the job is recorded, and cancelled at the provider above.
		w.logger(cur).Info("the operation was cancelled while its remote job was being recorded; the job is recorded and its cancellation sent",
			"remote_jobs", len(p.RemoteJobs))
		return nil
	}
	w.logger(cur).Warn("the operation changed while its remote job was being recorded; the job is recorded apart",
		"state", cur.State, "cancel_requested", !cur.CancelRequestedAt.IsZero(), "err", err)
	return nil
}

// fetchAndFinish records a completed job's result; lookup, when set, is the
// lookup that found the job, which is bound by this.
func (w *Worker) fetchAndFinish(ctx context.Context, l *lease, t *target, jobID string, lookup *ledger.EventParams) error {
	op := l.op
	var res *mcp.CallToolResult
	if t.contract.CanFetch() {
		f, err := t.contract.Fetch(ctx, t.up, jobID, op.ProviderKey(), l.args)
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
		From: []ledger.State{ledger.StateSending, ledger.StateRunning, ledger.StateInputRequired}, To: ledger.StateCompleted, Result: raw, StatusMessage: new(""),
		Input: withdrawn(l.op),
		RemoteJobs: []*ledger.RemoteJobUpsert{{
			Upstream: op.Upstream, Endpoint: t.up.Endpoint(), RemoteJobID: jobID, Kind: ledger.JobKindProviderJob, Status: ledger.JobCompleted,
			Intended: new(true), AttemptRef: t.creator, Result: raw,
		}},
		Creator: &ledger.AttemptKnowledge{RemoteAccepted: ledger.Yes, RemoteEffect: ledger.Yes},
		Events:  append(events, ledger.EventParams{Kind: ledger.EventResultStored, Data: ledger.ResultStoredData{RemoteJobID: jobID, Via: "fetch"}}),
		Enqueue: []river.InsertManyParams{job(ReconcileArgs{Operation: l.opRef}, 0)},
	})
}

// review stops the operation for a human.
func (w *Worker) review(ctx context.Context, l *lease, reason, msg string) error {
	w.logger(l.op).Warn("operation needs review", "reason", reason, "message", msg)
	_, err := l.transition(ctx, &ledger.TransitionParams{
		To: ledger.StateReview, ReviewReason: &reason, StatusMessage: &msg,
		Events: []ledger.EventParams{{Kind: ledger.EventRequireReview, Data: ledger.RequireReviewData{Message: msg, Reason: reason}}},
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

// sentWith is the credential (Upstream.Credential) the latest send
// carried; "" when none was sent or the send recorded none.
func (w *Worker) sentWith(ctx context.Context, op *ledger.Operation) (string, error) {
	evs, err := w.store.EventList(ctx, op.ID)
	if err != nil {
		return "", fmt.Errorf("read the credential operation %s was last sent with: %w", op.OperationID, err)
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Kind == ledger.EventSendStarted {
			var d ledger.SendStartedData
			if err := json.Unmarshal(evs[i].Data, &d); err != nil {
				return "", fmt.Errorf("read the send_started event of operation %s: %w", op.OperationID, err)
			}
			return d.Credential, nil
		}
	}
	return "", nil
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
