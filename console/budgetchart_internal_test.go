package console

import (
	"testing"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

func TestChartOf(t *testing.T) {
	from := time.Date(2026, 5, 4, 0, 0, 0, 0, time.UTC)
	to := from.Add(24 * time.Hour)
	usd := func(s string) money.Amount { return money.MustParse(s, "USD") }
	b := &ledger.Budget{ID: 1, MaxTotalCost: usd("100.00"), CreatedAt: from.Add(-time.Hour), ExpiresAt: from.Add(72 * time.Hour)}
	held := func(at time.Duration, amount string) *ledger.BudgetReservation {
		return &ledger.BudgetReservation{Amount: usd(amount), Status: ledger.ReservationHeld, CreatedAt: from.Add(at)}
	}
	tests := []struct {
		name    string
		rs      []*ledger.BudgetReservation
		now     time.Time
		points  string
		ceiling int
		top     string
		over    bool
	}{
		{"nothing committed", nil, from.Add(12 * time.Hour), "4,196 300,196", 4, "100.00", false},
		// 6h is a quarter of the day: x = 4 + 592/4 = 152; 50.00 is half
		// of 192 units above the floor: y = 196 - 96 = 100.
		{"one step", []*ledger.BudgetReservation{held(6*time.Hour, "50.00")}, from.Add(12 * time.Hour), "4,196 152,196 152,100 300,100", 4, "100.00", false},
		{"settled counts its final cost; released and other periods nothing", []*ledger.BudgetReservation{
			{Amount: usd("18.00"), Settled: usd("25.00"), Status: ledger.ReservationSettled, CreatedAt: from.Add(6 * time.Hour)},
			{Amount: usd("90.00"), Status: ledger.ReservationReleased, CreatedAt: from.Add(7 * time.Hour)},
			held(-time.Hour, "90.00"),
		}, from.Add(12 * time.Hour), "4,196 152,196 152,148 300,148", 4, "100.00", false},
		{"over the ceiling scales to the total", []*ledger.BudgetReservation{held(0, "100.00"), held(12*time.Hour, "100.00")}, to.Add(time.Hour),
			"4,196 4,196 4,100 300,100 300,4 596,4", 100, "200.00", true},
	}
	for _, tt := range tests {
		c := chartOf(b, tt.rs, from, to, tt.now)
		if c.Points != tt.points || c.CeilingY != tt.ceiling || c.Top.String() != tt.top || c.Over != tt.over {
			t.Errorf("%s: chart = points %q ceiling %d top %s over %v; want %q, %d, %s, %v", tt.name, c.Points, c.CeilingY, c.Top, c.Over, tt.points, tt.ceiling, tt.top, tt.over)
		}
	}
}
