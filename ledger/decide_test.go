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
		StateAccepted: "working", StateSending: "working", StateRunning: "working", StateReview: "working",
		StateCompleted: "completed", StateFailed: "failed", StateCancelled: "cancelled",
	} {
		if got := st.TaskStatus(); got != want {
			t.Errorf("%s.TaskStatus() = %s, want %s", st, got, want)
		}
	}
}
