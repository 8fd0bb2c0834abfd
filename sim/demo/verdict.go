package demo

import (
	"fmt"

	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/sim/providersim"
)

// The figures the story must end with.
const (
	// wantFinalMicros is one successful job's final charge: 17.84 USD.
	wantFinalMicros = 17_840_000
	// wantControlJobs and wantControlMicros are the control's record: the
	// lost call's job and the naive retry's job, both charged.
	wantControlJobs   = 2
	wantControlMicros = 2 * wantFinalMicros
)

// judge compares what the run showed with what the story says: the
// receipt, the record of the provider behind taskgate, and the control's
// record. It returns one line per difference.
func judge(o *Outcome) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	if rc := o.Receipt; rc == nil {
		bad("no receipt was built for %s", OperationID)
	} else {
		if rc.ObservedRemoteJobs != 1 {
			bad("receipt observed_remote_jobs: %d, want 1", rc.ObservedRemoteJobs)
		}
		if rc.DuplicateJobs != 0 {
			bad("receipt duplicate_jobs: %d, want 0", rc.DuplicateJobs)
		}
		if rc.FinalCostUSD.Micros != wantFinalMicros || rc.FinalCostUSD.Currency != receipt.Currency {
			bad("receipt final_cost_usd: %s, want %s", rc.FinalCostUSD.Display(), providersim.Micros(wantFinalMicros))
		}
		if rc.ReconciliationStatus != receipt.ReconciliationComplete {
			bad("receipt reconciliation_status: %s, want %s", rc.ReconciliationStatus, receipt.ReconciliationComplete)
		}
		if rc.ReviewStatus != receipt.ReviewReady {
			bad("receipt review_status: %s, want %s", rc.ReviewStatus, receipt.ReviewReady)
		}
	}
	if t := o.Behind.Totals; t.JobsStarted != 1 || t.FinalChargeUSD != wantFinalMicros {
		bad("the provider behind taskgate started %d job(s) and charged %s USD, want 1 and %s",
			t.JobsStarted, t.FinalChargeUSD, providersim.Micros(wantFinalMicros))
	}
	if t := o.Control.Totals; t.JobsStarted != wantControlJobs || t.FinalChargeUSD != wantControlMicros {
		bad("the control's provider started %d job(s) and charged %s USD, want %d and %s",
			t.JobsStarted, t.FinalChargeUSD, wantControlJobs, providersim.Micros(wantControlMicros))
	}
	return problems
}
