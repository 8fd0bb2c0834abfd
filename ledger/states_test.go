package ledger

import "testing"

var allStates = []State{StateAwaitingApproval, StateAccepted, StateSending, StateRunning, StateReview, StateInputRequired, StateCompleted, StateFailed, StateCancelled}

// legalMoves is every move the worker, the gateway and a human's
// resolution make; any other pair of states is illegal.
var legalMoves = []struct{ from, to State }{
	{StateAwaitingApproval, StateAccepted},
	{StateAwaitingApproval, StateFailed},
	{StateAwaitingApproval, StateCancelled},
	{StateAccepted, StateSending},
	{StateAccepted, StateReview},
	{StateAccepted, StateCancelled},
	{StateSending, StateAccepted},
	{StateSending, StateRunning},
	{StateSending, StateReview},
	{StateSending, StateInputRequired},
	{StateSending, StateCompleted},
	{StateSending, StateFailed},
	{StateSending, StateCancelled},
	{StateRunning, StateReview},
	{StateRunning, StateInputRequired},
	{StateRunning, StateCompleted},
	{StateRunning, StateFailed},
	{StateRunning, StateCancelled},
	{StateInputRequired, StateAccepted},
	{StateInputRequired, StateSending},
	{StateInputRequired, StateRunning},
	{StateInputRequired, StateReview},
	{StateInputRequired, StateCompleted},
	{StateInputRequired, StateCancelled},
	{StateInputRequired, StateFailed},
	{StateReview, StateAccepted},
	{StateReview, StateRunning},
	{StateReview, StateFailed},
	{StateReview, StateCancelled},
}

func TestStateCanBecome(t *testing.T) {
	tests := []struct {
		from, to State
		want     bool
	}{
		{StateAccepted, StateSending, true},
		{StateSending, StateAccepted, true},
		{StateSending, StateCompleted, true},
		{StateRunning, StateCancelled, true},
		{StateReview, StateRunning, true},
		{StateReview, StateAccepted, true},
		// A question comes from a send or from the upstream task a send
		// started; its answer goes out through another send, or to that
		// task.
		{StateSending, StateInputRequired, true},
		{StateInputRequired, StateAccepted, true},
		{StateAccepted, StateInputRequired, false},
		{StateRunning, StateInputRequired, true},
		{StateInputRequired, StateSending, true},
		{StateInputRequired, StateCompleted, true},
		{StateInputRequired, StateRunning, true},
		{StateReview, StateInputRequired, false},
		{StateCompleted, StateInputRequired, false},
		// Nothing is sent before an approver approves, and nothing goes
		// back to waiting once approved.
		{StateAwaitingApproval, StateSending, false},
		{StateAwaitingApproval, StateRunning, false},
		{StateAwaitingApproval, StateCompleted, false},
		{StateAccepted, StateAwaitingApproval, false},
		{StateReview, StateAwaitingApproval, false},
		// Only a send reaches the provider: nothing skips "send started".
		{StateAccepted, StateRunning, false},
		{StateAccepted, StateCompleted, false},
		{StateAccepted, StateFailed, false},
		{StateRunning, StateSending, false},
		{StateRunning, StateAccepted, false},
		{StateReview, StateSending, false},
		{StateReview, StateCompleted, false},
		// An ended operation stays ended, even when a duplicate turns up.
		{StateCompleted, StateReview, false},
		{StateCompleted, StateFailed, false},
		{StateFailed, StateAccepted, false},
		{StateCancelled, StateRunning, false},
		// Staying is no move.
		{StateRunning, StateRunning, false},
		{StateCompleted, StateCompleted, false},
		{StateAccepted, "", false},
		{StateAccepted, "paused", false},
		{"paused", StateAccepted, false},
	}
	for _, tt := range tests {
		if got := tt.from.CanBecome(tt.to); got != tt.want {
			t.Errorf("State(%q).CanBecome(%q) = %v, want %v", tt.from, tt.to, got, tt.want)
		}
	}
}

// TestStateMovesComplete checks every pair of states against legalMoves,
// and that the ended states are exactly those with no way out.
func TestStateMovesComplete(t *testing.T) {
	legal := map[[2]State]bool{}
	for _, m := range legalMoves {
		legal[[2]State{m.from, m.to}] = true
	}
	for _, from := range allStates {
		out := 0
		for _, to := range allStates {
			want := legal[[2]State{from, to}]
			if got := from.CanBecome(to); got != want {
				t.Errorf("State(%q).CanBecome(%q) = %v, want %v", from, to, got, want)
			}
			if want {
				out++
			}
		}
		if from.Terminal() != (out == 0) {
			t.Errorf("State(%q).Terminal() = %v with %d moves out", from, from.Terminal(), out)
		}
	}
}
