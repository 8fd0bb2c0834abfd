package console

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/taskgate/taskgate/api"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/receipt"
)

// spendData is the spend page: each approval of the tenant with what its
// operation committed against its ceiling, and the tenant's totals.
type spendData struct {
	Approvals []spendRow
	Totals    []spendTotal
	// OpenBreaches counts the tenant's breaches that refunds have not
	// closed.
	OpenBreaches int
	// Budgets are the tenant's open budgets with their current periods;
	// Days the final charges per day and tool of the last spendDays days,
	// Truncated set when more operations were accepted in them than the
	// page reads.
	Budgets   []api.BudgetView
	Days      []daySpend
	Truncated bool
}

// spendOperations bounds how many of the last days' operations the spend
// page reads charges for.
const spendOperations = 1000

type spendRow struct {
	api.ApprovalView
	// Used says the approval's operation ran under it; the figures below
	// are zero otherwise.
	Used bool
	// Committed is the larger of what its reservations hold and what the
	// final and pending charges add up to; Headroom is the ceiling less
	// that, negative once breached.
	Committed, Headroom, Final money.Amount
	Breaches                   []receipt.Breach
}

// spendTotal is the tenant's spend in one currency.
type spendTotal struct {
	Currency                  string
	Ceiling, Committed, Final money.Amount
}

func (c *Console) spend(w http.ResponseWriter, r *http.Request) {
	v := viewerFrom(r.Context())
	approvals, err := c.store.ApprovalList(r.Context(), &ledger.ApprovalListParams{Tenant: v.tenant, IncludeRevoked: true})
	if err != nil {
		c.fail(w, r, err, http.StatusInternalServerError, "could not list the approvals; the gateway log has the details, try again shortly")
		return
	}
	now := c.clock()
	var d spendData
	totals := map[string]*spendTotal{}
	for _, a := range approvals {
		row := spendRow{ApprovalView: api.ViewApproval(a, now), Committed: money.Zero(a.MaxTotalCost.Currency),
			Headroom: a.MaxTotalCost, Final: money.Zero(a.MaxTotalCost.Currency)}
		op, err := c.store.OperationGet(r.Context(), &ledger.OperationGetParams{Tenant: v.tenant, OperationID: a.OperationID})
		switch {
		case errors.Is(err, ledger.ErrNotFound):
		case err != nil:
			c.fail(w, r, err, http.StatusInternalServerError, "could not load an approval's operation; the gateway log has the details, try again shortly")
			return
		case op.ApprovalID == a.ID:
			in, err := receipt.Load(r.Context(), c.store, op, &receipt.LoadOptions{Now: now})
			if err != nil {
				c.fail(w, r, err, http.StatusInternalServerError, "could not load an operation's receipt; the gateway log has the details, try again shortly")
				return
			}
			rc := receipt.Build(in)
			row.Used, row.Final, row.Breaches = true, rc.FinalCostUSD.Amount, rc.Breaches
			if rc.Approval != nil {
				row.Headroom = rc.Approval.HeadroomUSD.Amount
				if row.Committed, err = a.MaxTotalCost.Sub(row.Headroom); err != nil {
					c.fail(w, r, err, http.StatusInternalServerError, "an approval's figures are in different currencies; the gateway log has the details")
					return
				}
			}
			for _, b := range rc.Breaches {
				if b.Open {
					d.OpenBreaches++
				}
			}
		}
		t := totals[a.MaxTotalCost.Currency]
		if t == nil {
			cur := a.MaxTotalCost.Currency
			t = &spendTotal{Currency: cur, Ceiling: money.Zero(cur), Committed: money.Zero(cur), Final: money.Zero(cur)}
			totals[cur] = t
		}
		// A figure in another currency than its ceiling is left out of the
		// totals rather than added to the wrong sum.
		if s, err := t.Ceiling.Add(a.MaxTotalCost); err == nil {
			t.Ceiling = s
		}
		if s, err := t.Committed.Add(row.Committed); err == nil {
			t.Committed = s
		}
		if s, err := t.Final.Add(row.Final); err == nil {
			t.Final = s
		}
		d.Approvals = append(d.Approvals, row)
	}
	for _, t := range totals {
		d.Totals = append(d.Totals, *t)
	}
	if err := c.spendOfBudgetsAndDays(r, v.tenant, now, &d); err != nil {
		c.fail(w, r, err, http.StatusInternalServerError, "could not add up the budgets and the spend per day; the gateway log has the details, try again shortly")
		return
	}
	slices.SortFunc(d.Totals, func(a, b spendTotal) int { return strings.Compare(a.Currency, b.Currency) })
	c.render(w, r, "spend", http.StatusOK, &page{Title: "Spend", Data: d})
}

// spendOfBudgetsAndDays fills in d's open budgets and its spend per day and
// tool over the last spendDays days.
func (c *Console) spendOfBudgetsAndDays(r *http.Request, tenant string, now time.Time, d *spendData) error {
	ctx := r.Context()
	budgets, err := c.store.BudgetList(ctx, &ledger.BudgetListParams{Tenant: tenant, Now: now})
	if err != nil {
		return err
	}
	for _, b := range budgets {
		rs, err := c.store.BudgetReservationList(ctx, &ledger.BudgetReservationListParams{BudgetRef: b.ID})
		if err != nil {
			return err
		}
		d.Budgets = append(d.Budgets, api.ViewBudget(b, rs, now))
	}
	from := now.UTC().Truncate(24*time.Hour).AddDate(0, 0, 1-spendDays)
	var ops []opCharges
	p := &ledger.OperationListParams{Tenant: tenant, CreatedFrom: from, Limit: 100}
	for len(ops) < spendOperations {
		page, err := c.store.OperationList(ctx, p)
		if err != nil {
			return err
		}
		for _, op := range page {
			cs, err := c.store.ChargeList(ctx, op.ID)
			if err != nil {
				return err
			}
			ops = append(ops, opCharges{Op: op, Charges: cs})
		}
		if len(page) < p.Limit {
			break
		}
		p.BeforeID = page[len(page)-1].ID
	}
	d.Truncated = len(ops) >= spendOperations
	d.Days = spendByDay(ops, from, now.Add(time.Second))
	return nil
}
