package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/taskgate/taskgate/ledger"
)

// declaredContract is a provider's declared contract as it might arrive:
// keys out of order, whitespace, escapes, markup and numbers a JSON
// encoder or a jsonb column would rewrite. The ledger keeps it byte for
// byte.
const declaredContract = "{ \"version\" : 2,\n  \"lookup\": {\"tool\":\"find_job\", \"by\":\"idempotency_key\"},\n" +
	"  \"charges\": {\"tool\": \"invoice\", \"amount\": 1.50e1, \"note\": \"<b>&\\u00e9</b> é\"},\n  \"a\": [] }\n"

// testDeclaredContracts: an operation accepted under a declared provider
// contract records it byte for byte, and every read of the operation
// returns it; an attempt that attaches with another contract, or none,
// leaves it unchanged; an operation accepted without one, or with an
// empty one, has nil; a contract that is not JSON is refused before
// anything is recorded.
func testDeclaredContracts(t *testing.T, newStore Factory) {
	s := newStore(t)
	ctx := context.Background()
	const args = `{"suite":"declared"}`
	withContract := func(p *ledger.AcceptParams, c string) *ledger.AcceptParams {
		p.Contract = json.RawMessage(c)
		return p
	}
	want := []byte(declaredContract)
	check := func(where string, op *ledger.Operation) {
		t.Helper()
		if !bytes.Equal(op.Contract, want) {
			t.Errorf("%s: contract %q, want %q byte for byte", where, op.Contract, want)
		}
	}

	p := withContract(params(t, call{"acme", "op-declared", args}), declaredContract)
	created := accept(t, s, p)
	if created.Decision != ledger.DecisionCreated {
		t.Fatalf("decision = %s (%s), want created", created.Decision, created.Reason)
	}
	check("Accept (created)", created.Operation)
	// What the caller does with its slice afterwards changes nothing
	// recorded.
	p.Contract[2] = 'X'
	check("the created operation after the caller changed its slice", created.Operation)

	for _, other := range []string{`{"version":3,"lookup":{"tool":"other"}}`, ""} {
		res := accept(t, s, withContract(params(t, call{"acme", "op-declared", args}), other))
		if res.Decision != ledger.DecisionAttached {
			t.Fatalf("retry with contract %q: %s (%s), want attached", other, res.Decision, res.Reason)
		}
		check("Accept (attached with contract "+other+")", res.Operation)
	}
	if res := accept(t, s, withContract(params(t, call{"acme", "op-declared", `{"suite":"other"}`}), `{"version":4}`)); res.Decision != ledger.DecisionConflict {
		t.Fatalf("retry with other arguments: %s, want conflict", res.Decision)
	}

	byID, err := s.OperationGet(ctx, &ledger.OperationGetParams{ID: created.Operation.ID})
	if err != nil {
		t.Fatal(err)
	}
	check("OperationGet by row ID", byID)
	byKey, err := s.OperationGet(ctx, &ledger.OperationGetParams{Tenant: "acme", OperationID: "op-declared"})
	if err != nil {
		t.Fatal(err)
	}
	check("OperationGet by operation ID", byKey)
	listed, err := s.OperationList(ctx, &ledger.OperationListParams{Tenant: "acme", OperationID: "op-declared"})
	if err != nil || len(listed) != 1 {
		t.Fatalf("OperationList: %d operations, %v; want 1", len(listed), err)
	}
	check("OperationList", listed[0])
	claimed, err := s.LeaseClaim(ctx, created.Operation.ID, "w1", time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	check("LeaseClaim", claimed)
	yes := true
	op := claimed
	for _, tp := range []*ledger.TransitionParams{
		{From: []ledger.State{ledger.StateAccepted}, To: ledger.StateSending, IncrementSend: true,
			Events: []ledger.EventParams{{Kind: ledger.EventSendStarted, Data: ledger.SendStartedData{Send: 1, Worker: "w1"}}}},
		{From: []ledger.State{ledger.StateSending}, To: ledger.StateRunning,
			RemoteJobs: []*ledger.RemoteJobUpsert{{Upstream: "hosted_test", RemoteJobID: "job-declared", Kind: ledger.JobKindProviderJob, Status: ledger.JobRunning, Intended: &yes}},
			Events:     []ledger.EventParams{{Kind: ledger.EventRemoteJobBound, AttemptRef: created.Attempt.ID, Data: ledger.RemoteJobData{RemoteJobID: "job-declared"}}}},
		{From: []ledger.State{ledger.StateRunning}, To: ledger.StateCompleted, Result: json.RawMessage(`{"content":[]}`),
			Events: []ledger.EventParams{{Kind: ledger.EventResultStored, Data: ledger.ResultStoredData{RemoteJobID: "job-declared"}}}},
	} {
		tp.OperationRef = op.ID
		if op, err = s.Transition(ctx, tp); err != nil {
			t.Fatalf("%s: %v", tp.To, err)
		}
		check("Transition to "+string(tp.To), op)
	}
	archivable, err := s.OperationsToArchive(ctx, &ledger.ArchiveListParams{EndedBefore: time.Now().Add(time.Hour)})
	if err != nil || len(archivable) != 1 {
		t.Fatalf("OperationsToArchive: %d operations, %v; want 1", len(archivable), err)
	}
	check("OperationsToArchive", archivable[0])

	for key, c := range map[string]json.RawMessage{"op-configured": nil, "op-empty": {}} {
		res := accept(t, s, withContract(params(t, call{"acme", key, args}), string(c)))
		if res.Decision != ledger.DecisionCreated || res.Operation.Contract != nil {
			t.Errorf("%s: %s with contract %q; want created with none", key, res.Decision, res.Operation.Contract)
		}
		// An attach that brings a declared contract gives none to an
		// operation accepted under the configuration's.
		accept(t, s, withContract(params(t, call{"acme", key, args}), `{"version":1}`))
		got, err := s.OperationGet(ctx, &ledger.OperationGetParams{Tenant: "acme", OperationID: key})
		if err != nil {
			t.Fatal(err)
		}
		if got.Contract != nil {
			t.Errorf("%s: the ledger holds contract %q, want nil", key, got.Contract)
		}
	}

	count := operationCount(t, s)
	for _, bad := range []string{`{"version":`, "{\"note\":\"\xff\"}"} {
		if _, err := s.Accept(ctx, withContract(params(t, call{"acme", "op-bad-contract", args}), bad)); err == nil {
			t.Errorf("Accept with contract %q succeeded; want it refused", bad)
		}
	}
	if got := operationCount(t, s); got != count {
		t.Errorf("%d operations after refused contracts, want %d", got, count)
	}
}
