package console

import (
	"cmp"
	"slices"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

// spendDays is how far back the spend page adds up charges per day.
const spendDays = 30

// daySpend is what one tool was charged on one day (UTC), in one currency.
type daySpend struct {
	Day      string
	Tool     string
	Final    money.Amount
	Charges  int
	Breaches int
}

// opCharges is an operation with its charges, as spendByDay reads them.
type opCharges struct {
	Op      *ledger.Operation
	Charges []*ledger.Charge
}

// spendByDay adds up the final charges of ops per UTC day of the charge
// and per tool (qualified by its upstream), for the days in [from, to),
// newest day first; a breached operation counts once, on the day it was
// accepted. Refunded, pending and estimated charges are left out.
func spendByDay(ops []opCharges, from, to time.Time) []daySpend {
	type key struct{ day, tool, currency string }
	sums := map[key]*daySpend{}
	get := func(k key) *daySpend {
		if sums[k] == nil {
			sums[k] = &daySpend{Day: k.day, Tool: k.tool, Final: money.Zero(k.currency)}
		}
		return sums[k]
	}
	in := func(t time.Time) bool { return !t.Before(from) && t.Before(to) }
	for _, oc := range ops {
		tool := oc.Op.Upstream + "." + oc.Op.Tool
		for _, c := range oc.Charges {
			if c.Status != ledger.ChargeFinal || !in(c.CreatedAt) {
				continue
			}
			d := get(key{c.CreatedAt.UTC().Format(time.DateOnly), tool, money.Zero(c.Amount.Currency).Currency})
			if sum, err := d.Final.Add(c.Amount); err == nil {
				d.Final = sum
				d.Charges++
			}
		}
		if oc.Op.CostBreach && in(oc.Op.CreatedAt) {
			get(key{oc.Op.CreatedAt.UTC().Format(time.DateOnly), tool, oc.Op.Estimate.Currency}).Breaches++
		}
	}
	out := make([]daySpend, 0, len(sums))
	for _, d := range sums {
		out = append(out, *d)
	}
	slices.SortFunc(out, func(a, b daySpend) int {
		return cmp.Or(cmp.Compare(b.Day, a.Day), cmp.Compare(a.Tool, b.Tool), cmp.Compare(a.Final.Currency, b.Final.Currency))
	})
	return out
}
