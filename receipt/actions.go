package receipt

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/taskgate/taskgate/ledger"
)

// Next actions a receipt can name. Each targets one remote job, charge or
// operation.
const (
	ActionCancelDuplicate      = "cancel_duplicate"
	ActionCheckMissingJob      = "check_missing_job"
	ActionRequestRefund        = "request_refund"
	ActionCheckLateInvoice     = "check_late_invoice"
	ActionReviewChargeCurrency = "review_charge_currency"
	ActionPreserveEvidence     = "preserve_evidence"
	ActionReconcileAgain       = "reconcile_again"
	ActionResolveReview        = "resolve_review"
	// ActionDecideApprovalRequest: the operation waits for an approver to
	// approve or decline its approval request.
	ActionDecideApprovalRequest = "decide_approval_request"
)

// actionRank sorts next actions: what stops further spend comes first.
func actionRank(action string) int {
	return slices.Index([]string{
		ActionCancelDuplicate, ActionRequestRefund, ActionCheckMissingJob, ActionCheckLateInvoice, ActionReviewChargeCurrency,
		ActionPreserveEvidence, ActionReconcileAgain, ActionResolveReview, ActionDecideApprovalRequest,
	}, action)
}

func (f *facts) nextActions(r *Receipt) []NextAction {
	owner := cmp.Or(f.in.Owner, f.op.Tenant)
	grace := f.in.InvoiceGrace
	if grace <= 0 {
		grace = DefaultInvoiceGrace
	}
	var out []NextAction
	seen := map[[2]string]bool{}
	add := func(a NextAction) {
		k := [2]string{a.Action, a.Target}
		if seen[k] {
			return
		}
		seen[k] = true
		a.Owner = owner
		out = append(out, a)
	}
	var evidence []string

	for i, j := range f.jobs {
		if j.Duplicate {
			evidence = append(evidence, "duplicate remote job "+j.RemoteJobID)
		}
		if duplicateOpen(j) {
			add(NextAction{Action: ActionCancelDuplicate, Target: j.RemoteJobID,
				Reason: fmt.Sprintf("duplicate remote job (status %s) beyond the %d intended; cancel it, or accept it deliberately", jobStatus(j), f.op.IntendedRemoteJobs)})
		}
		if j.Duplicate && j.DuplicateResolved != "accepted" {
			for _, c := range f.jobCharges[j.ID] {
				if c.Status == ledger.ChargeFinal || c.Status == ledger.ChargePending {
					add(NextAction{Action: ActionRequestRefund, Target: chargeID(c),
						Reason: fmt.Sprintf("%s charge of %s on duplicate remote job %s", c.Status, c.Amount.Display(), j.RemoteJobID)})
				}
			}
		}
		if f.out.Jobs[i].Uninvoiced {
			reason := "remote job completed with no charge recorded; the provider contract prices this tool"
			if n := len(f.jobCharges[j.ID]); n > 0 {
				reason = fmt.Sprintf("remote job completed and its %d charge(s) are not final yet", n)
			}
			var due time.Time
			if done := f.completedAt[j.ID]; !done.IsZero() {
				due = utc(done.Add(grace))
			}
			add(NextAction{Action: ActionCheckLateInvoice, Target: j.RemoteJobID, Reason: reason, Due: due})
		}
	}
	if n := r.MissingRemoteJobs; n > 0 {
		evidence = append(evidence, plural(n, "missing remote job"))
		add(NextAction{Action: ActionCheckMissingJob, Target: f.op.OperationID,
			Reason: fmt.Sprintf("the call was to start %d remote jobs and the provider shows %d of them; ask the provider whether the other %d ran under another ID or never started", f.op.IntendedRemoteJobs, f.op.IntendedRemoteJobs-n, n)})
	}
	for _, b := range r.Breaches {
		evidence = append(evidence, "cost boundary breach")
		if b.Open && b.ChargeID != "" {
			reason := fmt.Sprintf("final cost %s is above the approved ceiling", b.FinalCostUSD.Display())
			if b.CeilingUSD != nil {
				reason = fmt.Sprintf("final cost %s exceeds the approved ceiling of %s by %s", b.FinalCostUSD.Display(), b.CeilingUSD.Display(), b.OverByUSD.Display())
			}
			add(NextAction{Action: ActionRequestRefund, Target: b.ChargeID, Reason: reason})
		}
	}
	for _, c := range f.charges {
		if cur := currencyOf(c.Amount); cur != Currency {
			add(NextAction{Action: ActionReviewChargeCurrency, Target: chargeID(c),
				Reason: fmt.Sprintf("charged %s; the receipt reckons in %s, so this charge is not in its totals", c.Amount.Display(), Currency)})
		}
	}
	if r.ReconciliationStatus == ReconciliationIndeterminate {
		reason := f.indeterminateReason(r.LastReconciliation)
		evidence = append(evidence, "indeterminate provider lookup")
		add(NextAction{Action: ActionReconcileAgain, Target: f.op.OperationID, Reason: reason})
	}
	if len(evidence) > 0 {
		add(NextAction{Action: ActionPreserveEvidence, Target: f.op.OperationID,
			Reason: "keep the ledger, attempts and provider records: " + strings.Join(evidence, "; ")})
	}
	if f.op.State == ledger.StateReview {
		reason := cmp.Or(f.op.ReviewReason, f.op.StatusMessage, "the operation waits for a human decision")
		add(NextAction{Action: ActionResolveReview, Target: f.op.OperationID, Reason: reason})
	}
	if f.op.State == ledger.StateAwaitingApproval {
		reason := cmp.Or(f.op.StatusMessage, "the operation waits for an approver to decide its approval request")
		add(NextAction{Action: ActionDecideApprovalRequest, Target: f.op.OperationID, Reason: reason})
	}

	slices.SortStableFunc(out, func(a, b NextAction) int {
		if c := cmp.Compare(actionRank(a.Action), actionRank(b.Action)); c != 0 {
			return c
		}
		return cmp.Compare(a.Target, b.Target)
	})
	if out == nil {
		out = []NextAction{}
	}
	return out
}

func (f *facts) indeterminateReason(last *Reconciliation) string {
	if last != nil && last.Lookup == LookupIndeterminate {
		if last.Detail != "" {
			return "the last provider lookup was indeterminate: " + last.Detail
		}
		return "the last provider lookup was indeterminate"
	}
	var unknown []string
	for i, j := range f.jobs {
		if f.out.Jobs[i].Unknown {
			unknown = append(unknown, j.RemoteJobID)
		}
	}
	if len(unknown) == 0 {
		return fmt.Sprintf("the operation was sent %d time(s) and no remote job is known, but nothing shows that none started; look the operation up at the provider", f.op.SendCount)
	}
	return "the status of remote job(s) " + strings.Join(unknown, ", ") + " is unknown"
}
