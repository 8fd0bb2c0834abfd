package ledger

import "testing"

// TestClientCancelKeeps: only before_send keeps an operation going, and
// only once its call went to the provider.
func TestClientCancelKeeps(t *testing.T) {
	for _, tt := range []struct {
		policy ClientCancel
		state  State
		sends  int
		want   bool
	}{
		{ClientCancelHonour, StateRunning, 1, false},
		{ClientCancelBeforeSend, StateAwaitingApproval, 0, false},
		{ClientCancelBeforeSend, StateAccepted, 0, false},
		{ClientCancelBeforeSend, StateAccepted, 1, false}, // the send never left
		{ClientCancelBeforeSend, StateSending, 1, true},
		{ClientCancelBeforeSend, StateRunning, 1, true},
		{ClientCancelBeforeSend, StateInputRequired, 0, false},
		{ClientCancelBeforeSend, StateInputRequired, 1, true},
		{ClientCancelBeforeSend, StateCompleted, 1, true}, // an ended job is not asked to reverse either
	} {
		op := &Operation{State: tt.state, SendCount: tt.sends}
		if got := tt.policy.Keeps(op); got != tt.want {
			t.Errorf("%s keeps a %s operation sent %d times = %v, want %v", tt.policy, tt.state, tt.sends, got, tt.want)
		}
	}
}
