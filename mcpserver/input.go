package mcpserver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/taskwire"
	"github.com/taskgate/taskgate/worker"
)

// A consequential call's upstream may ask a question while the operation
// runs: a 2026-07-28 input_required result or upstream task, or a
// 2025-11-25 elicitation/create within the call or on its task's
// tasks/result. The worker records the question on the operation, which
// waits in input_required; the client reads it in tasks/get (2026-07-28),
// is asked it on tasks/result (2025-11-25), or, waiting for its call's
// result, gets it in an input_required result; its answer is recorded
// here. Only answers to the question outstanding are taken, each once.
// Once every question is answered, an input_required result's operation is
// queued to send again, carrying the answers and the upstream's
// requestState; a call that asked within itself gets the answer from its
// worker and goes on; a question of the upstream's own task is answered to
// that task, which the operation goes on following. An answer that
// declines (or cancels) ends the operation: nothing more is sent, except
// that a call waiting within itself, or a task that asked, is told the
// answer, and the operation ends as the task does.

// questionStatePrefix starts the requestState of a question put to a
// client in its call's result; the operation's task ID follows it, so that
// the call that answers continues that operation, also where its
// operation ID is derived from a window that has passed since.
const questionStatePrefix = "taskgate-question."

// questionOutcome is the input_required result that puts op's outstanding
// question to a client waiting for its call's result, or nil when nothing
// is outstanding or the question is not elicitations alone, all that such
// a client declares.
func questionOutcome(op *ledger.Operation) (*taskwire.Outcome, error) {
	open, err := questions(op)
	if err != nil || len(open) == 0 {
		return nil, err
	}
	for _, raw := range open {
		var r struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(raw, &r) != nil || r.Method != "elicitation/create" {
			return nil, nil
		}
	}
	raw, err := json.Marshal(open)
	if err != nil {
		return nil, err
	}
	var q mcp.InputRequestMap
	if err := json.Unmarshal(raw, &q); err != nil {
		return nil, fmt.Errorf("the question of operation %q cannot be put in a result: %w", op.OperationID, err)
	}
	return &taskwire.Outcome{Result: &mcp.CallToolResult{
		Content:       []mcp.Content{&mcp.TextContent{Text: cmp.Or(op.StatusMessage, "the upstream asks for input") + "; answer to go on"}},
		InputRequests: q,
		RequestState:  questionStatePrefix + op.TaskID,
	}}, nil
}

// answerInCall records the answers a call carries to the question put in
// an earlier call's result, for op: the operation it continues, as its
// plan found in its requestState. Answers that name another operation, or
// none, are not recorded, as the specification asks of responses to
// requests not outstanding.
func (h *host) answerInCall(ctx context.Context, call *taskwire.ToolCall, op *ledger.Operation, requestID string) error {
	responses := make(map[string]json.RawMessage, len(call.InputResponses))
	for k, r := range call.InputResponses {
		raw, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("the answer under %q is unreadable: %w", k, err)
		}
		responses[k] = raw
	}
	return h.answer(ctx, op, requestID, responses)
}

// continuedOperation is the operation ID of the caller's operation, with
// fingerprint fp, whose question the call's requestState names; "" when
// it names none.
func (h *host) continuedOperation(ctx context.Context, call *taskwire.ToolCall, fp canon.Fingerprint) (string, error) {
	taskID, ok := strings.CutPrefix(call.RequestState, questionStatePrefix)
	if !ok || taskID == "" {
		return "", nil
	}
	op, err := h.load(ctx, &call.Caller, taskID)
	switch {
	case errors.Is(err, taskwire.ErrTaskNotFound), errors.Is(err, taskwire.ErrTaskExpired):
		return "", nil
	case err != nil:
		return "", err
	case op.Fingerprint != string(fp):
		return "", nil
	}
	return op.OperationID, nil
}

// questions are the operation's outstanding input requests.
func questions(op *ledger.Operation) (map[string]json.RawMessage, error) {
	if op.State != ledger.StateInputRequired || len(op.InputRequests) == 0 {
		return nil, nil
	}
	var q map[string]json.RawMessage
	if err := json.Unmarshal(op.InputRequests, &q); err != nil {
		return nil, fmt.Errorf("the question of operation %q is unreadable: %w", op.OperationID, err)
	}
	return q, nil
}

// declining is the action of an elicitation answer that declines or
// cancels, or "".
func declining(raw json.RawMessage) string {
	var r struct {
		Action string `json:"action"`
	}
	if json.Unmarshal(raw, &r) == nil && (r.Action == "decline" || r.Action == "cancel") {
		return r.Action
	}
	return ""
}

// answerTries bounds how often an answer is computed again after the
// question changed under it. Each retry follows another answer that was
// recorded, and so answered a key, or the end of the wait.
const answerTries = 16

// answer records the client's responses to op's outstanding question.
// Responses to keys that are not outstanding are ignored, as the
// specification asks; so is everything when the operation no longer waits
// on a question. The write names the question round it was computed from;
// when another answer (or anything else) changed the round first, the
// operation is read again and the answer computed again, so that
// simultaneous answers to different keys all count.
func (h *host) answer(ctx context.Context, op *ledger.Operation, requestID string, responses map[string]json.RawMessage) error {
	for range answerTries {
		done, err := h.answerOnce(ctx, op, requestID, responses)
		if done || err != nil {
			return err
		}
		if op, err = h.g.store.OperationGet(context.WithoutCancel(ctx), &ledger.OperationGetParams{ID: op.ID}); err != nil {
			return err
		}
	}
	return fmt.Errorf("the question of operation %q kept changing while the answer was recorded; send the answer again", op.OperationID)
}

// answerOnce records responses against op's question round as read; done
// is false when the round changed before the write, which then changed
// nothing.
func (h *host) answerOnce(ctx context.Context, op *ledger.Operation, requestID string, responses map[string]json.RawMessage) (done bool, err error) {
	open, err := questions(op)
	if err != nil || len(open) == 0 {
		return true, err
	}
	taken := map[string]json.RawMessage{}
	actions := map[string]string{}
	declined := ""
	for k, r := range responses {
		if _, ok := open[k]; !ok {
			continue
		}
		taken[k] = r
		var a struct {
			Action string `json:"action"`
		}
		if json.Unmarshal(r, &a) == nil && a.Action != "" {
			actions[k] = a.Action
		}
		if d := declining(r); d != "" {
			declined = d
		}
	}
	if len(taken) == 0 {
		return true, nil
	}
	asked, err := h.latestQuestion(ctx, op)
	if err != nil {
		return true, err
	}
	inFlight := asked.InFlight
	// The answers to send are keyed as the upstream keyed its questions.
	all := map[string]json.RawMessage{}
	if len(op.InputResponses) > 0 {
		if err := json.Unmarshal(op.InputResponses, &all); err != nil {
			return true, fmt.Errorf("the recorded answers of operation %q are unreadable: %w", op.OperationID, err)
		}
	}
	for k, r := range taken {
		all[cmp.Or(asked.Renamed[k], k)] = r
		delete(open, k)
	}
	rawTaken, err := json.Marshal(taken)
	if err != nil {
		return true, err
	}
	rawAll, err := json.Marshal(all)
	if err != nil {
		return true, err
	}
	data := ledger.InputAnsweredData{
		Actions: actions, RequestID: requestID, Responses: ledger.RedactSecrets(rawTaken, op.Arguments, op.SecretArguments), Send: op.SendCount,
	}
	if len(data.Actions) == 0 {
		data.Actions = nil
	}
	now := h.g.clock()
	p := &ledger.TransitionParams{
		OperationRef: op.ID, From: []ledger.State{ledger.StateInputRequired},
		InputWas: &ledger.InputUpdate{Requests: op.InputRequests, RequestState: op.RequestState, Responses: op.InputResponses},
	}
	// What is logged once the answer is recorded.
	var (
		say   string
		attrs []any
	)
	switch {
	case asked.UpstreamTask != "" && (declined != "" || len(open) == 0):
		// The answer, a decline too, goes to the upstream task that asked;
		// the task's poll job delivers it and records how the task ends.
		p.To, p.StatusMessage = ledger.StateRunning, new("answered; the answer goes to the task at "+op.Upstream)
		p.Input = &ledger.InputUpdate{Responses: rawAll}
		p.Events = []ledger.EventParams{{Kind: ledger.EventInputAnswered, Data: data}}
		say = "the upstream task's question was answered; the answer goes to the task"
		if declined != "" {
			p.StatusMessage = new(fmt.Sprintf("the user answered the upstream's question with %s; the task at %s is told so", declined, op.Upstream))
			p.Events[0].Kind = ledger.EventInputDeclined
			say, attrs = "the user declined the upstream task's question; the task is told so", []any{"action", declined}
		}
	case declined != "":
		msg := fmt.Sprintf("the user answered the upstream's question with %s; nothing more was sent to the upstream", declined)
		if inFlight {
			msg = fmt.Sprintf("the user answered the upstream's question with %s; the upstream was told so and nothing more is sent to it", declined)
		}
		p.To, p.StatusMessage = ledger.StateCancelled, &msg
		p.Input = &ledger.InputUpdate{}
		if inFlight {
			// The call that asked gets the answer as it was given.
			p.Input.Responses = rawAll
		} else {
			// A call waiting for the answer (above) keeps its worker's
			// lease: the worker tells the upstream and records what comes
			// back.
			p.Lease = &ledger.Lease{}
		}
		p.Reservation = &ledger.ReservationUpdate{Status: ledger.ReservationReleased}
		p.Events = []ledger.EventParams{{Kind: ledger.EventInputDeclined, Data: data}}
		p.Enqueue = []river.InsertManyParams{{Args: worker.ReconcileArgs{Operation: op.ID}}}
		say, attrs = "the user declined the upstream's question; the operation ends", []any{"action", declined}
	case len(open) == 0 && inFlight:
		p.To, p.StatusMessage = ledger.StateSending, new("answered; the call to "+op.Upstream+" goes on")
		p.Input = &ledger.InputUpdate{Responses: rawAll}
		p.Events = []ledger.EventParams{{Kind: ledger.EventInputAnswered, Data: data}}
		say = "the upstream's question was answered; the call that asked it goes on"
	case len(open) == 0:
		p.To, p.StatusMessage = ledger.StateAccepted, new("answered; sending the answer to "+op.Upstream)
		p.Input = &ledger.InputUpdate{RequestState: op.RequestState, Responses: rawAll}
		p.Lease = &ledger.Lease{Owner: ledger.LeaseQueued, Until: now.Add(h.g.config().Worker.Lease)}
		p.Events = []ledger.EventParams{{Kind: ledger.EventInputAnswered, Data: data}}
		p.Enqueue = []river.InsertManyParams{{Args: worker.DispatchArgs{Operation: op.ID}}}
		say = "the upstream's question was answered; sending again"
	default:
		rest, err := json.Marshal(open)
		if err != nil {
			return true, err
		}
		p.Input = &ledger.InputUpdate{Requests: rest, RequestState: op.RequestState, Responses: rawAll}
		p.Events = []ledger.EventParams{{Kind: ledger.EventInputAnswered, Data: data}}
		say, attrs = "part of the upstream's question was answered", []any{"open", slices.Sorted(maps.Keys(open))}
	}
	if _, err = h.g.store.Transition(context.WithoutCancel(ctx), p); errors.Is(err, ledger.ErrStateChanged) {
		// Another answer came first, or the operation stopped waiting
		// (answered elsewhere, cancelled): read it again to see what is
		// still outstanding.
		return false, nil
	}
	if err == nil {
		h.g.log.With("tenant", op.Tenant, "operation_id", op.OperationID, "keys", slices.Sorted(maps.Keys(taken))).Info(say, attrs...)
	}
	return true, err
}

// latestQuestion is the record of op's latest question: whether it was
// asked within a call that waits for the answer (a 2025-11-25
// elicitation) rather than in an answer a later send continues, and which
// of its keys were renamed from the upstream's.
func (h *host) latestQuestion(ctx context.Context, op *ledger.Operation) (ledger.InputRequestedData, error) {
	events, err := h.g.store.EventList(context.WithoutCancel(ctx), op.ID)
	if err != nil {
		return ledger.InputRequestedData{}, err
	}
	for _, e := range slices.Backward(events) {
		if e.Kind == ledger.EventInputRequested {
			return ledger.DecodeEventData[ledger.InputRequestedData](e)
		}
	}
	return ledger.InputRequestedData{}, nil
}

// askOnResult asks a 2025-11-25 client, on its tasks/result, the questions
// op waits on, one at a time, and records each answer. It returns when
// they are answered, or with the error that stopped the asking.
func (h *host) askOnResult(ctx context.Context, c *taskwire.Caller, op *ledger.Operation) error {
	open, err := questions(op)
	if err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(open)) {
		var q struct {
			Method string            `json:"method"`
			Params *mcp.ElicitParams `json:"params"`
		}
		if err := json.Unmarshal(open[k], &q); err != nil || q.Method != "elicitation/create" || q.Params == nil {
			return fmt.Errorf("the upstream's question %q is not an elicitation, which a 2025-11-25 client cannot be asked on tasks/result", k)
		}
		q.Params.Meta = mcp.Meta{taskwire.RelatedTaskMetaKey: map[string]string{"taskId": op.TaskID}}
		ectx, cancel := context.WithTimeout(ctx, elicitWait)
		res, err := c.Elicit(ectx, q.Params)
		cancel()
		if err != nil {
			return fmt.Errorf("asking the client the upstream's question: %w", err)
		}
		raw, err := json.Marshal(res)
		if err != nil {
			return err
		}
		if err := h.answer(ctx, op, c.RequestID, map[string]json.RawMessage{k: raw}); err != nil {
			return err
		}
		if op, err = h.g.store.OperationGet(context.WithoutCancel(ctx), &ledger.OperationGetParams{ID: op.ID}); err != nil {
			return err
		}
		if op.State != ledger.StateInputRequired {
			return nil
		}
	}
	return nil
}

// questionPause is how long WaitTask waits before asking again after
// asking failed, so that a client that cannot answer is not asked in a
// tight loop.
const questionPause = time.Second
