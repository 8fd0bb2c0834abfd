package console

import (
	"testing"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

func TestSpendByDay(t *testing.T) {
	day := time.Date(2026, 5, 4, 0, 0, 0, 0, time.UTC)
	usd := func(s string) money.Amount { return money.MustParse(s, "USD") }
	charge := func(at time.Duration, amount string, st ledger.ChargeStatus) *ledger.Charge {
		return &ledger.Charge{Amount: usd(amount), Status: st, CreatedAt: day.Add(at)}
	}
	op := func(tool string, breach bool, cs ...*ledger.Charge) opCharges {
		return opCharges{Op: &ledger.Operation{Upstream: "hosted_test", Tool: tool, CostBreach: breach, CreatedAt: day.Add(time.Hour), Estimate: usd("18.00")}, Charges: cs}
	}
	ops := []opCharges{
		op("run_suite", false, charge(2*time.Hour, "17.84", ledger.ChargeFinal), charge(3*time.Hour, "5.00", ledger.ChargeRefunded)),
		op("run_suite", true, charge(26*time.Hour, "23.10", ledger.ChargeFinal), charge(27*time.Hour, "1.00", ledger.ChargePending)),
		op("run_matrix", false, charge(4*time.Hour, "17.84", ledger.ChargeFinal), charge(4*time.Hour, "17.84", ledger.ChargeFinal)),
		op("run_suite", false, charge(-48*time.Hour, "99.00", ledger.ChargeFinal)),
	}
	got := spendByDay(ops, day.Add(-24*time.Hour), day.Add(48*time.Hour))
	want := []daySpend{
		{Day: "2026-05-05", Tool: "hosted_test.run_suite", Final: usd("23.10"), Charges: 1},
		{Day: "2026-05-04", Tool: "hosted_test.run_matrix", Final: usd("35.68"), Charges: 2},
		{Day: "2026-05-04", Tool: "hosted_test.run_suite", Final: usd("17.84"), Charges: 1, Breaches: 1},
	}
	if len(got) != len(want) {
		t.Fatalf("spendByDay = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
