package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/taskgate/taskgate/ledger"
)

// testInputRounds: an operation that the upstream asks a question keeps
// the question, the upstream's state and the answers on its row, exactly
// as written, until a transition replaces them; it cannot wait on no
// question, nor keep one once it left input_required.
func testInputRounds(t *testing.T, newStore Factory) {
	s := newStore(t)
	ctx := context.Background()
	p := params(t, call{"acme", "op-1", `{}`})
	p.InputChannel = ledger.InputChannelTaskUpdate
	op := accept(t, s, p).Operation
	if op.InputChannel != ledger.InputChannelTaskUpdate {
		t.Fatalf("accepted with input channel %q, want %q", op.InputChannel, ledger.InputChannelTaskUpdate)
	}
	bad := params(t, call{"acme", "op-2", `{}`})
	bad.InputChannel = "carrier_pigeon"
	if _, err := s.Accept(ctx, bad); err == nil {
		t.Fatal("Accept took an unknown input channel")
	}
	move := func(tp *ledger.TransitionParams) (*ledger.Operation, error) {
		tp.OperationRef = op.ID
		return s.Transition(ctx, tp)
	}
	if _, err := move(&ledger.TransitionParams{To: ledger.StateSending}); err != nil {
		t.Fatal(err)
	}
	if _, err := move(&ledger.TransitionParams{To: ledger.StateInputRequired}); !errors.Is(err, ledger.ErrIllegalTransition) {
		t.Fatalf("input_required without a question: %v, want ErrIllegalTransition", err)
	}
	question := json.RawMessage(`{"confirm":{"method":"elicitation/create","params":{"message":"Delete a.txt?"}}}`)
	got, err := move(&ledger.TransitionParams{
		To: ledger.StateInputRequired, Input: &ledger.InputUpdate{Requests: question, RequestState: "opaque-1"},
		Events: []ledger.EventParams{{Kind: ledger.EventInputRequested, Data: ledger.InputRequestedData{Channel: op.InputChannel, Requests: question, RequestState: true, Send: 1}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.State != ledger.StateInputRequired || !jsonEqual(got.InputRequests, question) || got.RequestState != "opaque-1" || len(got.InputResponses) != 0 {
		t.Fatalf("after the question: %s, requests %s, state %q, responses %s", got.State, got.InputRequests, got.RequestState, got.InputResponses)
	}
	// A question waiting for a later send holds no worker: recovery leaves
	// it alone, whatever its lease says. One a worker holds within its call
	// is recovered once that worker's lease lapses.
	recoverable := func() bool {
		t.Helper()
		ops, err := s.OperationsToRecover(ctx, time.Now().Add(time.Hour), 100)
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(ops, func(o *ledger.Operation) bool { return o.ID == op.ID })
	}
	for _, owner := range []string{"", ledger.LeaseQueued} {
		if _, err := move(&ledger.TransitionParams{Lease: &ledger.Lease{Owner: owner, Until: time.Now()}}); err != nil {
			t.Fatal(err)
		}
		if recoverable() {
			t.Fatalf("a question whose lease is %q is listed for recovery", owner)
		}
	}
	if _, err := move(&ledger.TransitionParams{Lease: &ledger.Lease{Owner: "worker-1/7", Until: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	if !recoverable() {
		t.Fatal("a question asked within a call whose worker's lease lapsed is not listed for recovery")
	}
	if _, err := move(&ledger.TransitionParams{To: ledger.StateCompleted}); !errors.Is(err, ledger.ErrIllegalTransition) {
		t.Fatalf("input_required to completed: %v, want ErrIllegalTransition", err)
	}
	answer := json.RawMessage(`{"confirm":{"action":"accept","content":{"confirm":true}}}`)
	if _, err := move(&ledger.TransitionParams{To: ledger.StateAccepted, Input: &ledger.InputUpdate{Requests: question, RequestState: "opaque-1", Responses: answer}}); !errors.Is(err, ledger.ErrIllegalTransition) {
		t.Fatalf("leaving input_required with the question kept: %v, want ErrIllegalTransition", err)
	}
	got, err = move(&ledger.TransitionParams{
		From: []ledger.State{ledger.StateInputRequired}, To: ledger.StateAccepted, Input: &ledger.InputUpdate{RequestState: "opaque-1", Responses: answer},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.State != ledger.StateAccepted || len(got.InputRequests) != 0 || got.RequestState != "opaque-1" || !jsonEqual(got.InputResponses, answer) {
		t.Fatalf("after the answer: %s, requests %s, state %q, responses %s", got.State, got.InputRequests, got.RequestState, got.InputResponses)
	}
	// A transition without Input keeps what is recorded.
	got, err = move(&ledger.TransitionParams{To: ledger.StateSending, IncrementSend: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.RequestState != "opaque-1" || !jsonEqual(got.InputResponses, answer) {
		t.Fatalf("a send changed the recorded round: state %q, responses %s", got.RequestState, got.InputResponses)
	}
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && string(mustJSON(x)) == string(mustJSON(y))
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
