package mcpserver

import (
	"testing"
	"time"

	"github.com/taskgate/taskgate/ledger"
)

// TestTaskTTLIsStable: the ttl a task shows does not change from one
// tasks/get to the next (it depends on no clock). A running task is never expired, so its
// retention is unlimited until it ends; an ended one is kept for its TTL
// from its end.
func TestTaskTTLIsStable(t *testing.T) {
	created := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	ms := func(d time.Duration) *time.Duration { return &d }
	tests := []struct {
		name string
		op   *ledger.Operation
		want *time.Duration
	}{
		{"no retention", &ledger.Operation{State: ledger.StateRunning, CreatedAt: created}, nil},
		{"running", &ledger.Operation{State: ledger.StateRunning, CreatedAt: created, TTL: time.Hour}, nil},
		{"waiting for input", &ledger.Operation{State: ledger.StateInputRequired, CreatedAt: created, TTL: time.Hour}, nil},
		{"ended", &ledger.Operation{State: ledger.StateCompleted, CreatedAt: created, EndedAt: created.Add(10 * time.Minute), TTL: time.Hour}, ms(70 * time.Minute)},
	}
	for _, tt := range tests {
		got := taskTTL(tt.op)
		if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
			t.Errorf("%s: ttl = %v, want %v", tt.name, fmtTTL(got), fmtTTL(tt.want))
		}
	}
}

func fmtTTL(d *time.Duration) string {
	if d == nil {
		return "unlimited"
	}
	return d.String()
}
