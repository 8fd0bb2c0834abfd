package worker

import (
	"testing"

	"github.com/taskgate/taskgate/ledger"
)

func TestStepName(t *testing.T) {
	for s, want := range map[ledger.State]string{
		ledger.StateAccepted: "taskgate.send", ledger.StateSending: "taskgate.recover_send", ledger.StateRunning: "taskgate.poll",
		ledger.StateInputRequired: "taskgate.question", ledger.StateCompleted: "taskgate.dispatch",
	} {
		if got := stepName(s); got != want {
			t.Errorf("stepName(%s) = %q, want %q", s, got, want)
		}
	}
}
