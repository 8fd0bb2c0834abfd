package console

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

// The budget chart's drawing area, in SVG user units.
const (
	chartWidth  = 600
	chartHeight = 200
	chartPad    = 4
)

// budgetChart is a budget's consumption over one period, drawn as a
// server-rendered SVG: the sum committed against it as a step line from
// the period's start to now, and its ceiling as a horizontal line. It
// holds numbers and ready-made point lists only, so the page shows no
// text from the ledger inside the SVG.
type budgetChart struct {
	Width, Height int
	// Points is the step line's "x,y x,y ..." list; CeilingY the
	// ceiling's height; NowX where now is.
	Points   string
	CeilingY int
	NowX     int
	// Top is the amount at the top of the chart (the ceiling, or what was
	// committed when that is more); From and To bound the period shown.
	Top      money.Amount
	From, To time.Time
	// Over says what was committed is above the ceiling.
	Over bool
}

// chartOf draws what reservations made in [from, to) committed against
// budget b by now. A budget without a period (zero from and to) is drawn
// from its creation to its expiry.
func chartOf(b *ledger.Budget, rs []*ledger.BudgetReservation, from, to, now time.Time) budgetChart {
	if from.IsZero() {
		from, to = b.CreatedAt, b.ExpiresAt
	}
	c := budgetChart{Width: chartWidth, Height: chartHeight, From: from, To: to}
	in := slices.DeleteFunc(slices.Clone(rs), func(r *ledger.BudgetReservation) bool {
		return r.Status == ledger.ReservationReleased || r.CreatedAt.Before(from) || !r.CreatedAt.Before(to) || r.Amount.Currency != b.MaxTotalCost.Currency
	})
	slices.SortFunc(in, func(x, y *ledger.BudgetReservation) int { return x.CreatedAt.Compare(y.CreatedAt) })
	type step struct {
		at    time.Time
		total int64
	}
	var (
		steps []step
		total int64
	)
	for _, r := range in {
		amount := r.Amount.Micros
		if r.Status == ledger.ReservationSettled {
			amount = r.Settled.Micros
		}
		total += amount
		steps = append(steps, step{r.CreatedAt, total})
	}
	top := max(b.MaxTotalCost.Micros, total, 1)
	c.Top = money.FromMicros(top, b.MaxTotalCost.Currency)
	c.Over = total > b.MaxTotalCost.Micros
	span := to.Sub(from)
	x := func(t time.Time) int {
		if span <= 0 || !t.After(from) {
			return chartPad
		}
		if !t.Before(to) {
			return chartWidth - chartPad
		}
		return chartPad + int(float64(chartWidth-2*chartPad)*float64(t.Sub(from))/float64(span))
	}
	y := func(m int64) int {
		return chartHeight - chartPad - int(float64(chartHeight-2*chartPad)*float64(m)/float64(top))
	}
	end := now
	if end.After(to) {
		end = to
	}
	pts := []string{fmt.Sprintf("%d,%d", x(from), y(0))}
	last := int64(0)
	for _, s := range steps {
		pts = append(pts, fmt.Sprintf("%d,%d", x(s.at), y(last)), fmt.Sprintf("%d,%d", x(s.at), y(s.total)))
		last = s.total
	}
	pts = append(pts, fmt.Sprintf("%d,%d", x(end), y(last)))
	c.Points = strings.Join(pts, " ")
	c.CeilingY = y(b.MaxTotalCost.Micros)
	c.NowX = x(end)
	return c
}
