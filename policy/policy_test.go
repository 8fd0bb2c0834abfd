package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

func TestAdmit(t *testing.T) {
	now := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	usd := func(s string) money.Amount { return money.MustParse(s, "USD") }
	approval := func(mut func(a *ledger.Approval)) *ledger.Approval {
		a := &ledger.Approval{ID: 7, OperationID: "op", Tool: "hosted_test.run_suite", MaxTotalCost: usd("20.00"), MaxRemoteJobs: 1, ExpiresAt: now.Add(time.Hour)}
		if mut != nil {
			mut(a)
		}
		return a
	}
	tests := []struct {
		name     string
		a        *ledger.Approval
		tool     string
		used     Usage
		estimate string
		retry    bool
		reason   string
	}{
		{"within the ceiling", approval(nil), "hosted_test.run_suite", Usage{Spend: usd("0")}, "18.00", false, ""},
		{"exactly the ceiling", approval(nil), "hosted_test.run_suite", Usage{Spend: usd("2.00")}, "18.00", false, ""},
		{"no approval", nil, "hosted_test.run_suite", Usage{}, "18.00", false, ledger.ReasonApprovalRequired},
		{"expired", approval(func(a *ledger.Approval) { a.ExpiresAt = now }), "hosted_test.run_suite", Usage{}, "1.00", false, ledger.ReasonApprovalExpired},
		{"revoked", approval(func(a *ledger.Approval) { a.RevokedAt = now.Add(-time.Minute) }), "hosted_test.run_suite", Usage{}, "1.00", false, ledger.ReasonApprovalExpired},
		{"another tool", approval(nil), "hosted_test.other", Usage{}, "1.00", false, ledger.ReasonApprovalToolMismatch},
		{"job limit", approval(nil), "hosted_test.run_suite", Usage{Spend: usd("0"), RemoteJobs: 1}, "0.00", false, ledger.ReasonRemoteJobLimitReached},
		{"job limit on a retry under a new ID", approval(nil), "hosted_test.run_suite", Usage{Spend: usd("0"), RemoteJobs: 1}, "0.00", true, ledger.ReasonRetryUsesNewOperation},
		{"two cheap requests over the ceiling", approval(func(a *ledger.Approval) { a.MaxRemoteJobs = 2 }), "hosted_test.run_suite", Usage{Spend: usd("12.00"), RemoteJobs: 1}, "12.00", false, ledger.ReasonCostCeilingExceeded},
		{"another currency", approval(nil), "hosted_test.run_suite", Usage{Spend: usd("0")}, "", false, ledger.ReasonCostCeilingExceeded},
	}
	for _, tt := range tests {
		est := usd("0")
		if tt.estimate != "" {
			est = usd(tt.estimate)
		} else {
			est = money.MustParse("1.00", "EUR")
		}
		v := Admit(tt.a, tt.tool, tt.used, Route{Estimate: est}, tt.retry, now)
		if v.Reason != tt.reason || v.Allowed != (tt.reason == "") {
			t.Errorf("%s: Admit = %+v, want reason %q", tt.name, v, tt.reason)
		}
		if !v.Allowed && v.Message == "" {
			t.Errorf("%s: a denial without a message", tt.name)
		}
	}
}

// A call that fans out is admitted as a whole: all its remote jobs against
// the job limit and its total estimate against the ceiling, or nothing.
func TestAdmitRoute(t *testing.T) {
	now := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	usd := func(s string) money.Amount { return money.MustParse(s, "USD") }
	approval := func(ceiling string, jobs int) *ledger.Approval {
		return &ledger.Approval{ID: 3, OperationID: "matrix", Tool: "hosted_test.run_matrix", MaxTotalCost: usd(ceiling), MaxRemoteJobs: jobs, ExpiresAt: now.Add(time.Hour)}
	}
	tests := []struct {
		name     string
		a        *ledger.Approval
		used     Usage
		jobs     int
		estimate string
		reason   string
		message  string // a part of the denial's message
	}{
		{"4 jobs approved for 4", approval("72.00", 4), Usage{Spend: usd("0")}, 4, "72.00", "", ""},
		{"4 jobs approved for 5", approval("100.00", 5), Usage{Spend: usd("0")}, 4, "72.00", "", ""},
		{"no job count is one", approval("18.00", 1), Usage{Spend: usd("0")}, 0, "18.00", "", ""},
		{"6 jobs approved for 4", approval("200.00", 4), Usage{Spend: usd("0")}, 6, "108.00", ledger.ReasonRemoteJobLimitReached, "this call would start 6 remote jobs and approval 3 allows 4"},
		{"3 jobs with 2 of 4 used", approval("200.00", 4), Usage{Spend: usd("36.00"), RemoteJobs: 2}, 3, "54.00", ledger.ReasonRemoteJobLimitReached, "this call would start 3 remote jobs, approval 3 allows 4 and 2 are already started or reserved"},
		{"2 jobs with 2 of 4 used", approval("200.00", 4), Usage{Spend: usd("36.00"), RemoteJobs: 2}, 2, "36.00", "", ""},
		{"the total over the ceiling", approval("70.00", 4), Usage{Spend: usd("0")}, 4, "72.00", ledger.ReasonCostCeilingExceeded, "this call would start 4 remote jobs estimated at 72.00 USD in all, which with 0.00 USD already committed exceeds the approved ceiling of 70.00 USD"},
		{"the total over what is left", approval("100.00", 8), Usage{Spend: usd("36.00"), RemoteJobs: 2}, 4, "72.00", ledger.ReasonCostCeilingExceeded, "with 36.00 USD already committed"},
		{"one job over the ceiling", approval("17.00", 1), Usage{Spend: usd("0")}, 1, "18.00", ledger.ReasonCostCeilingExceeded, "estimated 18.00 USD plus 0.00 USD already committed"},
		{"the job limit is checked first", approval("1.00", 4), Usage{Spend: usd("0")}, 5, "90.00", ledger.ReasonRemoteJobLimitReached, "would start 5 remote jobs"},
	}
	for _, tt := range tests {
		v := Admit(tt.a, "hosted_test.run_matrix", tt.used, Route{RemoteJobs: tt.jobs, Estimate: usd(tt.estimate)}, false, now)
		if v.Reason != tt.reason || v.Allowed != (tt.reason == "") {
			t.Errorf("%s: Admit = %+v, want reason %q", tt.name, v, tt.reason)
		}
		if !strings.Contains(v.Message, tt.message) {
			t.Errorf("%s: message %q, want it to say %q", tt.name, v.Message, tt.message)
		}
	}
}

func TestCommitted(t *testing.T) {
	rs := []*ledger.Reservation{
		{Status: ledger.ReservationHeld, Amount: money.MustParse("18.00", "USD"), RemoteJobs: 1},
		{Status: ledger.ReservationSettled, Amount: money.MustParse("18.00", "USD"), Settled: money.MustParse("23.10", "USD"), RemoteJobs: 1},
		{Status: ledger.ReservationReleased, Amount: money.MustParse("18.00", "USD"), RemoteJobs: 1},
	}
	u := Committed(rs, "USD")
	if u.Spend.String() != "41.10" || u.RemoteJobs != 2 {
		t.Fatalf("Committed = %s, %d jobs; want 41.10 and 2", u.Spend, u.RemoteJobs)
	}
}

func TestCommittedNeverAddsAnotherCurrency(t *testing.T) {
	rs := []*ledger.Reservation{
		{ID: 1, Status: ledger.ReservationHeld, Amount: money.MustParse("18.00", "USD"), RemoteJobs: 1},
		{ID: 2, Status: ledger.ReservationHeld, Amount: money.MustParse("5.00", "EUR"), RemoteJobs: 1},
		{ID: 3, Status: ledger.ReservationSettled, Amount: money.MustParse("18.00", "EUR"), Settled: money.MustParse("7.00", "EUR"), RemoteJobs: 1},
	}
	u := Committed(rs, "USD")
	if u.Spend.Display() != "18.00 USD" || u.RemoteJobs != 3 {
		t.Errorf("Committed = %s, %d jobs; want 18.00 USD and 3", u.Spend.Display(), u.RemoteJobs)
	}
	if len(u.Uncounted) != 2 || u.Uncounted[0] != 2 || u.Uncounted[1] != 3 {
		t.Errorf("Uncounted = %v, want [2 3]", u.Uncounted)
	}
	a := &ledger.Approval{ID: 7, OperationID: "op", Tool: "t", MaxTotalCost: money.MustParse("100.00", "USD"), MaxRemoteJobs: 5, ExpiresAt: time.Now().Add(time.Hour)}
	if v := Admit(a, "t", u, Route{Estimate: money.MustParse("1.00", "USD")}, false, time.Now()); v.Allowed || v.Reason != ledger.ReasonCostCeilingExceeded {
		t.Errorf("Admit with uncounted spend = %+v, want a denial with %q", v, ledger.ReasonCostCeilingExceeded)
	}
}

func TestStrictestRetry(t *testing.T) {
	tests := []struct {
		in   []ledger.RetryPolicy
		want ledger.RetryPolicy
	}{
		{[]ledger.RetryPolicy{"lookup_then_attach", "lookup_then_attach", "lookup_then_attach"}, "lookup_then_attach"},
		{[]ledger.RetryPolicy{"lookup_then_attach", "no_automatic_resend", "lookup_then_attach"}, "no_automatic_resend"},
		{[]ledger.RetryPolicy{"no_automatic_resend", "", "lookup_then_attach"}, "no_automatic_resend"},
		{[]ledger.RetryPolicy{"", "", "lookup_then_attach"}, "lookup_then_attach"},
		{[]ledger.RetryPolicy{"lookup_then_attach", "resend_always"}, "no_automatic_resend"},
		{[]ledger.RetryPolicy{"", ""}, "no_automatic_resend"},
	}
	for _, tt := range tests {
		if got := StrictestRetry(tt.in...); got != tt.want {
			t.Errorf("StrictestRetry(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestCostBreach(t *testing.T) {
	usd := func(s string) money.Amount { return money.MustParse(s, "USD") }
	a := &ledger.Approval{ID: 7, MaxTotalCost: usd("20.00"), MaxRemoteJobs: 2}
	// Operation 42's own reservation is replaced by its final cost; the
	// other operation's counts as it stands.
	own := &ledger.Reservation{ID: 1, OperationRef: 42, Status: ledger.ReservationSettled, Settled: usd("19.00"), RemoteJobs: 1}
	tests := []struct {
		name          string
		others        []*ledger.Reservation
		final         money.Amount
		uncounted     []string
		breach        bool
		notComparable bool
		total, over   string
	}{
		{name: "under the ceiling", final: usd("17.84")},
		{name: "exactly the ceiling", final: usd("20.00")},
		{name: "over the ceiling alone", final: usd("23.10"), breach: true, total: "23.10", over: "3.10"},
		{
			name:   "over with what another operation holds",
			others: []*ledger.Reservation{{ID: 2, OperationRef: 43, Status: ledger.ReservationHeld, Amount: usd("5.00"), RemoteJobs: 1}},
			final:  usd("17.84"), breach: true, total: "22.84", over: "2.84",
		},
		{
			name:   "a released reservation commits nothing",
			others: []*ledger.Reservation{{ID: 2, OperationRef: 43, Status: ledger.ReservationReleased, Amount: usd("5.00"), RemoteJobs: 1}},
			final:  usd("17.84"),
		},
		{name: "an uncounted final charge", final: usd("1.00"), uncounted: []string{"ch-eur"}, breach: true, notComparable: true},
		{
			name:   "a reservation in another currency",
			others: []*ledger.Reservation{{ID: 2, OperationRef: 43, Status: ledger.ReservationHeld, Amount: money.MustParse("5.00", "EUR"), RemoteJobs: 1}},
			final:  usd("1.00"), breach: true, notComparable: true,
		},
		{name: "a final cost in another currency", final: money.MustParse("1.00", "EUR"), breach: true, notComparable: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := CostBreach(a, append([]*ledger.Reservation{own}, tt.others...), 42, tt.final, tt.uncounted)
			if err != nil {
				t.Fatal(err)
			}
			if (b != nil) != tt.breach {
				t.Fatalf("CostBreach = %+v, want breach %v", b, tt.breach)
			}
			if b == nil {
				return
			}
			if b.NotComparable != tt.notComparable || b.Ceiling != a.MaxTotalCost || b.Final != tt.final {
				t.Errorf("CostBreach = %+v, want not comparable %v, ceiling 20.00, final %s", b, tt.notComparable, tt.final)
			}
			if !tt.notComparable && (b.Total.String() != tt.total || b.Over.String() != tt.over) {
				t.Errorf("total, over = %s, %s, want %s, %s", b.Total, b.Over, tt.total, tt.over)
			}
		})
	}
}
