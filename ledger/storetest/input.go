package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
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
	for _, ch := range []ledger.InputChannel{ledger.InputChannelNone, ledger.InputChannelTaskResult, ledger.InputChannelCallResult} {
		cp := params(t, call{"acme", "op-channel-" + string(ch), `{}`})
		cp.InputChannel = ch
		got, err := s.OperationGet(ctx, &ledger.OperationGetParams{ID: accept(t, s, cp).Operation.ID})
		if err != nil || got.InputChannel != ch {
			t.Fatalf("accepted with input channel %q, read back %+v, %v", ch, got, err)
		}
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
	if _, err := move(&ledger.TransitionParams{To: ledger.StateAwaitingApproval}); !errors.Is(err, ledger.ErrIllegalTransition) {
		t.Fatalf("input_required to awaiting_approval: %v, want ErrIllegalTransition", err)
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

// testConcurrentAnswers: answers to different keys of one question, each
// read from the same round and written at once, all count. A write that
// names the round it read (InputWas) fails with ErrStateChanged once
// another answer changed it, and the answerer reads again; none
// overwrites another's answer.
func testConcurrentAnswers(t *testing.T, newStore Factory) {
	s := newStore(t)
	ctx := context.Background()
	p := params(t, call{"acme", "op-answers", `{}`})
	p.InputChannel = ledger.InputChannelTaskUpdate
	op := accept(t, s, p).Operation
	const n = 6
	question := map[string]json.RawMessage{}
	for i := range n {
		question[fmt.Sprintf("q%d", i)] = json.RawMessage(`{"method":"elicitation/create","params":{"message":"ok?"}}`)
	}
	for _, tp := range []*ledger.TransitionParams{
		{To: ledger.StateSending},
		{To: ledger.StateInputRequired, Input: &ledger.InputUpdate{Requests: mustJSON(question), RequestState: "opaque"}},
	} {
		tp.OperationRef = op.ID
		if _, err := s.Transition(ctx, tp); err != nil {
			t.Fatal(err)
		}
	}
	// answer records key's answer on the round cur as it read it, moving
	// the operation on once nothing is left open.
	answer := func(cur *ledger.Operation, key string) error {
		open, answers := map[string]json.RawMessage{}, map[string]json.RawMessage{}
		if err := json.Unmarshal(cur.InputRequests, &open); err != nil {
			return err
		}
		if len(cur.InputResponses) > 0 {
			if err := json.Unmarshal(cur.InputResponses, &answers); err != nil {
				return err
			}
		}
		delete(open, key)
		answers[key] = json.RawMessage(`{"action":"accept"}`)
		tp := &ledger.TransitionParams{
			OperationRef: op.ID, From: []ledger.State{ledger.StateInputRequired},
			InputWas: &ledger.InputUpdate{Requests: cur.InputRequests, RequestState: cur.RequestState, Responses: cur.InputResponses},
			Input:    &ledger.InputUpdate{RequestState: cur.RequestState, Responses: mustJSON(answers)},
		}
		if len(open) == 0 {
			tp.To = ledger.StateAccepted
		} else {
			tp.Input.Requests = mustJSON(open)
		}
		_, err := s.Transition(ctx, tp)
		return err
	}
	var read, wg sync.WaitGroup
	read.Add(n)
	conflicts := make([]int, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			key := fmt.Sprintf("q%d", i)
			cur, err := s.OperationGet(ctx, &ledger.OperationGetParams{ID: op.ID})
			// Every answerer reads the round before any writes it.
			read.Done()
			read.Wait()
			for err == nil {
				if err = answer(cur, key); !errors.Is(err, ledger.ErrStateChanged) {
					break
				}
				conflicts[i]++
				cur, err = s.OperationGet(ctx, &ledger.OperationGetParams{ID: op.ID})
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	got, err := s.OperationGet(ctx, &ledger.OperationGetParams{ID: op.ID})
	if err != nil {
		t.Fatal(err)
	}
	var answers map[string]json.RawMessage
	if err := json.Unmarshal(got.InputResponses, &answers); err != nil {
		t.Fatalf("recorded answers %s: %v", got.InputResponses, err)
	}
	if got.State != ledger.StateAccepted || len(answers) != n || len(got.InputRequests) != 0 || got.RequestState != "opaque" {
		t.Fatalf("after %d answers written at once: %s, answers %s, requests %s, state %q (conflicts %v); want accepted with every answer",
			n, got.State, got.InputResponses, got.InputRequests, got.RequestState, conflicts)
	}
	if c := slices.Max(conflicts); c == 0 {
		t.Fatalf("no answer was ever told the round changed (conflicts %v); they cannot all have read the same round and written it", conflicts)
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
