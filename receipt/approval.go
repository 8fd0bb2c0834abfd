package receipt

import (
	"encoding/json"

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
		ApprovedBy:         a.CreatedBy,
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

// approvalRequest is the approval request the operation waited on: the
// request that gave its approval when the ledger has it, else as its events
// record it; nil when it waited on none. A request still pending when the
// operation was cancelled died with it.
func (f *facts) approvalRequest() *ApprovalRequestLine {
	line := requestLine(f.in.ApprovalRequest)
	if line == nil {
		line = f.eventRequest()
	}
	if line != nil && line.Status == string(ledger.RequestPending) && f.op.State == ledger.StateCancelled {
		line.Status = string(ledger.RequestCancelled)
	}
	return line
}

// requestLine is the receipt's line of request q; nil for none.
func requestLine(q *ledger.ApprovalRequest) *ApprovalRequestLine {
	if q == nil {
		return nil
	}
	line := &ApprovalRequestLine{ID: q.ID, RequestedBy: q.RequestedBy, RequestedAt: utc(q.CreatedAt), Status: string(q.Status),
		Note: q.Note, DecidedAt: utc(q.DecidedAt)}
	switch q.Status {
	case ledger.RequestApproved:
		line.ApprovedBy = q.DecidedBy
	case ledger.RequestDeclined:
		line.DeclinedBy = q.DecidedBy
	}
	return line
}

// eventRequest is the approval request the operation waited on, read from
// its events; nil when they record none.
func (f *facts) eventRequest() *ApprovalRequestLine {
	var line *ApprovalRequestLine
	for _, e := range f.events {
		d, err := ledger.DecodeEventData[ledger.ApprovalRequestData](e)
		switch e.Kind {
		case ledger.EventApprovalRequested:
			if err == nil {
				line = &ApprovalRequestLine{ID: d.RequestID, RequestedBy: d.RequestedBy, RequestedAt: utc(e.CreatedAt), Status: string(ledger.RequestPending)}
			}
			continue
		case ledger.EventApprovalRequestApproved, ledger.EventApprovalRequestDeclined, ledger.EventApprovalRequestExpired:
		default:
			continue
		}
		if line == nil || err != nil {
			continue
		}
		line.Note, line.DecidedAt = d.Note, utc(e.CreatedAt)
		switch e.Kind {
		case ledger.EventApprovalRequestApproved:
			line.Status, line.ApprovedBy = string(ledger.RequestApproved), d.Approver
		case ledger.EventApprovalRequestDeclined:
			line.Status, line.DeclinedBy = string(ledger.RequestDeclined), d.Approver
		default:
			line.Status = string(ledger.RequestExpired)
		}
	}
	return line
}

// budgets lists the budgets that covered the operation, each with what
// the operation holds against it and whether a breach event named it.
func (f *facts) budgets() []BudgetLine {
	if len(f.in.Budgets) == 0 {
		return nil
	}
	breached := map[int64]bool{}
	for _, e := range f.in.Events {
		var d ledger.CostBoundaryBreachData
		if e.Kind == ledger.EventCostBoundaryBreach && json.Unmarshal(e.Data, &d) == nil && d.Budget != 0 {
			breached[d.Budget] = true
		}
	}
	out := make([]BudgetLine, 0, len(f.in.Budgets))
	for _, b := range f.in.Budgets {
		l := BudgetLine{ID: b.ID, Tools: b.Tools, ToolPrefix: b.ToolPrefix, RunID: b.RunID, Period: string(b.Period), TimeZone: b.TimeZone,
			MaxTotalCost: Money{b.MaxTotalCost}, MaxRemoteJobs: b.MaxRemoteJobs, Breached: breached[b.ID]}
		for _, r := range f.in.BudgetReservations {
			if r.BudgetRef != b.ID {
				continue
			}
			l.Status = string(r.Status)
			l.Reserved = Money{r.Amount}
			if r.Status == ledger.ReservationSettled {
				l.Reserved = Money{r.Settled}
			}
		}
		out = append(out, l)
	}
	return out
}
