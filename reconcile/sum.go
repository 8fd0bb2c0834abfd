package reconcile

import (
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

// Totals are an operation's charges added up by status.
type Totals struct {
	Final, Pending, Refunded money.Amount
	// Uncounted are the final, pending and refunded charges left out of
	// their total: in another currency, or beyond the range of an amount.
	Uncounted []Charge
}

// UncountedFinal lists the IDs of the final charges left out of Final: a
// final cost with any of them cannot be compared with a ceiling.
func (t Totals) UncountedFinal() []string {
	var ids []string
	for _, c := range t.Uncounted {
		if c.Status == ledger.ChargeFinal {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// Sum adds up charges in currency, final, pending and refunded apart. A
// charge in another currency is never added: it is listed in Uncounted.
// Estimated charges are not added up.
func Sum(charges []Charge, currency string) Totals {
	t := Totals{Final: money.Zero(currency), Pending: money.Zero(currency), Refunded: money.Zero(currency)}
	for _, c := range charges {
		var total *money.Amount
		switch c.Status {
		case ledger.ChargeFinal:
			total = &t.Final
		case ledger.ChargePending:
			total = &t.Pending
		case ledger.ChargeRefunded:
			total = &t.Refunded
		default:
			continue
		}
		sum, err := total.Add(c.Amount)
		if err != nil {
			t.Uncounted = append(t.Uncounted, c)
			continue
		}
		*total = sum
	}
	return t
}
