package ledger

import (
	"testing"
	"time"
)

func TestSecretsErasable(t *testing.T) {
	ended := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	const retention = 24 * time.Hour
	cases := []struct {
		name       string
		state      State
		secrets    SecretsAtRest
		endedAt    time.Time
		reconciled bool
		now        time.Time
		want       bool
	}{
		{"completed and reconciled", StateCompleted, SecretsSealed, ended, true, ended, true},
		{"failed and reconciled", StateFailed, SecretsSealed, ended, true, ended, true},
		{"cancelled and reconciled", StateCancelled, SecretsPlaintext, ended, true, ended, true},
		{"completed, reconciliation open", StateCompleted, SecretsSealed, ended, false, ended.Add(time.Hour), false},
		{"completed, past retention", StateCompleted, SecretsSealed, ended, false, ended.Add(retention), true},
		{"plaintext past retention", StateFailed, SecretsPlaintext, ended, false, ended.Add(2 * retention), true},
		{"running", StateRunning, SecretsSealed, time.Time{}, true, ended, false},
		{"sending", StateSending, SecretsSealed, time.Time{}, false, ended.Add(2 * retention), false},
		{"review may be re-sent", StateReview, SecretsSealed, time.Time{}, true, ended.Add(2 * retention), false},
		{"accepted", StateAccepted, SecretsSealed, time.Time{}, false, ended, false},
		{"already erased", StateCompleted, SecretsErased, ended, true, ended, false},
		{"no secrets", StateCompleted, SecretsNone, ended, true, ended, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			op := &Operation{State: c.state, SecretsAtRest: c.secrets, EndedAt: c.endedAt}
			if got := SecretsErasable(op, c.reconciled, c.now, retention); got != c.want {
				t.Errorf("SecretsErasable = %v, want %v", got, c.want)
			}
		})
	}
}
