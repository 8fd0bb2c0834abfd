package receipt

import (
	"github.com/taskgate/taskgate/internal/inert"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/reconcile"
)

// Build computes the receipt of in.Operation from the ledger data in in. It
// is pure: it reads nothing but in and does not modify it.
func Build(in *Input) *Receipt {
	f := newFacts(in)
	op := f.op
	r := &Receipt{
		OperationID:        op.OperationID,
		IntendedRemoteJobs: op.IntendedRemoteJobs,
		ObservedRemoteJobs: len(f.jobs),
		EstimatedCostUSD:   Money{op.Estimate},
		Tenant:             op.Tenant,
		TaskID:             op.TaskID,
		Tool:               op.Upstream + "." + op.Tool,
		State:              string(op.State),
		GeneratedAt:        utc(in.Now),
		ChainHead:          op.ChainHead,
		Breaches:           []Breach{},
		Lineage:            []AttemptLine{},
		RemoteJobs:         []RemoteJob{},
		Charges:            []Charge{},
		NextActions:        []NextAction{},
	}
	if r.EstimatedCostUSD.Currency == "" {
		r.EstimatedCostUSD.Currency = Currency
	}

	f.countAttempts(r)
	for _, j := range f.jobs {
		if j.Duplicate {
			r.DuplicateJobs++
		}
		r.RemoteJobs = append(r.RemoteJobs, f.remoteJob(j))
	}
	r.LastReconciliation = f.lastReconciliation()
	f.out = reconcile.Assess(f.reconcileFacts(r.LastReconciliation))
	f.listCharges(r)
	r.UnpricedAttempts = f.out.UnpricedAttempts
	r.MissingRemoteJobs = f.out.MissingJobs
	r.ResultUsed = f.resultUsed()
	r.ReconciliationStatus = ReconciliationStatus(f.out.Status)
	r.Approval = f.approvalTerms(r)
	r.ApprovalRequest = f.approvalRequest()
	r.Budgets = f.budgets()
	r.Breaches = f.breaches(r)
	r.ReviewStatus = f.reviewStatus(r)
	r.Questions = f.questions()
	r.Cancellation = f.cancellation()
	r.NextActions = f.nextActions(r)
	return r
}

func (f *facts) countAttempts(r *Receipt) {
	for _, a := range f.attempts {
		switch {
		case a.Decision == ledger.DecisionDenied:
			r.DeniedAttempts++
		default:
			r.Attempts++
			if a.Decision == ledger.DecisionAttached {
				r.AttachedAttempts++
			}
		}
		client := string(a.ClientResult)
		if client == "" {
			client = string(ledger.ClientUnknown)
		}
		r.Lineage = append(r.Lineage, AttemptLine{
			RequestID:      a.RequestID,
			OperationID:    a.OperationID,
			Decision:       string(a.Decision),
			Reason:         a.Reason,
			ClientResult:   client,
			RemoteAccepted: knowledge(a.RemoteAccepted),
			RemoteEffect:   knowledge(a.RemoteEffect),
			ChargeStatus:   knowledge(a.ChargeStatus),
			TraceID:        a.TraceID(),
			At:             utc(a.CreatedAt),
		})
	}
}

func (f *facts) remoteJob(j *ledger.RemoteJob) RemoteJob {
	out := RemoteJob{
		RemoteJobID:       j.RemoteJobID,
		Upstream:          j.Upstream,
		Endpoint:          inert.URL(j.Endpoint),
		Kind:              string(j.Kind),
		Status:            string(jobStatus(j)),
		Intended:          j.Intended,
		Duplicate:         j.Duplicate,
		CompletedAt:       utc(f.completedAt[j.ID]),
		CancelRequested:   !j.CancelRequestedAt.IsZero(),
		CancelRequestedAt: utc(j.CancelRequestedAt),
		EffectReversed:    knowledge(j.EffectReversed),
		Evidence:          f.evidence[j.RemoteJobID],
	}
	switch {
	case !j.Duplicate:
	case j.DuplicateResolved != "":
		out.DuplicateResolved = j.DuplicateResolved
	case j.Status == ledger.JobCancelled:
		out.DuplicateResolved = "cancelled"
	default:
		out.DuplicateResolved = "open"
	}
	return out
}

// listCharges lists the charges and their USD totals.
func (f *facts) listCharges(r *Receipt) {
	for _, c := range f.charges {
		r.Charges = append(r.Charges, Charge{
			ChargeID:    chargeID(c),
			RemoteJobID: f.remoteJobID(c.RemoteJobRef),
			Amount:      Money{c.Amount},
			Currency:    currencyOf(c.Amount),
			Status:      string(c.Status),
			Kind:        c.Kind,
		})
	}
	t := f.out.Totals
	r.FinalCostUSD, r.PendingCostUSD, r.RefundedCostUSD = Money{t.Final}, Money{t.Pending}, Money{t.Refunded}
}

// resultUsed is the intended job's ID, else the only completed job's.
func (f *facts) resultUsed() string {
	var completed []*ledger.RemoteJob
	for _, j := range f.jobs {
		if j.Intended {
			return j.RemoteJobID
		}
		if j.Status == ledger.JobCompleted {
			completed = append(completed, j)
		}
	}
	if len(completed) == 1 {
		return completed[0].RemoteJobID
	}
	return ""
}
