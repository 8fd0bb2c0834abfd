package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	// Budgets name IANA zones; the binary carries the zone database so
	// that a host without one (a distroless image) still knows them.
	_ "time/tzdata"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

// BudgetCall is what a budget decision knows of one call: whose it is,
// which tool (qualified by its upstream), the run it belongs to and its
// priced route.
type BudgetCall struct {
	Tenant string
	Tool   string
	RunID  string
	Route  Route
}

// BudgetMatches reports whether b's scope takes in call: the same tenant,
// a tool it names or its prefix starts (any tool when it names none), and
// its run when it has one. Whether b is open is not part of its scope.
func BudgetMatches(b *ledger.Budget, call BudgetCall) bool {
	if b.Tenant != call.Tenant || (b.RunID != "" && b.RunID != call.RunID) {
		return false
	}
	if len(b.Tools) == 0 && b.ToolPrefix == "" {
		return true
	}
	return slices.Contains(b.Tools, call.Tool) || (b.ToolPrefix != "" && strings.HasPrefix(call.Tool, b.ToolPrefix))
}

// BudgetWindow is the period of b that at falls in: from its start
// (included) to its end (excluded), midnight to midnight in b's time
// zone, weeks from Monday. A budget without a period has one window, all
// time: both times are zero.
func BudgetWindow(b *ledger.Budget, at time.Time) (from, to time.Time, err error) {
	if b.Period == ledger.BudgetPeriodNone || b.Period == "" {
		return time.Time{}, time.Time{}, nil
	}
	loc, err := time.LoadLocation(b.TimeZone)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("budget %d names time zone %q, which this gateway does not know: %w", b.ID, b.TimeZone, err)
	}
	t := at.In(loc)
	y, m, d := t.Date()
	switch b.Period {
	case ledger.BudgetPeriodDay:
		from = time.Date(y, m, d, 0, 0, 0, 0, loc)
		return from, time.Date(y, m, d+1, 0, 0, 0, 0, loc), nil
	case ledger.BudgetPeriodWeek:
		back := (int(t.Weekday()) + 6) % 7 // days since Monday
		from = time.Date(y, m, d-back, 0, 0, 0, 0, loc)
		return from, time.Date(y, m, d-back+7, 0, 0, 0, 0, loc), nil
	case ledger.BudgetPeriodMonth:
		from = time.Date(y, m, 1, 0, 0, 0, 0, loc)
		return from, time.Date(y, m+1, 1, 0, 0, 0, 0, loc), nil
	}
	return time.Time{}, time.Time{}, fmt.Errorf("budget %d has period %q, which this gateway does not know", b.ID, b.Period)
}

// within reports whether t falls in [from, to); zero bounds are open.
func within(t, from, to time.Time) bool {
	return (from.IsZero() || !t.Before(from)) && (to.IsZero() || t.Before(to))
}

// BudgetCommitted sums what reservations made in [from, to) commit against
// a budget counting in currency, as [Committed] does for an approval.
func BudgetCommitted(rs []*ledger.BudgetReservation, currency string, from, to time.Time) Usage {
	var in []*ledger.Reservation
	for _, r := range rs {
		if within(r.CreatedAt, from, to) {
			in = append(in, &ledger.Reservation{ID: r.ID, Amount: r.Amount, Settled: r.Settled, RemoteJobs: r.RemoteJobs, Status: r.Status})
		}
	}
	return Committed(in, currency)
}

// BudgetUse is a budget with its reservations: those of its current period
// at least; others are ignored.
type BudgetUse struct {
	Budget       *ledger.Budget
	Reservations []*ledger.BudgetReservation
}

// Cover is the outcome of [CoverByBudgets].
type Cover struct {
	// Covered says every budget in Budgets has room for the call's route.
	Covered bool
	// Budgets are the open budgets whose scope matches the call: when
	// Covered, the route is reserved against each of them.
	Budgets []*ledger.Budget
	// Ceiling is what the operation may cost under the budgets: the least,
	// over Budgets, of each one's room left in its period and its
	// per-operation cap. The operation's own approval carries it.
	Ceiling money.Amount
	// Short is the budget that lacked room (0 when none matched), and
	// Shortfall says which budget was short and by how much, for a human
	// or a model; empty when Covered.
	Short     int64
	Shortfall string
}

// CoverByBudgets decides whether the budgets in uses admit call at now
// without a person: the open ones whose scope matches it must number at
// least one, and each must have room in its current period for the
// whole route (every remote job of a fan-out, and its estimate), with the
// estimate within its per-operation cap. It covers all of the route or
// none of it.
func CoverByBudgets(uses []BudgetUse, call BudgetCall, now time.Time) Cover {
	var (
		out   Cover
		least *money.Amount
	)
	jobs := call.Route.jobs()
	est := call.Route.Estimate
	for _, u := range uses {
		b := u.Budget
		if !b.Open(now) || !BudgetMatches(b, call) {
			continue
		}
		out.Budgets = append(out.Budgets, b)
		room, short := budgetRoom(u, jobs, est, now)
		if short != "" {
			return Cover{Budgets: out.Budgets, Short: b.ID, Shortfall: short}
		}
		if least == nil || room.Micros < least.Micros {
			least = &room
		}
	}
	if len(out.Budgets) == 0 {
		return Cover{Shortfall: fmt.Sprintf("no open budget covers %s for this tenant", call.Tool)}
	}
	out.Covered, out.Ceiling = true, *least
	return out
}

// budgetRoom is what the operation may cost under u's budget (its room in
// the period, or its per-operation cap when less), or why the route does
// not fit.
func budgetRoom(u BudgetUse, jobs int, est money.Amount, now time.Time) (money.Amount, string) {
	b := u.Budget
	from, to, err := BudgetWindow(b, now)
	if err != nil {
		return money.Amount{}, err.Error()
	}
	cur := b.MaxTotalCost.Currency
	if money.Zero(est.Currency).Currency != money.Zero(cur).Currency {
		return money.Amount{}, fmt.Sprintf("budget %d counts %s and this call is estimated at %s", b.ID, cur, est.Display())
	}
	if opCap := b.PerOperationCap; !opCap.IsZero() && est.Micros > opCap.Micros {
		over, _ := est.Sub(opCap)
		return money.Amount{}, fmt.Sprintf("budget %d covers calls estimated at up to %s and this one is estimated at %s, %s over", b.ID, opCap.Display(), est.Display(), over.Display())
	}
	used := BudgetCommitted(u.Reservations, cur, from, to)
	period := periodText(b, to)
	if len(used.Uncounted) > 0 {
		return money.Amount{}, fmt.Sprintf("budget %d has spend committed%s that cannot be added up in %s (reservations %v)", b.ID, period, cur, used.Uncounted)
	}
	if left := b.MaxRemoteJobs - used.RemoteJobs; jobs > left {
		return money.Amount{}, fmt.Sprintf("budget %d has %d of %d remote job(s) left%s and this call would start %d, %d short", b.ID, max(left, 0), b.MaxRemoteJobs, period, jobs, jobs-max(left, 0))
	}
	room, err := b.MaxTotalCost.Sub(used.Spend)
	if err != nil {
		return money.Amount{}, fmt.Sprintf("budget %d's spend cannot be compared with its ceiling: %v", b.ID, err)
	}
	if est.Micros > room.Micros {
		shown := room
		if shown.Micros < 0 {
			shown = money.Zero(cur)
		}
		short, _ := est.Sub(shown)
		return money.Amount{}, fmt.Sprintf("budget %d has %s of %s left%s and this call is estimated at %s, %s short", b.ID, shown.Display(), b.MaxTotalCost.Display(), period, est.Display(), short.Display())
	}
	if opCap := b.PerOperationCap; !opCap.IsZero() && opCap.Micros < room.Micros {
		room = opCap
	}
	return room, ""
}

// periodText names the period a shortfall is in, for its message.
func periodText(b *ledger.Budget, to time.Time) string {
	if to.IsZero() {
		return ""
	}
	return fmt.Sprintf(" this %s (until %s)", b.Period, to.Format(time.RFC3339))
}

// BudgetBreach compares what budget b is committed to in the period of
// operation opRef's reservation — the held and settled reservations of its
// other operations in that period plus the operation's final cost — with
// its ceiling, as [CostBreach] does for an approval. It returns nil when
// the ceiling holds or the operation holds no reservation against b.
func BudgetBreach(b *ledger.Budget, rs []*ledger.BudgetReservation, opRef int64, final money.Amount, uncounted []string) (*Breach, error) {
	i := slices.IndexFunc(rs, func(r *ledger.BudgetReservation) bool { return r.OperationRef == opRef })
	if i < 0 {
		return nil, nil
	}
	from, to, err := BudgetWindow(b, rs[i].CreatedAt)
	if err != nil {
		return nil, err
	}
	var others []*ledger.BudgetReservation
	for _, r := range rs {
		if r.OperationRef != opRef {
			others = append(others, r)
		}
	}
	used := BudgetCommitted(others, b.MaxTotalCost.Currency, from, to)
	total, err := used.Spend.Add(final)
	switch {
	case err != nil || len(used.Uncounted) > 0 || len(uncounted) > 0:
		return &Breach{NotComparable: true, Final: final, Ceiling: b.MaxTotalCost,
			UncountedCharges: uncounted, UncountedReservations: used.Uncounted}, nil
	case total.Micros > b.MaxTotalCost.Micros:
		over, err := total.Sub(b.MaxTotalCost)
		if err != nil {
			return nil, err
		}
		return &Breach{Final: final, Total: total, Ceiling: b.MaxTotalCost, Over: over}, nil
	}
	return nil, nil
}

// Limits on what one budget may hold.
const (
	MaxBudgetTools    = 100
	MaxBudgetNoteRune = 1000
)

// CheckBudget says what is wrong with budget terms an approver gave, in a
// sentence that names the field; nil when they may be recorded.
func CheckBudget(b *ledger.Budget) error {
	switch {
	case b.Tenant == "":
		return errors.New("budget: a tenant is required")
	case b.CreatedBy == "":
		return errors.New("budget: the approver's credential is required")
	case b.MaxTotalCost.Micros <= 0:
		return fmt.Errorf("budget: max total cost must be above zero (got %s)", b.MaxTotalCost.Display())
	case b.MaxRemoteJobs < 1:
		return fmt.Errorf("budget: max remote jobs must be at least 1 (got %d)", b.MaxRemoteJobs)
	case !b.Period.Valid():
		return fmt.Errorf("budget: period must be none, day, week or month (got %q)", b.Period)
	case b.PerOperationCap.Micros < 0:
		return fmt.Errorf("budget: the per-operation cap cannot be negative (got %s)", b.PerOperationCap.Display())
	case !b.PerOperationCap.IsZero() && money.Zero(b.PerOperationCap.Currency).Currency != money.Zero(b.MaxTotalCost.Currency).Currency:
		return fmt.Errorf("budget: the per-operation cap is in %s and the ceiling in %s; give both in one currency", b.PerOperationCap.Currency, b.MaxTotalCost.Currency)
	case b.ExpiresAt.IsZero():
		return errors.New("budget: an expiry time is required")
	case len(b.Tools) > MaxBudgetTools:
		return fmt.Errorf("budget: at most %d tools may be named (got %d); name a prefix instead", MaxBudgetTools, len(b.Tools))
	case len([]rune(b.Note)) > MaxBudgetNoteRune:
		return fmt.Errorf("budget: the note may hold at most %d characters", MaxBudgetNoteRune)
	}
	for i, t := range b.Tools {
		if t == "" || !strings.Contains(t, ".") {
			return fmt.Errorf("budget: tool %d (%q) must be named with its upstream, as upstream.tool", i+1, t)
		}
	}
	if b.Period != ledger.BudgetPeriodNone {
		if b.TimeZone == "" {
			return errors.New("budget: a period needs a time zone (an IANA name such as UTC or Europe/Berlin)")
		}
		if _, _, err := BudgetWindow(b, b.ExpiresAt); err != nil {
			return err
		}
	}
	return nil
}
