package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/ledger"
)

// askClient records a question the upstream asked in answer to a send (a
// 2026-07-28 input_required result). Where the client that started the
// operation can answer, the operation waits in input_required with the
// question, the upstream's requestState and nothing else to do: the answer,
// recorded by the gateway, queues the next send. Where it cannot, the
// operation waits for a human, as nothing can answer.
func (w *Worker) askClient(ctx context.Context, l *lease, res *mcp.CallToolResult) error {
	op := l.op
	if op.InputChannel == ledger.InputChannelNone {
		msg := "the upstream asked for input, and the client that started this operation has no way to answer"
		_, err := l.transition(ctx, &ledger.TransitionParams{
			To: ledger.StateReview, ReviewReason: new(ledger.ReasonUpstreamInputRequired), StatusMessage: &msg,
			Events: []ledger.EventParams{{Kind: ledger.EventRequireReview, Data: ledger.RequireReviewData{Reason: ledger.ReasonUpstreamInputRequired}}},
		})
		return err
	}
	requests, err := json.Marshal(res.InputRequests)
	if err != nil {
		return fmt.Errorf("encode the upstream's input requests: %w", err)
	}
	p := &ledger.TransitionParams{
		From: []ledger.State{ledger.StateSending}, To: ledger.StateInputRequired, StatusMessage: new(questionSummary(res.InputRequests)),
		Input: &ledger.InputUpdate{Requests: requests, RequestState: res.RequestState},
		Events: []ledger.EventParams{{Kind: ledger.EventInputRequested, Data: ledger.InputRequestedData{
			Channel: op.InputChannel, RequestState: res.RequestState != "",
			Requests: ledger.RedactSecrets(requests, op.Arguments, op.SecretArguments), Send: op.SendCount,
		}}},
	}
	if op.TTL > 0 {
		// A question nobody answers ends with the task's retention.
		p.Enqueue = []river.InsertManyParams{job(DispatchArgs{Operation: l.opRef}, op.TTL)}
	}
	_, err = l.transition(context.WithoutCancel(ctx), p)
	if err == nil {
		w.logger(op).Info("the upstream asked for input; waiting for the client's answer", "keys", keysOf(res.InputRequests), "channel", op.InputChannel)
	}
	return err
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

// expireQuestion ends an operation whose question went unanswered for the
// task's retention. A job that comes early (a question asked again since)
// waits until the latest question is due.
func (w *Worker) expireQuestion(ctx context.Context, l *lease) error {
	op := l.op
	if op.TTL <= 0 {
		return nil
	}
	events, err := w.store.EventList(ctx, op.ID)
	if err != nil {
		return err
	}
	var asked time.Time
	for _, e := range events {
		if e.Kind == ledger.EventInputRequested {
			asked = e.CreatedAt
		}
	}
	if due := asked.Add(op.TTL); w.clock().Before(due) {
		return river.JobSnooze(due.Sub(w.clock()))
	}
	msg := "nobody answered the upstream's question within the task's retention; nothing more was sent"
	_, err = l.transition(context.WithoutCancel(ctx), &ledger.TransitionParams{
		From: []ledger.State{ledger.StateInputRequired}, To: ledger.StateFailed, StatusMessage: &msg,
		Error:       rpcError(-32603, msg),
		Input:       &ledger.InputUpdate{},
		Reservation: &ledger.ReservationUpdate{Status: ledger.ReservationReleased},
		Events:      []ledger.EventParams{{Kind: ledger.EventFailed, Data: ledger.FailedData{Code: -32603, Message: msg}}},
		Enqueue:     []river.InsertManyParams{job(ReconcileArgs{Operation: l.opRef}, 0)},
	})
	return err
}
