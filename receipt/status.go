package receipt

import (
	"fmt"
	"slices"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/reconcile"
)

// Lookup outcomes the reconciler records in [ledger.EventReconciled] data.
const (
	LookupAnswered      = reconcile.LookupAnswered
	LookupIndeterminate = reconcile.LookupIndeterminate
)

// ReconciliationStatus says whether every remote job and charge of the
// operation is accounted for.
type ReconciliationStatus string

const (
	ReconciliationComplete      = ReconciliationStatus(reconcile.Complete)
	ReconciliationIncomplete    = ReconciliationStatus(reconcile.Incomplete)
	ReconciliationIndeterminate = ReconciliationStatus(reconcile.Indeterminate)
)

// ReviewStatus says whether the operation's outcome can be handed off.
type ReviewStatus string

const (
	ReviewReady       ReviewStatus = "ready"
	ReviewBlocked     ReviewStatus = "blocked"
	ReviewNeedsReview ReviewStatus = "needs_review"
)

// reconcileFacts are the facts of the operation as the ledger recorded
// them, for [reconcile.Assess]; last is the latest reconciler pass.
func (f *facts) reconcileFacts(last *Reconciliation) *reconcile.Facts {
	rf := &reconcile.Facts{
		Operation: f.op, Currency: Currency, Priced: f.in.Priced,
		Indeterminate: last != nil && last.Lookup == LookupIndeterminate,
		Attempts:      f.attempts, Events: f.events,
	}
	for _, j := range f.jobs {
		rf.Jobs = append(rf.Jobs, reconcile.Job{ID: j.RemoteJobID, Attempt: j.AttemptRef, Status: j.Status, Intended: j.Intended, Duplicate: j.Duplicate})
	}
	for _, c := range f.charges {
		rf.Charges = append(rf.Charges, reconcile.Charge{ID: chargeID(c), RemoteJobID: f.remoteJobID(c.RemoteJobRef), Amount: c.Amount, Status: c.Status})
	}
	return rf
}

func (f *facts) lastReconciliation() *Reconciliation {
	for _, e := range slices.Backward(f.events) {
		if e.Kind != ledger.EventReconciled {
			continue
		}
		d, err := ledger.DecodeEventData[ledger.ReconciledData](e)
		rec := &Reconciliation{Lookup: d.Lookup, Detail: d.Detail, At: utc(e.CreatedAt)}
		if err != nil || (d.Lookup != LookupAnswered && d.Lookup != LookupIndeterminate) {
			// A pass the receipt cannot read proves nothing about the provider.
			rec.Lookup = LookupIndeterminate
			rec.Detail = fmt.Sprintf("unreadable reconciliation record: %s", e.Data)
		}
		return rec
	}
	return nil
}

func (f *facts) reviewStatus(r *Receipt) ReviewStatus {
	if slices.ContainsFunc(f.jobs, duplicateOpen) {
		return ReviewBlocked
	}
	openBreach := slices.ContainsFunc(r.Breaches, func(b Breach) bool { return b.Open })
	if r.ReconciliationStatus == ReconciliationComplete && !openBreach && f.op.State != ledger.StateReview && r.MissingRemoteJobs == 0 {
		return ReviewReady
	}
	return ReviewNeedsReview
}

// Final reports whether r is a final assessment, which the gateway issues
// as a signed version: reconciliation is complete (the operation has
// ended and every job and charge is settled), or the operation waits for
// a human's review. Anything else is still open and its receipt
// provisional.
func Final(r *Receipt) bool {
	return r.ReconciliationStatus == ReconciliationComplete || r.State == string(ledger.StateReview)
}
