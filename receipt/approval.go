package receipt

import (
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/policy"
)

// BreachCostBoundary is the kind of a breach of the approval's cost ceiling.
const BreachCostBoundary = string(ledger.EventCostBoundaryBreach)

func (f *facts) approvalTerms(r *Receipt) *ApprovalTerms {
	a := f.in.Approval
	if a == nil {
		return nil
	}
	used := policy.Committed(f.in.Reservations, Currency)
	spent := max(used.Spend.Micros, r.FinalCostUSD.Micros+r.PendingCostUSD.Micros)
	jobs := max(used.RemoteJobs, len(f.jobs))
	return &ApprovalTerms{
		ID:                 a.ID,
		MaxTotalCost:       Money{a.MaxTotalCost},
		MaxRemoteJobs:      a.MaxRemoteJobs,
		RetryPolicy:        string(a.RetryPolicy),
		ExpiresAt:          utc(a.ExpiresAt),
		RevokedAt:          utc(a.RevokedAt),
		HeadroomUSD:        usd(a.MaxTotalCost.Micros - spent),
		RemoteJobsHeadroom: a.MaxRemoteJobs - jobs,
	}
}

// breaches lists a cost boundary breach when the operation was flagged or
// its final cost exceeds the approval's ceiling.
func (f *facts) breaches(r *Receipt) []Breach {
	a := f.in.Approval
	over := a != nil && r.FinalCostUSD.Micros > a.MaxTotalCost.Micros
	if !f.op.CostBreach && !over {
		return []Breach{}
	}
	b := Breach{Kind: BreachCostBoundary, FinalCostUSD: r.FinalCostUSD, Open: over || a == nil}
	if a != nil {
		ceiling, by := usd(a.MaxTotalCost.Micros), usd(max(0, r.FinalCostUSD.Micros-a.MaxTotalCost.Micros))
		b.CeilingUSD, b.OverByUSD = &ceiling, &by
	}
	if c := f.overCeilingCharge(); c != nil {
		b.ChargeID = chargeID(c)
	}
	return []Breach{b}
}

// overCeilingCharge is the final charge whose arrival took the running
// total above the ceiling, or the last final charge when the ceiling is
// unknown.
func (f *facts) overCeilingCharge() *ledger.Charge {
	var total int64
	var last *ledger.Charge
	for _, c := range f.charges {
		if c.Status != ledger.ChargeFinal || currencyOf(c.Amount) != Currency {
			continue
		}
		total += c.Amount.Micros
		last = c
		if a := f.in.Approval; a != nil && total > a.MaxTotalCost.Micros {
			return c
		}
	}
	if f.in.Approval == nil {
		return last
	}
	return nil
}
