package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

func TestBudgetWindow(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string, loc *time.Location) time.Time {
		v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name     string
		period   ledger.BudgetPeriod
		zone     string
		at       time.Time
		from, to time.Time
	}{
		{"no period: all time", ledger.BudgetPeriodNone, "", at("2026-05-04 10:00", time.UTC), time.Time{}, time.Time{}},
		{"day in UTC", ledger.BudgetPeriodDay, "UTC", at("2026-05-04 23:59", time.UTC), at("2026-05-04 00:00", time.UTC), at("2026-05-05 00:00", time.UTC)},
		// 23:30 UTC is already the next day in Berlin.
		{"day rolls over at midnight in its zone", ledger.BudgetPeriodDay, "Europe/Berlin", at("2026-05-04 23:30", time.UTC), at("2026-05-05 00:00", berlin), at("2026-05-06 00:00", berlin)},
		{"a day of 23 hours", ledger.BudgetPeriodDay, "Europe/Berlin", at("2026-03-29 12:00", berlin), at("2026-03-29 00:00", berlin), at("2026-03-30 00:00", berlin)},
		{"week from Monday", ledger.BudgetPeriodWeek, "UTC", at("2026-05-10 18:00", time.UTC), at("2026-05-04 00:00", time.UTC), at("2026-05-11 00:00", time.UTC)},
		{"week on its Monday", ledger.BudgetPeriodWeek, "UTC", at("2026-05-04 00:00", time.UTC), at("2026-05-04 00:00", time.UTC), at("2026-05-11 00:00", time.UTC)},
		{"month across a year", ledger.BudgetPeriodMonth, "Europe/Berlin", at("2026-12-31 22:00", berlin), at("2026-12-01 00:00", berlin), at("2027-01-01 00:00", berlin)},
	}
	for _, tt := range tests {
		from, to, err := BudgetWindow(&ledger.Budget{Period: tt.period, TimeZone: tt.zone}, tt.at)
		if err != nil || !from.Equal(tt.from) || !to.Equal(tt.to) {
			t.Errorf("%s: window = [%v, %v), %v; want [%v, %v)", tt.name, from, to, err, tt.from, tt.to)
		}
	}
	if _, _, err := BudgetWindow(&ledger.Budget{ID: 4, Period: ledger.BudgetPeriodDay, TimeZone: "Mars/Olympus"}, time.Now()); err == nil || !strings.Contains(err.Error(), "Mars/Olympus") {
		t.Errorf("unknown zone: %v, want an error naming it", err)
	}
}

func TestBudgetMatches(t *testing.T) {
	call := BudgetCall{Tenant: "acme", Tool: "hosted_test.run_suite", RunID: "pr-81"}
	tests := []struct {
		name string
		b    ledger.Budget
		want bool
	}{
		{"every tool of the tenant", ledger.Budget{Tenant: "acme"}, true},
		{"another tenant", ledger.Budget{Tenant: "globex"}, false},
		{"the tool by name", ledger.Budget{Tenant: "acme", Tools: []string{"data.buy", "hosted_test.run_suite"}}, true},
		{"other tools by name", ledger.Budget{Tenant: "acme", Tools: []string{"data.buy"}}, false},
		{"the tool by prefix", ledger.Budget{Tenant: "acme", ToolPrefix: "hosted_test."}, true},
		{"another prefix", ledger.Budget{Tenant: "acme", ToolPrefix: "data."}, false},
		{"its run", ledger.Budget{Tenant: "acme", RunID: "pr-81"}, true},
		{"another run", ledger.Budget{Tenant: "acme", RunID: "pr-82"}, false},
	}
	for _, tt := range tests {
		if got := BudgetMatches(&tt.b, call); got != tt.want {
			t.Errorf("%s: BudgetMatches = %v, want %v", tt.name, got, tt.want)
		}
	}
	if BudgetMatches(&ledger.Budget{Tenant: "acme", RunID: "pr-81"}, BudgetCall{Tenant: "acme", Tool: "x.y"}) {
		t.Error("a run budget matched a call without a run")
	}
}

func TestCoverByBudgets(t *testing.T) {
	now := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	usd := func(s string) money.Amount { return money.MustParse(s, "USD") }
	budget := func(id int64, mut func(b *ledger.Budget)) *ledger.Budget {
		b := &ledger.Budget{ID: id, Tenant: "acme", MaxTotalCost: usd("100.00"), MaxRemoteJobs: 10,
			Period: ledger.BudgetPeriodDay, TimeZone: "UTC", ExpiresAt: now.Add(24 * time.Hour)}
		if mut != nil {
			mut(b)
		}
		return b
	}
	held := func(amount string, jobs int, at time.Time) *ledger.BudgetReservation {
		return &ledger.BudgetReservation{ID: 1, Amount: usd(amount), RemoteJobs: jobs, Status: ledger.ReservationHeld, CreatedAt: at}
	}
	settled := func(amount string, at time.Time) *ledger.BudgetReservation {
		return &ledger.BudgetReservation{ID: 2, Amount: usd("18.00"), Settled: usd(amount), RemoteJobs: 1, Status: ledger.ReservationSettled, CreatedAt: at}
	}
	call := func(estimate string, jobs int) BudgetCall {
		return BudgetCall{Tenant: "acme", Tool: "hosted_test.run_suite", Route: Route{Estimate: usd(estimate), RemoteJobs: jobs}}
	}
	tests := []struct {
		name    string
		uses    []BudgetUse
		call    BudgetCall
		covered []int64 // the budgets reserved against; nil: not covered
		ceiling string
		short   int64
		says    string
	}{
		{"no budget", nil, call("18.00", 1), nil, "", 0, "no open budget covers hosted_test.run_suite"},
		{"room left", []BudgetUse{{budget(1, nil), []*ledger.BudgetReservation{held("72.00", 4, now)}}}, call("18.00", 1), []int64{1}, "28.00", 0, ""},
		{"exactly the ceiling", []BudgetUse{{budget(1, nil), []*ledger.BudgetReservation{held("82.00", 4, now)}}}, call("18.00", 1), []int64{1}, "18.00", 0, ""},
		{"short by 8.00", []BudgetUse{{budget(1, nil), []*ledger.BudgetReservation{held("90.00", 5, now)}}}, call("18.00", 1), nil, "", 1,
			"budget 1 has 10.00 USD of 100.00 USD left this day (until 2026-05-05T00:00:00Z) and this call is estimated at 18.00 USD, 8.00 USD short"},
		{"settled spend counts its final cost", []BudgetUse{{budget(1, nil), []*ledger.BudgetReservation{settled("85.00", now)}}}, call("18.00", 1), nil, "", 1, "3.00 USD short"},
		{"released spend counts nothing", []BudgetUse{{budget(1, nil), []*ledger.BudgetReservation{{Amount: usd("90.00"), RemoteJobs: 1, Status: ledger.ReservationReleased, CreatedAt: now}}}}, call("18.00", 1), []int64{1}, "100.00", 0, ""},
		{"yesterday's spend is another period", []BudgetUse{{budget(1, nil), []*ledger.BudgetReservation{held("90.00", 5, now.Add(-11*time.Hour))}}}, call("18.00", 1), []int64{1}, "100.00", 0, ""},
		{"a fan-out beyond the jobs left", []BudgetUse{{budget(1, func(b *ledger.Budget) { b.MaxRemoteJobs = 3 }), nil}}, call("8.00", 4), nil, "", 1,
			"budget 1 has 3 of 3 remote job(s) left this day (until 2026-05-05T00:00:00Z) and this call would start 4, 1 short"},
		{"a fan-out within the jobs", []BudgetUse{{budget(1, func(b *ledger.Budget) { b.MaxRemoteJobs = 4 }), nil}}, call("8.00", 4), []int64{1}, "100.00", 0, ""},
		{"above the per-operation cap", []BudgetUse{{budget(1, func(b *ledger.Budget) { b.PerOperationCap = usd("15.00") }), nil}}, call("18.00", 1), nil, "", 1,
			"budget 1 covers calls estimated at up to 15.00 USD and this one is estimated at 18.00 USD, 3.00 USD over"},
		{"the cap bounds the ceiling", []BudgetUse{{budget(1, func(b *ledger.Budget) { b.PerOperationCap = usd("20.00") }), nil}}, call("18.00", 1), []int64{1}, "20.00", 0, ""},
		{"every matching budget must have room", []BudgetUse{
			{budget(1, nil), nil},
			{budget(2, func(b *ledger.Budget) { b.ToolPrefix = "hosted_test."; b.MaxTotalCost = usd("10.00") }), nil},
		}, call("18.00", 1), nil, "", 2, "budget 2 has 10.00 USD of 10.00 USD left"},
		{"the least room is the ceiling", []BudgetUse{
			{budget(1, nil), nil},
			{budget(2, func(b *ledger.Budget) { b.ToolPrefix = "hosted_test."; b.MaxTotalCost = usd("30.00") }), nil},
		}, call("18.00", 1), []int64{1, 2}, "30.00", 0, ""},
		{"budgets of other scopes do not count", []BudgetUse{
			{budget(1, nil), nil},
			{budget(2, func(b *ledger.Budget) { b.ToolPrefix = "data."; b.MaxTotalCost = usd("1.00") }), nil},
			{budget(3, func(b *ledger.Budget) { b.RunID = "nightly"; b.MaxTotalCost = usd("1.00") }), nil},
		}, call("18.00", 1), []int64{1}, "100.00", 0, ""},
		{"a closed budget covers nothing", []BudgetUse{{budget(1, func(b *ledger.Budget) { b.ClosedAt = now.Add(-time.Minute) }), nil}}, call("18.00", 1), nil, "", 0, "no open budget"},
		{"an expired budget covers nothing", []BudgetUse{{budget(1, func(b *ledger.Budget) { b.ExpiresAt = now }), nil}}, call("18.00", 1), nil, "", 0, "no open budget"},
		{"another currency", []BudgetUse{{budget(1, func(b *ledger.Budget) { b.MaxTotalCost = money.MustParse("100.00", "EUR") }), nil}}, call("18.00", 1), nil, "", 1, "budget 1 counts EUR and this call is estimated at 18.00 USD"},
		{"spend that cannot be added up", []BudgetUse{{budget(1, nil), []*ledger.BudgetReservation{{ID: 9, Amount: money.MustParse("1.00", "EUR"), RemoteJobs: 1, Status: ledger.ReservationHeld, CreatedAt: now}}}}, call("18.00", 1), nil, "", 1, "cannot be added up"},
	}
	for _, tt := range tests {
		c := CoverByBudgets(tt.uses, tt.call, now)
		var ids []int64
		for _, b := range c.Budgets {
			ids = append(ids, b.ID)
		}
		switch {
		case tt.covered != nil && (!c.Covered || !equalIDs(ids, tt.covered) || c.Ceiling.String() != tt.ceiling || c.Shortfall != ""):
			t.Errorf("%s: %+v (budgets %v), want covered by %v with ceiling %s", tt.name, c, ids, tt.covered, tt.ceiling)
		case tt.covered == nil && (c.Covered || c.Short != tt.short || !strings.Contains(c.Shortfall, tt.says)):
			t.Errorf("%s: %+v, want not covered, short %d, saying %q", tt.name, c, tt.short, tt.says)
		}
	}
}

func equalIDs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestBudgetBreach(t *testing.T) {
	now := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	usd := func(s string) money.Amount { return money.MustParse(s, "USD") }
	b := &ledger.Budget{ID: 1, Tenant: "acme", MaxTotalCost: usd("100.00"), MaxRemoteJobs: 10, Period: ledger.BudgetPeriodDay, TimeZone: "UTC"}
	rs := []*ledger.BudgetReservation{
		{ID: 1, OperationRef: 10, Amount: usd("18.00"), Settled: usd("17.00"), RemoteJobs: 1, Status: ledger.ReservationSettled, CreatedAt: now},
		{ID: 2, OperationRef: 11, Amount: usd("70.00"), RemoteJobs: 1, Status: ledger.ReservationHeld, CreatedAt: now},
		{ID: 3, OperationRef: 12, Amount: usd("18.00"), RemoteJobs: 1, Status: ledger.ReservationHeld, CreatedAt: now},
		{ID: 4, OperationRef: 13, Amount: usd("90.00"), RemoteJobs: 1, Status: ledger.ReservationHeld, CreatedAt: now.Add(-24 * time.Hour)},
	}
	tests := []struct {
		name  string
		op    int64
		final string
		over  string // "": no breach
	}{
		{"within the ceiling", 12, "13.00", ""},
		{"exactly the ceiling", 12, "13.00", ""},
		{"over the ceiling", 12, "20.00", "7.00"},
		{"yesterday's operation counts yesterday", 13, "99.00", ""},
		{"no reservation against the budget", 99, "500.00", ""},
	}
	for _, tt := range tests {
		br, err := BudgetBreach(b, rs, tt.op, usd(tt.final), nil)
		switch {
		case err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.over == "" && br != nil:
			t.Errorf("%s: breach %+v, want none", tt.name, br)
		case tt.over != "" && (br == nil || br.Over.String() != tt.over):
			t.Errorf("%s: breach %+v, want over by %s", tt.name, br, tt.over)
		}
	}
	if br, err := BudgetBreach(b, rs, 12, usd("1.00"), []string{"ch-eur"}); err != nil || br == nil || !br.NotComparable {
		t.Errorf("uncounted charges: %+v, %v; want a breach that cannot be compared", br, err)
	}
}
