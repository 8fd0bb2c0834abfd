package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

// budget is a day budget of tenant acme in UTC for every tool, 100.00 USD
// and ten remote jobs, that mut may change.
func budget(mut func(b *ledger.Budget)) *ledger.Budget {
	b := &ledger.Budget{Tenant: "acme", MaxTotalCost: money.MustParse("100.00", "USD"), MaxRemoteJobs: 10,
		Period: ledger.BudgetPeriodDay, TimeZone: "UTC", ExpiresAt: time.Now().Add(72 * time.Hour), CreatedBy: "api_key:1", Note: "CI suites"}
	if mut != nil {
		mut(b)
	}
	return b
}

// budgetCall is an approval:required call of tenant acme with its own
// arguments, priced at estimate over jobs remote jobs, that no approval
// covers.
func budgetCall(t *testing.T, key, estimate string, jobs int) *ledger.AcceptParams {
	p := params(t, call{"acme", key, fmt.Sprintf(`{"key":%q,"runners":%d}`, key, jobs)})
	p.Approval = ledger.ApprovalRequirement{Required: true, Estimate: money.MustParse(estimate, "USD"), RemoteJobs: jobs}
	return p
}

func createBudget(t *testing.T, s ledger.Store, b *ledger.Budget) *ledger.Budget {
	t.Helper()
	out, err := s.BudgetCreate(context.Background(), b)
	if err != nil {
		t.Fatalf("BudgetCreate: %v", err)
	}
	return out
}

func budgetReservations(t *testing.T, s ledger.Store, id int64) []*ledger.BudgetReservation {
	t.Helper()
	rs, err := s.BudgetReservationList(context.Background(), &ledger.BudgetReservationListParams{BudgetRef: id})
	if err != nil {
		t.Fatalf("BudgetReservationList: %v", err)
	}
	return rs
}

// uncovered checks that res is the refusal of a call no budget covers,
// naming the short budget.
func uncovered(t *testing.T, what string, res *ledger.AcceptResult, says string) {
	t.Helper()
	if res.Decision != ledger.DecisionDenied || res.Reason != ledger.ReasonApprovalRequired || !strings.Contains(res.Message, says) {
		t.Fatalf("%s: %s (%s: %s), want denied with %s, saying %q", what, res.Decision, res.Reason, res.Message, ledger.ReasonApprovalRequired, says)
	}
}

func testBudgets(t *testing.T, newStore Factory) {
	ctx := context.Background()

	t.Run("64 concurrent calls of 18.00 against 100.00 admit exactly 5", func(t *testing.T) {
		s := newStore(t)
		b := createBudget(t, s, budget(func(b *ledger.Budget) { b.MaxRemoteJobs = 100 }))
		const n = 64
		results := make([]*ledger.AcceptResult, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { results[i] = accept(t, s, budgetCall(t, fmt.Sprintf("ci-%d", i), "18.00", 1)) })
		}
		wg.Wait()
		created := 0
		for _, res := range results {
			switch {
			case res.Decision == ledger.DecisionCreated:
				created++
				if res.Operation.ApprovalID == 0 || res.Operation.State != ledger.StateAccepted {
					t.Errorf("covered operation %+v: want accepted under an approval of its own", res.Operation)
				}
			default:
				uncovered(t, "a call beyond the budget", res, fmt.Sprintf("budget %d has 10.00 USD of 100.00 USD left", b.ID))
			}
		}
		rs := budgetReservations(t, s, b.ID)
		if created != 5 || len(rs) != 5 || probeJobs(t, s) != 5 {
			t.Fatalf("created %d, %d budget reservations, %d dispatch jobs; want 5 of each", created, len(rs), probeJobs(t, s))
		}
	})

	t.Run("a fan-out beyond the budget's remote jobs is not covered", func(t *testing.T) {
		s := newStore(t)
		b := createBudget(t, s, budget(func(b *ledger.Budget) { b.MaxRemoteJobs = 3 }))
		uncovered(t, "4 runners against 3 jobs", accept(t, s, budgetCall(t, "matrix-1", "40.00", 4)),
			fmt.Sprintf("budget %d has 3 of 3 remote job(s) left", b.ID))
		if rs := budgetReservations(t, s, b.ID); len(rs) != 0 {
			t.Fatalf("reservations after an uncovered fan-out: %d, want none", len(rs))
		}
		res := accept(t, s, budgetCall(t, "matrix-2", "30.00", 3))
		if res.Decision != ledger.DecisionCreated || res.Operation.IntendedRemoteJobs != 3 {
			t.Fatalf("3 runners against 3 jobs: %s (%s), want created intending 3", res.Decision, res.Message)
		}
		if rs := budgetReservations(t, s, b.ID); len(rs) != 1 || rs[0].RemoteJobs != 3 || rs[0].Amount.String() != "30.00" {
			t.Fatalf("reservations = %+v, want one of 3 jobs and 30.00", rs)
		}
	})

	t.Run("a run budget covers only its run", func(t *testing.T) {
		s := newStore(t)
		b := createBudget(t, s, budget(func(b *ledger.Budget) { b.RunID = "pr-81" }))
		in := budgetCall(t, "in-run", "18.00", 1)
		in.RunID = "pr-81"
		if res := accept(t, s, in); res.Decision != ledger.DecisionCreated {
			t.Fatalf("a call of the run: %s (%s), want created", res.Decision, res.Message)
		}
		other := budgetCall(t, "other-run", "18.00", 1)
		other.RunID = "pr-82"
		uncovered(t, "a call of another run", accept(t, s, other), "no open budget covers hosted_test.run_suite")
		uncovered(t, "a call of no run", accept(t, s, budgetCall(t, "no-run", "18.00", 1)), "no open budget")
		if rs := budgetReservations(t, s, b.ID); len(rs) != 1 {
			t.Fatalf("reservations = %d, want 1", len(rs))
		}
	})

	t.Run("closing stops new admissions and keeps the reservations", func(t *testing.T) {
		s := newStore(t)
		b := createBudget(t, s, budget(nil))
		if res := accept(t, s, budgetCall(t, "before", "18.00", 1)); res.Decision != ledger.DecisionCreated {
			t.Fatalf("before closing: %s (%s), want created", res.Decision, res.Message)
		}
		closed, err := s.BudgetClose(ctx, "acme", b.ID, "api_key:2", time.Time{})
		if err != nil || closed.ClosedAt.IsZero() || closed.ClosedBy != "api_key:2" {
			t.Fatalf("BudgetClose = %+v, %v; want closed by api_key:2", closed, err)
		}
		if _, err := s.BudgetClose(ctx, "globex", b.ID, "api_key:9", time.Time{}); err == nil {
			t.Fatal("another tenant closed the budget")
		}
		uncovered(t, "after closing", accept(t, s, budgetCall(t, "after", "18.00", 1)), "no open budget")
		rs := budgetReservations(t, s, b.ID)
		if len(rs) != 1 || rs[0].Status != ledger.ReservationHeld {
			t.Fatalf("reservations after closing = %+v, want the one held", rs)
		}
		events, err := s.BudgetEventList(ctx, b.ID)
		if err != nil || len(events) != 2 || events[0].Kind != ledger.BudgetCreated || events[0].By != "api_key:1" ||
			events[1].Kind != ledger.BudgetClosed || events[1].By != "api_key:2" {
			t.Fatalf("events = %+v, %v; want created by api_key:1, closed by api_key:2", events, err)
		}
		if open, err := s.BudgetList(ctx, &ledger.BudgetListParams{Tenant: "acme"}); err != nil || len(open) != 0 {
			t.Fatalf("open budgets = %d, %v; want none", len(open), err)
		}
		if all, err := s.BudgetList(ctx, &ledger.BudgetListParams{Tenant: "acme", IncludeClosed: true}); err != nil || len(all) != 1 {
			t.Fatalf("all budgets = %d, %v; want 1", len(all), err)
		}
	})

	t.Run("a day's period rolls over at midnight in its zone", func(t *testing.T) {
		s := newStore(t)
		berlin, err := time.LoadLocation("Europe/Berlin")
		if err != nil {
			t.Fatal(err)
		}
		evening := time.Date(2026, 5, 4, 23, 30, 0, 0, berlin)
		createBudget(t, s, budget(func(b *ledger.Budget) {
			b.TimeZone, b.MaxTotalCost, b.ExpiresAt = "Europe/Berlin", money.MustParse("36.00", "USD"), evening.Add(72*time.Hour)
		}))
		at := func(key string, now time.Time) *ledger.AcceptParams {
			p := budgetCall(t, key, "18.00", 1)
			p.Now = now
			return p
		}
		for i := range 2 {
			if res := accept(t, s, at(fmt.Sprintf("evening-%d", i), evening)); res.Decision != ledger.DecisionCreated {
				t.Fatalf("evening call %d: %s (%s), want created", i, res.Decision, res.Message)
			}
		}
		uncovered(t, "a third call before midnight", accept(t, s, at("evening-2", evening.Add(29*time.Minute))),
			"until 2026-05-05T00:00:00+02:00")
		// 22:10 UTC is ten past midnight in Berlin: a new day.
		if res := accept(t, s, at("morning", time.Date(2026, 5, 4, 22, 10, 0, 0, time.UTC))); res.Decision != ledger.DecisionCreated {
			t.Fatalf("after midnight in Berlin: %s (%s), want created", res.Decision, res.Message)
		}
	})

	t.Run("budgets: false wants a person for every call", func(t *testing.T) {
		s := newStore(t)
		createBudget(t, s, budget(nil))
		p := budgetCall(t, "person", "18.00", 1)
		p.Approval.NoBudgets = true
		res := accept(t, s, p)
		if res.Decision != ledger.DecisionDenied || res.Reason != ledger.ReasonApprovalRequired || strings.Contains(res.Message, "budget") {
			t.Fatalf("budgets: false: %s (%s: %s), want denied as without budgets", res.Decision, res.Reason, res.Message)
		}
	})

	t.Run("an uncovered call waits for an approver, naming the short budget", func(t *testing.T) {
		s := newStore(t)
		b := createBudget(t, s, budget(func(b *ledger.Budget) { b.PerOperationCap = money.MustParse("10.00", "USD") }))
		res := accept(t, s, waits(budgetCall(t, "big", "18.00", 1), ledger.RequestWait))
		if res.Decision != ledger.DecisionCreated || res.Request == nil || res.Operation.State != ledger.StateAwaitingApproval ||
			!strings.Contains(res.Message, fmt.Sprintf("budget %d covers calls estimated at up to 10.00 USD", b.ID)) {
			t.Fatalf("over the cap: %s, request %v, message %q; want awaiting approval naming the cap", res.Decision, res.Request, res.Message)
		}
		// The waiting task's status message, which the client sees, says it too.
		if op, err := s.OperationGet(ctx, &ledger.OperationGetParams{ID: res.Operation.ID}); err != nil || !strings.Contains(op.StatusMessage, "covers calls estimated at up to 10.00 USD") ||
			!strings.Contains(op.StatusMessage, fmt.Sprintf("approval request %d", res.Request.ID)) {
			t.Fatalf("waiting operation = %+v, %v; want its status message to name the budget and the request", op, err)
		}
		if rs := budgetReservations(t, s, b.ID); len(rs) != 0 {
			t.Fatalf("a waiting call reserved against the budget: %+v", rs)
		}
	})

	t.Run("a final charge over the ceiling breaches the budget", func(t *testing.T) {
		s := newStore(t)
		b := createBudget(t, s, budget(func(b *ledger.Budget) { b.MaxTotalCost = money.MustParse("40.00", "USD") }))
		var ops []*ledger.Operation
		for i := range 2 {
			res := accept(t, s, budgetCall(t, fmt.Sprintf("suite-%d", i), "18.00", 1))
			if res.Decision != ledger.DecisionCreated {
				t.Fatalf("call %d: %s (%s), want created", i, res.Decision, res.Message)
			}
			ops = append(ops, res.Operation)
		}
		settle := func(op *ledger.Operation, final string) *ledger.Operation {
			out, err := s.Transition(ctx, &ledger.TransitionParams{OperationRef: op.ID,
				Reservation: &ledger.ReservationUpdate{Status: ledger.ReservationSettled, Settled: money.MustParse(final, "USD")}})
			if err != nil {
				t.Fatalf("settle operation %d: %v", op.ID, err)
			}
			return out
		}
		if out := settle(ops[0], "17.84"); out.CostBreach {
			t.Fatal("17.84 of 40.00 flagged a breach")
		}
		out := settle(ops[1], "25.00")
		if !out.CostBreach {
			t.Fatal("17.84 + 25.00 against 40.00: the operation is not flagged")
		}
		got, err := s.BudgetGet(ctx, "acme", b.ID)
		if err != nil || got.BreachedAt.IsZero() {
			t.Fatalf("budget after the breach = %+v, %v; want breached", got, err)
		}
		events, err := s.EventList(ctx, ops[1].ID)
		if err != nil {
			t.Fatal(err)
		}
		var data ledger.CostBoundaryBreachData
		for _, e := range events {
			if e.Kind == ledger.EventCostBoundaryBreach {
				if err := json.Unmarshal(e.Data, &data); err != nil {
					t.Fatal(err)
				}
			}
		}
		if data.Budget != b.ID || data.OverBy != "2.84" || data.BudgetTotal != "42.84" {
			t.Fatalf("breach event = %+v, want budget %d over by 2.84 at 42.84", data, b.ID)
		}
		bevents, err := s.BudgetEventList(ctx, b.ID)
		if err != nil || len(bevents) != 2 || bevents[1].Kind != ledger.BudgetBreached {
			t.Fatalf("budget events = %+v, %v; want created, breached", bevents, err)
		}
		settled := budgetReservations(t, s, b.ID)
		if len(settled) != 2 || settled[1].Status != ledger.ReservationSettled || settled[1].Settled.String() != "25.00" {
			t.Fatalf("budget reservations = %+v, want both settled", settled)
		}
		// A later pass settles the same final cost again: no second breach.
		if out := settle(ops[1], "25.00"); !out.CostBreach {
			t.Fatal("settling again cleared the operation's breach")
		}
		breaches := func() int {
			events, err := s.EventList(ctx, ops[1].ID)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, e := range events {
				if e.Kind == ledger.EventCostBoundaryBreach {
					n++
				}
			}
			return n
		}
		if n := breaches(); n != 1 {
			t.Fatalf("%d breach events after settling the same cost twice, want 1", n)
		}
		if bevents, err := s.BudgetEventList(ctx, b.ID); err != nil || len(bevents) != 2 {
			t.Fatalf("budget events after settling the same cost twice = %+v, %v; want created, breached", bevents, err)
		}
		// A late charge changes the final cost: the breach is recorded with it.
		settle(ops[1], "26.00")
		if n := breaches(); n != 2 {
			t.Fatalf("%d breach events after a late charge, want 2", n)
		}
	})

	t.Run("terms that cannot hold are refused", func(t *testing.T) {
		s := newStore(t)
		for _, mut := range []func(b *ledger.Budget){
			func(b *ledger.Budget) { b.MaxRemoteJobs = 0 },
			func(b *ledger.Budget) { b.TimeZone = "Mars/Olympus" },
			func(b *ledger.Budget) { b.CreatedBy = "" },
			func(b *ledger.Budget) { b.Period = "fortnight" },
		} {
			if _, err := s.BudgetCreate(ctx, budget(mut)); err == nil {
				t.Errorf("budget %+v recorded", budget(mut))
			}
		}
		if _, err := s.BudgetGet(ctx, "globex", createBudget(t, s, budget(nil)).ID); err == nil {
			t.Error("another tenant's budget was read")
		}
	})
}

// testReplicaBudget: 64 calls of 18.00 at once against a 100.00 budget,
// spread over replicas with pools of their own, admit exactly 5.
func testReplicaBudget(t *testing.T, replicas []ledger.Store) {
	b := createBudget(t, replicas[0], budget(func(b *ledger.Budget) { b.MaxRemoteJobs = 100 }))
	const n = 64
	results := make([]*ledger.AcceptResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			results[i] = accept(t, replicas[i%len(replicas)], budgetCall(t, fmt.Sprintf("ci-%d", i), "18.00", 1))
		})
	}
	wg.Wait()
	created := 0
	for _, res := range results {
		if res.Decision == ledger.DecisionCreated {
			created++
			continue
		}
		uncovered(t, "a call beyond the budget", res, fmt.Sprintf("budget %d has 10.00 USD of 100.00 USD left", b.ID))
	}
	if rs := budgetReservations(t, replicas[1], b.ID); created != 5 || len(rs) != 5 {
		t.Fatalf("created %d with %d budget reservations over %d replicas; want 5", created, len(rs), len(replicas))
	}
}
