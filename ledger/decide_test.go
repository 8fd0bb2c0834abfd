package ledger

import (
	"encoding/json"
	"testing"

	"github.com/taskgate/taskgate/canon"
)

func TestDecide(t *testing.T) {
	stored := &Operation{Fingerprint: "aaa"}
	tests := []struct {
		name     string
		stored   *Operation
		fp       string
		decision Decision
		reason   string
	}{
		{"nothing stored", nil, "aaa", DecisionCreated, ""},
		{"same fingerprint", stored, "aaa", DecisionAttached, ""},
		{"different fingerprint", stored, "bbb", DecisionConflict, ReasonArgumentsDiffer},
	}
	for _, tt := range tests {
		d, r := Decide(tt.stored, tt.fp)
		if d != tt.decision || r != tt.reason {
			t.Errorf("%s: Decide = %s, %q; want %s, %q", tt.name, d, r, tt.decision, tt.reason)
		}
	}
}

func TestStateTaskStatus(t *testing.T) {
	for st, want := range map[State]string{
		StateAwaitingApproval: "working", StateAccepted: "working", StateSending: "working", StateRunning: "working", StateReview: "working",
		StateInputRequired: "input_required", StateCompleted: "completed", StateFailed: "failed", StateCancelled: "cancelled",
	} {
		if got := st.TaskStatus(); got != want {
			t.Errorf("%s.TaskStatus() = %s, want %s", st, got, want)
		}
	}
}

func TestProviderKey(t *testing.T) {
	a := &Operation{ID: 1, Tenant: "acme", OperationID: "op-1"}
	keys := map[string]*Operation{
		a.ProviderKey(): a,
	}
	for _, o := range []*Operation{
		{ID: 2, Tenant: "globex", OperationID: "op-1"}, // another tenant, same operation ID
		{ID: 3, Tenant: "acme", OperationID: "op-1"},   // the same ID reused after retention
		{ID: 1, Tenant: "acme", OperationID: "op-2"},
	} {
		k := o.ProviderKey()
		if prev, dup := keys[k]; dup {
			t.Fatalf("%+v and %+v share provider key %s", o, prev, k)
		}
		keys[k] = o
	}
	if again := (&Operation{ID: 1, Tenant: "acme", OperationID: "op-1"}).ProviderKey(); again != a.ProviderKey() {
		t.Fatalf("provider key is not stable: %s then %s", a.ProviderKey(), again)
	}
	// An operation accepted with a stored key is sent that key, never the
	// derivation anyone could compute from its tenant, ID and row.
	stored := &Operation{ID: 1, Tenant: "acme", OperationID: "op-1", StoredProviderKey: NewProviderKey()}
	if k := stored.ProviderKey(); k != stored.StoredProviderKey || k == a.ProviderKey() {
		t.Fatalf("provider key of an operation with a stored key = %s, want %s", k, stored.StoredProviderKey)
	}
	if k := NewProviderKey(); k == stored.StoredProviderKey || len(k) != len(a.ProviderKey()) {
		t.Fatalf("NewProviderKey = %s after %s; want a fresh key shaped like %s", k, stored.StoredProviderKey, a.ProviderKey())
	}
}

func TestDecideKeyed(t *testing.T) {
	fp := func(args string) string {
		f, err := canon.Compute("hosted_test", "run_suite", json.RawMessage(args))
		if err != nil {
			t.Fatal(err)
		}
		return string(f)
	}
	// earlier was accepted while the key argument counted: its fingerprint
	// holds the value its client sent.
	earlier := &Operation{Upstream: "hosted_test", Tool: "run_suite",
		Arguments: json.RawMessage(`{"suite":"s","idempotency_key":"k-1"}`), Fingerprint: fp(`{"suite":"s","idempotency_key":"k-1"}`)}
	later := &Operation{Upstream: "hosted_test", Tool: "run_suite", Arguments: json.RawMessage(`{"suite":"s"}`), Fingerprint: fp(`{"suite":"s"}`)}
	tests := []struct {
		name     string
		stored   *Operation
		args     string
		key      string
		decision Decision
	}{
		{"nothing stored", nil, `{"suite":"s"}`, "idempotency_key", DecisionCreated},
		{"a later operation, the same arguments", later, `{"suite":"s"}`, "idempotency_key", DecisionAttached},
		{"a later operation, other arguments", later, `{"suite":"t"}`, "idempotency_key", DecisionConflict},
		{"an earlier operation, the same arguments", earlier, `{"suite":"s"}`, "idempotency_key", DecisionAttached},
		{"an earlier operation, other arguments", earlier, `{"suite":"t"}`, "idempotency_key", DecisionConflict},
		{"an earlier operation, no key argument", earlier, `{"suite":"s"}`, "", DecisionConflict},
		{"an earlier operation, another key argument", earlier, `{"suite":"s"}`, "request_key", DecisionConflict},
	}
	for _, tt := range tests {
		d, _ := DecideKeyed(tt.stored, fp(tt.args), json.RawMessage(tt.args), tt.key)
		if d != tt.decision {
			t.Errorf("%s: DecideKeyed = %s, want %s", tt.name, d, tt.decision)
		}
	}
}
