package worker_test

import (
	"strings"
	"testing"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/worker"
)

// TestCancelStatus: a cancelled task's status message says what came of
// asking the provider to stop each job.
func TestCancelStatus(t *testing.T) {
	for _, tt := range []struct {
		name     string
		sent     bool
		outcomes worker.CancelOutcomes
		again    bool
		want     string
	}{
		{"nothing sent", false, nil, false, "cancelled by request before anything was sent to the provider; nothing started"},
		{"asked", true, nil, false, "cancelled by request; the provider is being asked to stop"},
		{"stopped and reversed", true, worker.CancelOutcomes{"j1": {Taken: true, EffectReversed: ledger.Yes}}, false,
			"cancelled by request; the provider stopped job j1 and its effect was reversed"},
		{"stopped, charge refunded", true, worker.CancelOutcomes{"j1": {Taken: true, EffectReversed: ledger.Yes, Detail: "its pending charge was refunded"}}, false,
			"cancelled by request; the provider stopped job j1 and its effect was reversed (its pending charge was refunded)"},
		{"a long detail is cut", true, worker.CancelOutcomes{"j1": {Taken: true, EffectReversed: ledger.No, Detail: strings.Repeat("é", 150)}}, false,
			"cancelled by request; the provider was asked to stop job j1, but its effect stands (" + strings.Repeat("é", 100) + "…)"},
		{"effect stands", true, worker.CancelOutcomes{"j1": {Taken: true, EffectReversed: ledger.No, Detail: "job already finished"}}, false,
			"cancelled by request; the provider was asked to stop job j1, but its effect stands (job already finished)"},
		{"taken, effect unknown", true, worker.CancelOutcomes{"j1": {Taken: true, EffectReversed: ledger.Unknown}}, false,
			"cancelled by request; the provider took the cancellation of job j1; whether its effect was reversed is not known yet"},
		{"could not stop, asking again", true, worker.CancelOutcomes{"j1": {Error: "connection refused"}}, true,
			"cancelled by request; the provider could not be asked to stop job j1 (connection refused); asking again"},
		{"could not stop, given up", true, worker.CancelOutcomes{"j1": {Error: "connection refused"}}, false,
			"cancelled by request; the provider could not be asked to stop job j1 (connection refused); cancel it at the provider"},
		{"each job, in order", true, worker.CancelOutcomes{"j2": {Taken: true, EffectReversed: ledger.Yes}, "j1": {Error: "timeout"}}, true,
			"cancelled by request; the provider could not be asked to stop job j1 (timeout); asking again; the provider stopped job j2 and its effect was reversed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := worker.CancelStatus(tt.sent, tt.outcomes, tt.again); got != tt.want {
				t.Errorf("CancelStatus = %q\nwant %q", got, tt.want)
			}
		})
	}
}
