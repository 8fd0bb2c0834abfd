package archive

import (
	"slices"
	"testing"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/receipt"
)

func TestEligible(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	cut := now.Add(-24 * time.Hour)
	complete := &receipt.Receipt{OperationID: "op", ReconciliationStatus: receipt.ReconciliationComplete}
	sub, err := receipt.Substance(complete)
	if err != nil {
		t.Fatal(err)
	}
	changed := &receipt.Receipt{OperationID: "op", ReconciliationStatus: receipt.ReconciliationComplete, DuplicateJobs: 1}
	incomplete := &receipt.Receipt{OperationID: "op", ReconciliationStatus: receipt.ReconciliationIncomplete}
	rec := func(state ledger.State, ended time.Time, substances ...string) *Record {
		r := &Record{Operation: &ledger.Operation{OperationID: "op", State: state, EndedAt: ended}}
		for i, s := range substances {
			r.Receipts = append(r.Receipts, &ReceiptVersion{Version: i + 1, Substance: s})
		}
		return r
	}
	withApproval := func(r *Record, a *ledger.Approval) *Record { r.Approval = a; return r }
	old := cut.Add(-time.Hour)
	openBudget := &ledger.Budget{ExpiresAt: now.Add(time.Hour)}
	closedBudget := &ledger.Budget{ExpiresAt: now.Add(time.Hour), ClosedAt: now.Add(-time.Minute)}
	expiredBudget := &ledger.Budget{ExpiresAt: now.Add(-time.Minute)}
	for _, tc := range []struct {
		name    string
		r       *Record
		current *receipt.Receipt
		budgets []*ledger.Budget
		want    Skip
	}{
		{"completed, reconciled, issued", rec(ledger.StateCompleted, old, sub), complete, nil, ""},
		{"the latest of several versions counts", rec(ledger.StateFailed, old, "older", sub), complete, nil, ""},
		{"running", rec(ledger.StateRunning, time.Time{}, sub), complete, nil, SkipNotEnded},
		{"ended after the cut-off", rec(ledger.StateCompleted, cut.Add(time.Second), sub), complete, nil, SkipNotEnded},
		{"ended at the cut-off", rec(ledger.StateCompleted, cut, sub), complete, nil, SkipNotEnded},
		{"no receipt issued", rec(ledger.StateCompleted, old), complete, nil, SkipNoReceipt},
		{"reconciliation incomplete", rec(ledger.StateCompleted, old, sub), incomplete, nil, SkipNotReconciled},
		{"a later fact not yet issued", rec(ledger.StateCompleted, old, sub), changed, nil, SkipReceiptOutdated},
		{"an open budget", rec(ledger.StateCompleted, old, sub), complete, []*ledger.Budget{closedBudget, openBudget}, SkipBudgetOpen},
		{"closed and expired budgets", rec(ledger.StateCancelled, old, sub), complete, []*ledger.Budget{closedBudget, expiredBudget}, ""},
		{"an approval still active", withApproval(rec(ledger.StateCompleted, old, sub), &ledger.Approval{ExpiresAt: now.Add(time.Hour)}), complete, nil, SkipApprovalActive},
		{"an expired approval", withApproval(rec(ledger.StateCompleted, old, sub), &ledger.Approval{ExpiresAt: now.Add(-time.Minute)}), complete, nil, ""},
		{"a revoked approval", withApproval(rec(ledger.StateCompleted, old, sub), &ledger.Approval{ExpiresAt: now.Add(time.Hour), RevokedAt: now.Add(-time.Minute)}), complete, nil, ""},
	} {
		if got := Eligible(tc.r, tc.current, tc.budgets, cut, now); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestPlan(t *testing.T) {
	at := func(s string) *Record {
		e, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return &Record{Operation: &ledger.Operation{OperationID: s, EndedAt: e}}
	}
	// Days are UTC days: 23:30 at -02:00 is the next day.
	recs := []*Record{at("2026-11-02T10:00:00Z"), at("2026-11-01T23:59:59Z"), at("2026-11-01T23:30:00-02:00"), at("2026-11-01T00:00:00Z")}
	files := Plan(recs, 7)
	var got [][]string
	for _, f := range files {
		var ids []string
		for _, r := range f.Records {
			ids = append(ids, r.Operation.OperationID)
		}
		got = append(got, append([]string{f.Name}, ids...))
	}
	want := [][]string{
		{"operations-2026-11-01-r000007.jsonl.gz", "2026-11-01T23:59:59Z", "2026-11-01T00:00:00Z"},
		{"operations-2026-11-02-r000007.jsonl.gz", "2026-11-02T10:00:00Z", "2026-11-01T23:30:00-02:00"},
	}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("Plan = %v, want %v", got, want)
	}
}

func TestNextRun(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  int
	}{
		{nil, 1},
		{[]string{"notes.txt", "manifest-r.json", "manifest-r000000.json", "manifest-rx.json"}, 1},
		{[]string{"manifest-r000001.json", "operations-2026-11-01-r000009.jsonl.gz", "manifest-r000003.json", "checkpoint-r000003.dsse.json"}, 4},
		{[]string{"manifest-r1000000.json"}, 1000001},
	} {
		if got := NextRun(tc.names); got != tc.want {
			t.Errorf("NextRun(%v) = %d, want %d", tc.names, got, tc.want)
		}
	}
}
