package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/ledger"
)

// askClient records a question the upstream asked in answer to a send (a
// 2026-07-28 input_required result). Where the client that started the
// operation can answer, the operation waits in input_required with the
// question, the upstream's requestState and nothing else to do: the answer,
// recorded by the gateway, queues the next send. Where it cannot, the
// operation waits for a human, as nothing can answer.
func (w *Worker) askClient(ctx context.Context, l *lease, res *mcp.CallToolResult) error {
	return w.ask(ctx, l, res.InputRequests, res.RequestState, "")
}

// ask records the questions q of the upstream: in answer to a send, with
// its requestState, or those of the upstream task taskID, whose poll job
// goes on following the task while the question waits and gives it the
// answer.
func (w *Worker) ask(ctx context.Context, l *lease, q mcp.InputRequestMap, requestState, taskID string) error {
	op := l.op
	if !answerable(op.InputChannel, q) {
		msg := "the upstream asked for input, and the client that started this operation has no way to answer"
		_, err := l.transition(ctx, &ledger.TransitionParams{
			To: ledger.StateReview, ReviewReason: new(ledger.ReasonUpstreamInputRequired), StatusMessage: &msg,
			Events: []ledger.EventParams{{Kind: ledger.EventRequireReview, Data: ledger.RequireReviewData{Reason: ledger.ReasonUpstreamInputRequired}}},
		})
		return err
	}
	used, err := w.usedInputKeys(ctx, op)
	if err != nil {
		return err
	}
	shown, renamed := uniqueKeys(q, used, op.SendCount)
	requests, err := json.Marshal(shown)
	if err != nil {
		return fmt.Errorf("encode the upstream's input requests: %w", err)
	}
	p := &ledger.TransitionParams{
		From: []ledger.State{ledger.StateSending}, To: ledger.StateInputRequired, StatusMessage: new(ledger.RedactSecretText(questionSummary(q), l.args, op.SecretArguments)),
		Input: &ledger.InputUpdate{Requests: requests, RequestState: requestState},
		Events: []ledger.EventParams{{Kind: ledger.EventInputRequested, Data: ledger.InputRequestedData{
			Channel: op.InputChannel, RequestState: requestState != "", Renamed: renamed,
			Requests: ledger.RedactSecrets(requests, l.args, op.SecretArguments), Send: op.SendCount, UpstreamTask: taskID,
		}}},
	}
	if taskID != "" {
		// The poll job keeps the lease: it sees the task end, or move on,
		// while the question waits.
		p.From = []ledger.State{ledger.StateRunning}
	} else {
		// No worker holds a question that waits for a later send: recovery
		// leaves it alone.
		p.Lease = &ledger.Lease{}
		if op.TTL > 0 {
			// A question nobody answers ends with the task's retention.
			p.Enqueue = []river.InsertManyParams{job(DispatchArgs{Operation: l.opRef}, op.TTL)}
		}
	}
	_, err = l.transition(context.WithoutCancel(ctx), p)
	if err == nil {
		w.logger(op).Info("the upstream asked for input; waiting for the client's answer", "keys", keysOf(shown), "channel", op.InputChannel, "upstream_task_id", taskID)
	}
	return err
}

// usedInputKeys are the keys under which the operation's client was asked
// before.
func (w *Worker) usedInputKeys(ctx context.Context, op *ledger.Operation) (map[string]bool, error) {
	events, err := w.store.EventList(ctx, op.ID)
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for _, e := range events {
		if e.Kind != ledger.EventInputRequested {
			continue
		}
		d, err := ledger.DecodeEventData[ledger.InputRequestedData](e)
		if err != nil {
			return nil, err
		}
		var reqs map[string]json.RawMessage
		if err := json.Unmarshal(d.Requests, &reqs); err != nil {
			return nil, fmt.Errorf("the questions of %s are unreadable: %w", op.OperationID, err)
		}
		for k := range reqs {
			used[k] = true
		}
	}
	return used, nil
}

// uniqueKeys keys q as the client is to see it: a key the client was asked
// under before becomes KEY~SEND (and, should that be taken too, KEY~SEND~N),
// because a task's input request keys must never repeat. renamed maps each
// new key to the upstream's; nil when none changed.
func uniqueKeys(q mcp.InputRequestMap, used map[string]bool, send int) (mcp.InputRequestMap, map[string]string) {
	shown := make(mcp.InputRequestMap, len(q))
	var renamed map[string]string
	for _, k := range keysOf(q) {
		key := k
		if used[key] {
			key = fmt.Sprintf("%s~%d", k, send)
			for n := 2; used[key] || q[key] != nil; n++ {
				key = fmt.Sprintf("%s~%d~%d", k, send, n)
			}
			if renamed == nil {
				renamed = map[string]string{}
			}
			renamed[key] = k
		}
		used[key] = true
		shown[key] = q[k]
	}
	return shown, renamed
}

// answerable reports whether a client reached through channel can answer
// every request of q: a 2025-11-25 client on tasks/result, or a client
// asked in its call's result for having declared elicitation, is asked
// only elicitations; a 2026-07-28 client with tasks takes any input
// request.
func answerable(channel ledger.InputChannel, q mcp.InputRequestMap) bool {
	switch channel {
	case ledger.InputChannelTaskUpdate:
		return true
	case ledger.InputChannelTaskResult, ledger.InputChannelCallResult:
		for _, r := range q {
			if _, ok := r.(*mcp.ElicitParams); !ok {
				return false
			}
		}
		return true
	}
	return false
}

// questionSummary is the status message of an operation waiting on q.
func questionSummary(q mcp.InputRequestMap) string {
	for _, k := range keysOf(q) {
		if e, ok := q[k].(*mcp.ElicitParams); ok && e.Message != "" {
			return "the upstream asks: " + e.Message
		}
	}
	return "the upstream asks for input"
}

func keysOf(q mcp.InputRequestMap) []string {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// continuation adds the recorded answers and the upstream's requestState,
// untouched, to a send that follows a question.
func continuation(params *mcp.CallToolParams, op *ledger.Operation) error {
	if len(op.InputResponses) == 0 {
		return nil
	}
	var responses mcp.InputResponseMap
	if err := json.Unmarshal(op.InputResponses, &responses); err != nil {
		return fmt.Errorf("the recorded answers to the upstream's question are unreadable: %w", err)
	}
	params.InputResponses = responses
	params.RequestState = op.RequestState
	return nil
}

// waitingQuestion handles a job for an operation that waits on a
// question: an upstream task's question is followed with the task; one
// asked within a call that died with its worker goes to review; one the
// client has not answered within the task's retention ends the operation.
// A job that comes early (a question asked again since) waits until the
// latest question is due.
func (w *Worker) waitingQuestion(ctx context.Context, l *lease) error {
	op := l.op
	e, q, err := w.latestQuestion(ctx, op)
	if err != nil {
		return err
	}
	switch {
	case q.UpstreamTask != "":
		// The upstream task that asked is followed while it waits.
		return w.poll(ctx, l)
	case q.InFlight:
		// This job holds the lease: the worker that asked is gone.
		return w.questionLost(ctx, l)
	}
	if op.TTL <= 0 || e == nil {
		return nil
	}
	if due := e.CreatedAt.Add(op.TTL); w.clock().Before(due) {
		return river.JobSnooze(due.Sub(w.clock()))
	}
	return w.unanswered(ctx, l, "")
}

// unanswered ends an operation whose client did not answer the upstream's
// question within the task's retention. The upstream task taskID that
// asked, if any, is asked to cancel, since it waits on an answer that will
// never come and must not go on without it.
func (w *Worker) unanswered(ctx context.Context, l *lease, taskID string) error {
	msg := "nobody answered the upstream's question within the task's retention; nothing more was sent"
	next := []river.InsertManyParams{job(ReconcileArgs{Operation: l.opRef}, 0)}
	if taskID != "" {
		msg = "nobody answered the upstream task's question within the task's retention; the upstream task is asked to cancel"
		next = []river.InsertManyParams{job(CancelArgs{Operation: l.opRef}, 0)}
	}
	_, err := l.transition(context.WithoutCancel(ctx), &ledger.TransitionParams{
		From: []ledger.State{ledger.StateInputRequired}, To: ledger.StateFailed, StatusMessage: &msg,
		Error:       rpcError(-32603, msg),
		Input:       &ledger.InputUpdate{},
		Reservation: &ledger.ReservationUpdate{Status: ledger.ReservationReleased},
		Events:      []ledger.EventParams{{Kind: ledger.EventFailed, Data: ledger.FailedData{Code: -32603, Message: msg}}},
		Enqueue:     next,
	})
	return err
}

// elicitThroughTask answers a 2025-11-25 upstream's elicitation/create
// within the call by asking the operation's client through the task: the
// operation waits in input_required with the question while this worker
// holds its lease and the call, until the gateway records the answer (and
// moves it back to sending) or the operation ends. A client that cannot be
// asked gets nil: the upstream package then declines, as before. When the
// upstream gives up on the question first, it is withdrawn, so that the
// call's outcome is recovered as any uncertain send is; when this worker
// stops (jobCtx ends), the question stays for recovery to find, which
// sends the operation to review: nothing can answer the call any more.
// The relayed it returns says what the client's answers told the upstream.
func (w *Worker) elicitThroughTask(jobCtx context.Context, l *lease) (Elicit, *relayed) {
	told := &relayed{}
	if l.op.InputChannel == ledger.InputChannelNone {
		return nil, told
	}
	// The callback runs on the connection's goroutine, possibly while the
	// call has already returned to the job's: it reads the operation as it
	// was sent and writes the ledger as the lease holder, never l.op.
	op := l.op
	var asked atomic.Int32
	hold := func(ctx context.Context, p *ledger.TransitionParams) error {
		p.OperationRef, p.Owner = l.opRef, l.owner
		_, err := w.store.Transition(ctx, p)
		return err
	}
	ask := func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
		key := fmt.Sprintf("send%d_elicitation%d", op.SendCount, asked.Add(1))
		q := mcp.InputRequestMap{key: p}
		requests, err := json.Marshal(q)
		if err != nil {
			return nil, fmt.Errorf("encode the upstream's elicitation: %w", err)
		}
		if err := hold(context.WithoutCancel(ctx), &ledger.TransitionParams{
			From: []ledger.State{ledger.StateSending}, To: ledger.StateInputRequired, StatusMessage: new(ledger.RedactSecretText(questionSummary(q), l.args, op.SecretArguments)),
			Input: &ledger.InputUpdate{Requests: requests},
			Events: []ledger.EventParams{{Kind: ledger.EventInputRequested, Data: ledger.InputRequestedData{
				Channel: op.InputChannel, InFlight: true, Requests: ledger.RedactSecrets(requests, l.args, op.SecretArguments), Send: op.SendCount,
			}}},
		}); err != nil {
			return nil, err
		}
		w.logger(op).Info("the upstream asked for input within the call; waiting for the client's answer", "key", key)
		// A person may take long to answer; the rest of this job runs
		// without a turn.
		l.turn.pause()
		tick := time.NewTicker(w.cfg.PollInterval)
		defer tick.Stop()
		for {
			cur, err := w.store.OperationGet(context.WithoutCancel(ctx), &ledger.OperationGetParams{ID: l.opRef})
			if err != nil {
				return nil, err
			}
			switch {
			case cur.State == ledger.StateSending:
				var answers map[string]json.RawMessage
				var res mcp.ElicitResult
				if err := json.Unmarshal(cur.InputResponses, &answers); err != nil || json.Unmarshal(answers[key], &res) != nil {
					return nil, fmt.Errorf("the recorded answer to %s is unreadable", key)
				}
				return &res, nil
			case cur.State == ledger.StateCancelled:
				// Declined (the answer is relayed as it was given), or
				// the task was cancelled (the upstream is told so).
				var answers map[string]json.RawMessage
				var res mcp.ElicitResult
				if json.Unmarshal(cur.InputResponses, &answers) == nil && json.Unmarshal(answers[key], &res) == nil && res.Action != "" {
					told.declined.Store(true)
					return &res, nil
				}
				return &mcp.ElicitResult{Action: "cancel"}, nil
			case cur.State != ledger.StateInputRequired:
				return nil, fmt.Errorf("operation became %s while its question waited", cur.State)
			}
			select {
			case <-jobCtx.Done():
				return nil, fmt.Errorf("the worker stopped while the upstream's question waited: %w", context.Cause(jobCtx))
			case <-ctx.Done():
				terr := hold(context.WithoutCancel(ctx), &ledger.TransitionParams{
					From: []ledger.State{ledger.StateInputRequired}, To: ledger.StateSending, Input: &ledger.InputUpdate{},
					StatusMessage: new("the upstream's call ended before its question was answered"),
				})
				return nil, errors.Join(ctx.Err(), terr)
			case <-tick.C:
			}
		}
	}
	return ask, told
}

// taskElicitationKey is the key a 2025-11-25 upstream task's question is
// recorded under: its elicitation/create has none of its own.
const taskElicitationKey = "task_elicitation"

// elicitForTask answers the elicitation/create a 2025-11-25 upstream task
// taskID sends on tasks/result by asking the operation's client, as for a
// 2026-07-28 task's question: the operation waits in input_required while
// the poll job keeps its lease, and the answer the gateway records, a
// decline too, is the elicitation's result. A question the task asks again
// on a later tasks/result (the earlier one ended first, or this gateway
// restarted) is not asked anew: its answer, recorded or still to come, is
// the one given. It runs only while TaskResult blocks the poll job, which
// returns after it, so it may use l.
func (w *Worker) elicitForTask(l *lease, taskID string) Elicit {
	return func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
		cur, err := w.store.OperationGet(ctx, &ledger.OperationGetParams{ID: l.opRef})
		if err != nil {
			return nil, err
		}
		l.op = cur
		_, asked, err := w.latestQuestion(ctx, cur)
		if err != nil {
			return nil, err
		}
		q := mcp.InputRequestMap{taskElicitationKey: p}
		again := asked.UpstreamTask == taskID && sameQuestion(asked, w.redactQuestion(l, q)) &&
			(cur.State == ledger.StateInputRequired || cur.State == ledger.StateRunning && len(cur.InputResponses) > 0)
		if !again {
			if cur.State == ledger.StateInputRequired {
				// The task asks something else now: the client is asked that.
				if _, err := l.transition(ctx, &ledger.TransitionParams{
					From: []ledger.State{ledger.StateInputRequired}, To: ledger.StateRunning, Input: &ledger.InputUpdate{},
				}); err != nil {
					return nil, err
				}
			}
			if err := w.ask(ctx, l, q, "", taskID); err != nil {
				return nil, err
			}
			if l.op.State != ledger.StateInputRequired {
				return nil, fmt.Errorf("the client of operation %q cannot answer this question", cur.OperationID)
			}
		}
		// A person may take long to answer; the rest of this job runs
		// without a turn.
		l.turn.pause()
		tick := time.NewTicker(w.cfg.PollInterval)
		defer tick.Stop()
		for {
			cur, err := w.store.OperationGet(ctx, &ledger.OperationGetParams{ID: l.opRef})
			if err != nil {
				return nil, err
			}
			l.op = cur
			switch {
			case cur.State == ledger.StateRunning && len(cur.InputResponses) > 0:
				var answers map[string]json.RawMessage
				var res mcp.ElicitResult
				if err := json.Unmarshal(cur.InputResponses, &answers); err != nil || json.Unmarshal(answers[taskElicitationKey], &res) != nil {
					return nil, fmt.Errorf("the recorded answer to the question of upstream task %s is unreadable", taskID)
				}
				// Delivered by returning it: the operation no longer
				// holds it.
				if _, err := l.transition(context.WithoutCancel(ctx), &ledger.TransitionParams{
					From: []ledger.State{ledger.StateRunning}, Input: &ledger.InputUpdate{},
				}); err != nil {
					return nil, err
				}
				w.logger(cur).Info("the answer went to the upstream task that asked", "upstream_task_id", taskID, "action", res.Action)
				return &res, nil
			case cur.State != ledger.StateInputRequired:
				return nil, fmt.Errorf("operation %q became %s while the question of upstream task %s waited", cur.OperationID, cur.State, taskID)
			}
			select {
			case <-ctx.Done():
				// The question stays recorded; the task asks it again.
				return nil, ctx.Err()
			case <-tick.C:
			}
		}
	}
}

// redactQuestion is q as the ledger records it, with the values of the
// operation's secret arguments redacted.
func (w *Worker) redactQuestion(l *lease, q mcp.InputRequestMap) json.RawMessage {
	raw, err := json.Marshal(q)
	if err != nil {
		return nil
	}
	return ledger.RedactSecrets(raw, l.args, l.op.SecretArguments)
}

// sameQuestion reports whether the latest question asked, as recorded,
// was one question, and the same as the one request of recorded (as
// redactQuestion records it), whatever their keys.
func sameQuestion(asked ledger.InputRequestedData, recorded json.RawMessage) bool {
	var was, is map[string]json.RawMessage
	if json.Unmarshal(asked.Requests, &was) != nil || json.Unmarshal(recorded, &is) != nil || len(was) != 1 || len(is) != 1 {
		return false
	}
	var a, b json.RawMessage
	for _, r := range was {
		a = r
	}
	for _, r := range is {
		b = r
	}
	ca, err := canon.Canonicalize(a)
	if err != nil {
		return false
	}
	cb, err := canon.Canonicalize(b)
	return err == nil && bytes.Equal(ca, cb)
}

// relayed is what the client's answers, relayed within one call, told the
// upstream.
type relayed struct {
	// declined: the upstream was given the client's own answer declining
	// (or cancelling) its question. An operation cancelled while the
	// question waited is not such an answer: the upstream was told
	// "cancel" by the gateway, and what it did is its own.
	declined atomic.Bool
}

// directOutcome is what a result the upstream returned directly records.
type directOutcome int

const (
	// outcomeJob: the result is that of a remote job, the one it names or
	// else the one the operation ID keys at the provider.
	outcomeJob directOutcome = iota
	// outcomeQuestion: the upstream asks the client something first.
	outcomeQuestion
	// outcomeNothingStarted: the client declined the upstream's question
	// within the call and the upstream answered with an error naming no
	// job; that is the upstream saying it did not do the work.
	outcomeNothingStarted
)

// outcomeOf decides what res records: jobID is the remote job res names
// ("" for none), declined whether the upstream was given the client's
// decline within the call.
func outcomeOf(res *mcp.CallToolResult, jobID string, declined bool) directOutcome {
	switch {
	case len(res.InputRequests) > 0:
		return outcomeQuestion
	case declined && res.IsError && jobID == "":
		return outcomeNothingStarted
	}
	return outcomeJob
}

// questionLost sends to review an operation whose question was asked
// within a call that died with its worker: nothing can take the answer to
// the upstream any more, and what the call did is unknown.
func (w *Worker) questionLost(ctx context.Context, l *lease) error {
	msg := "the upstream asked a question within a call that ended with the gateway process holding it; it can no longer be answered, and whether the call started work is unknown"
	_, err := l.transition(context.WithoutCancel(ctx), &ledger.TransitionParams{
		From: []ledger.State{ledger.StateInputRequired}, To: ledger.StateReview, ReviewReason: new(ledger.ReasonUpstreamInputLost), StatusMessage: &msg,
		Input:  &ledger.InputUpdate{},
		Events: []ledger.EventParams{{Kind: ledger.EventRequireReview, Data: ledger.RequireReviewData{Message: msg, Reason: ledger.ReasonUpstreamInputLost}}},
	})
	return err
}

// latestQuestion is the data of op's latest input_requested event.
func (w *Worker) latestQuestion(ctx context.Context, op *ledger.Operation) (*ledger.Event, ledger.InputRequestedData, error) {
	events, err := w.store.EventList(ctx, op.ID)
	if err != nil {
		return nil, ledger.InputRequestedData{}, err
	}
	for _, e := range slices.Backward(events) {
		if e.Kind == ledger.EventInputRequested {
			d, err := ledger.DecodeEventData[ledger.InputRequestedData](e)
			return e, d, err
		}
	}
	return nil, ledger.InputRequestedData{}, nil
}
