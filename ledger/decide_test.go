package ledger

import "testing"

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
