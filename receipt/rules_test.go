package receipt_test

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/receipt"
)

// base is a finished, unpriced operation with one completed job and no
// charges: reconciliation complete and ready, the neutral start of each
// rule case.
func base() *receipt.Input {
	return &receipt.Input{
		Operation: &ledger.Operation{
			ID: 42, Tenant: "acme", OperationID: "op-1", TaskID: "task-1", Upstream: "up", Tool: "tool",
			State: ledger.StateCompleted, Estimate: usd("5.00"), IntendedRemoteJobs: 1, CreatedAt: t0,
		},
		Attempts: []*ledger.Attempt{
			{ID: 1, RequestID: "req-1", OperationID: "op-1", OperationRef: 42, Decision: ledger.DecisionCreated, CreatedAt: t0},
		},
		RemoteJobs: []*ledger.RemoteJob{job(10, 1, "job-a", ledger.JobCompleted)},
		Now:        at(time.Hour),
	}
}

func job(id, attempt int64, remoteID string, s ledger.JobStatus) *ledger.RemoteJob {
	return &ledger.RemoteJob{ID: id, OperationRef: 42, AttemptRef: attempt, RemoteJobID: remoteID, Status: s, Intended: id == 10,
		CreatedAt: at(time.Duration(id) * time.Second), UpdatedAt: at(time.Duration(id) * time.Minute)}
}

func charge(id, jobRef int64, amount string, s ledger.ChargeStatus) *ledger.Charge {
	return &ledger.Charge{ID: id, OperationRef: 42, RemoteJobRef: jobRef, ProviderChargeID: "ch-" + amount + "-" + string(s),
		Amount: usd(amount), Status: s, CreatedAt: at(time.Duration(id) * time.Second)}
}

func approval(ceiling string, jobs int) *ledger.Approval {
	return &ledger.Approval{ID: 7, Tenant: "acme", OperationID: "op-1", MaxTotalCost: usd(ceiling), MaxRemoteJobs: jobs,
		RetryPolicy: "lookup_then_attach", ExpiresAt: at(24 * time.Hour)}
}

func reconciled(id int64, when time.Duration, data string) *ledger.Event {
	return &ledger.Event{ID: id, OperationRef: 42, Kind: ledger.EventReconciled, Data: json.RawMessage(data), CreatedAt: at(when)}
}

func TestCounts(t *testing.T) {
	tests := []struct {
		name                                   string
		attempts                               []*ledger.Attempt
		wantAttempts, wantAttached, wantDenied int
		wantLineage                            []string
	}{
		{
			name: "created, attached and conflict count as attempts; denied retries apart",
			attempts: []*ledger.Attempt{
				{ID: 1, RequestID: "req-1", OperationRef: 42, Decision: ledger.DecisionCreated, CreatedAt: t0},
				{ID: 2, RequestID: "req-2", OperationRef: 42, Decision: ledger.DecisionAttached, CreatedAt: at(time.Minute)},
				{ID: 3, RequestID: "req-3", OperationRef: 42, Decision: ledger.DecisionConflict, Reason: ledger.ReasonArgumentsDiffer, CreatedAt: at(2 * time.Minute)},
				{ID: 4, RequestID: "req-4", OperationID: "op-1-retry", RelatedRef: 42, Decision: ledger.DecisionDenied, Reason: ledger.ReasonRetryUsesNewOperation, CreatedAt: at(3 * time.Minute)},
				{ID: 5, RequestID: "req-5", OperationRef: 42, Decision: ledger.DecisionAttached, CreatedAt: at(4 * time.Minute)},
			},
			wantAttempts: 4, wantAttached: 2, wantDenied: 1,
			wantLineage: []string{"req-1", "req-2", "req-3", "req-4", "req-5"},
		},
		{
			name: "attempts of other operations are not in the lineage",
			attempts: []*ledger.Attempt{
				{ID: 1, RequestID: "req-1", OperationRef: 42, Decision: ledger.DecisionCreated, CreatedAt: t0},
				{ID: 2, RequestID: "req-other", OperationRef: 43, Decision: ledger.DecisionAttached, CreatedAt: t0},
				{ID: 3, RequestID: "req-denied-other", RelatedRef: 43, Decision: ledger.DecisionDenied, CreatedAt: t0},
			},
			wantAttempts: 1, wantLineage: []string{"req-1"},
		},
		{
			name: "the lineage is ordered by time whatever the input order",
			attempts: []*ledger.Attempt{
				{ID: 2, RequestID: "req-2", OperationRef: 42, Decision: ledger.DecisionAttached, CreatedAt: at(time.Minute)},
				{ID: 1, RequestID: "req-1", OperationRef: 42, Decision: ledger.DecisionCreated, CreatedAt: t0},
			},
			wantAttempts: 2, wantAttached: 1, wantLineage: []string{"req-1", "req-2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base()
			in.Attempts = tt.attempts
			r := receipt.Build(in)
			if r.Attempts != tt.wantAttempts || r.AttachedAttempts != tt.wantAttached || r.DeniedAttempts != tt.wantDenied {
				t.Errorf("attempts, attached, denied = %d, %d, %d, want %d, %d, %d",
					r.Attempts, r.AttachedAttempts, r.DeniedAttempts, tt.wantAttempts, tt.wantAttached, tt.wantDenied)
			}
			var got []string
			for _, l := range r.Lineage {
				got = append(got, l.RequestID)
			}
			if !slices.Equal(got, tt.wantLineage) {
				t.Errorf("lineage = %q, want %q", got, tt.wantLineage)
			}
		})
	}
}

func TestMoneyAndPricing(t *testing.T) {
	tests := []struct {
		name                     string
		priced                   bool
		jobs                     []*ledger.RemoteJob
		charges                  []*ledger.Charge
		final, pending, refunded string
		unpriced                 int
		reconciliation           receipt.ReconciliationStatus
		resultUsed               string
	}{
		{
			name: "final, pending and refunded are summed apart; estimated in none",
			jobs: []*ledger.RemoteJob{job(10, 1, "job-a", ledger.JobCompleted)},
			charges: []*ledger.Charge{
				charge(1, 10, "10.10", ledger.ChargeFinal), charge(2, 10, "0.125", ledger.ChargeFinal),
				charge(3, 10, "3.00", ledger.ChargePending), charge(4, 10, "2.50", ledger.ChargeRefunded),
				charge(5, 10, "9.99", ledger.ChargeEstimated),
			},
			final: "10.225", pending: "3.00", refunded: "2.50", reconciliation: receipt.ReconciliationIncomplete, resultUsed: "job-a",
		},
		{
			name:    "priced: a completed job with only a refunded charge is invoiced",
			priced:  true,
			jobs:    []*ledger.RemoteJob{job(10, 1, "job-a", ledger.JobCompleted)},
			charges: []*ledger.Charge{charge(1, 10, "4.00", ledger.ChargeRefunded)},
			final:   "0.00", pending: "0.00", refunded: "4.00", reconciliation: receipt.ReconciliationComplete, resultUsed: "job-a",
		},
		{
			name:   "priced: jobs of one attempt are priced if any is charged; a job without attempt counts alone",
			priced: true,
			jobs: []*ledger.RemoteJob{
				job(10, 1, "job-a", ledger.JobFailed), job(11, 1, "job-b", ledger.JobCompleted),
				job(12, 0, "job-c", ledger.JobFailed), job(13, 0, "job-d", ledger.JobFailed),
				job(14, 2, "job-e", ledger.JobFailed),
			},
			charges: []*ledger.Charge{charge(1, 11, "1.00", ledger.ChargeFinal)},
			final:   "1.00", pending: "0.00", refunded: "0.00", unpriced: 3, reconciliation: receipt.ReconciliationComplete, resultUsed: "job-a",
		},
		{
			name:  "unpriced tool: nothing is unpriced and no invoice is awaited",
			jobs:  []*ledger.RemoteJob{job(10, 1, "job-a", ledger.JobCompleted)},
			final: "0.00", pending: "0.00", refunded: "0.00", reconciliation: receipt.ReconciliationComplete, resultUsed: "job-a",
		},
		{
			name:   "priced: a completed job without charge keeps reconciliation incomplete",
			priced: true,
			jobs:   []*ledger.RemoteJob{job(10, 1, "job-a", ledger.JobCompleted)},
			final:  "0.00", pending: "0.00", refunded: "0.00", unpriced: 1, reconciliation: receipt.ReconciliationIncomplete, resultUsed: "job-a",
		},
		{
			name:  "no intended job: the only completed job is the result",
			jobs:  []*ledger.RemoteJob{job(11, 1, "job-b", ledger.JobFailed), job(12, 1, "job-c", ledger.JobCompleted)},
			final: "0.00", pending: "0.00", refunded: "0.00", reconciliation: receipt.ReconciliationComplete, resultUsed: "job-c",
		},
		{
			name:  "no intended job and two completed: no result is claimed",
			jobs:  []*ledger.RemoteJob{job(11, 1, "job-b", ledger.JobCompleted), job(12, 1, "job-c", ledger.JobCompleted)},
			final: "0.00", pending: "0.00", refunded: "0.00", reconciliation: receipt.ReconciliationComplete,
		},
		{
			name: "a charge in another currency stays out of the USD totals",
			jobs: []*ledger.RemoteJob{job(10, 1, "job-a", ledger.JobCompleted)},
			charges: []*ledger.Charge{
				charge(1, 10, "2.00", ledger.ChargeFinal),
				{ID: 2, RemoteJobRef: 10, ProviderChargeID: "ch-eur", Amount: money.MustParse("7.00", "EUR"), Status: ledger.ChargeFinal},
			},
			final: "2.00", pending: "0.00", refunded: "0.00", reconciliation: receipt.ReconciliationIncomplete, resultUsed: "job-a",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base()
			in.Priced, in.RemoteJobs, in.Charges = tt.priced, tt.jobs, tt.charges
			r := receipt.Build(in)
			if got, want := []string{r.FinalCostUSD.String(), r.PendingCostUSD.String(), r.RefundedCostUSD.String()},
				[]string{tt.final, tt.pending, tt.refunded}; !slices.Equal(got, want) {
				t.Errorf("final, pending, refunded = %q, want %q", got, want)
			}
			if r.UnpricedAttempts != tt.unpriced {
				t.Errorf("unpriced attempts = %d, want %d", r.UnpricedAttempts, tt.unpriced)
			}
			if r.ReconciliationStatus != tt.reconciliation {
				t.Errorf("reconciliation = %s, want %s", r.ReconciliationStatus, tt.reconciliation)
			}
			if r.ResultUsed != tt.resultUsed {
				t.Errorf("result used = %q, want %q", r.ResultUsed, tt.resultUsed)
			}
		})
	}
}

func TestStatuses(t *testing.T) {
	tests := []struct {
		name           string
		edit           func(in *receipt.Input)
		reconciliation receipt.ReconciliationStatus
		review         receipt.ReviewStatus
	}{
		{"the neutral case", func(in *receipt.Input) {}, receipt.ReconciliationComplete, receipt.ReviewReady},
		{"a running job", func(in *receipt.Input) { in.RemoteJobs[0].Status = ledger.JobRunning },
			receipt.ReconciliationIncomplete, receipt.ReviewNeedsReview},
		{"a job of unknown status", func(in *receipt.Input) { in.RemoteJobs[0].Status = ledger.JobUnknown },
			receipt.ReconciliationIndeterminate, receipt.ReviewNeedsReview},
		{"a job with no status recorded counts as unknown", func(in *receipt.Input) { in.RemoteJobs[0].Status = "" },
			receipt.ReconciliationIndeterminate, receipt.ReviewNeedsReview},
		{"a pending charge", func(in *receipt.Input) { in.Charges = []*ledger.Charge{charge(1, 10, "1.00", ledger.ChargePending)} },
			receipt.ReconciliationIncomplete, receipt.ReviewNeedsReview},
		{"an operation still running, no job yet", func(in *receipt.Input) {
			in.Operation.State, in.RemoteJobs = ledger.StateSending, nil
		}, receipt.ReconciliationIncomplete, receipt.ReviewNeedsReview},
		{"a failed operation that never reached the provider", func(in *receipt.Input) {
			in.Operation.State, in.RemoteJobs = ledger.StateFailed, nil
		}, receipt.ReconciliationComplete, receipt.ReviewReady},
		{"the latest lookup indeterminate", func(in *receipt.Input) {
			in.Events = []*ledger.Event{
				reconciled(1, time.Minute, `{"lookup":"answered"}`),
				reconciled(2, 2*time.Minute, `{"lookup":"indeterminate","detail":"503"}`),
			}
		}, receipt.ReconciliationIndeterminate, receipt.ReviewNeedsReview},
		{"an indeterminate lookup answered later", func(in *receipt.Input) {
			in.Events = []*ledger.Event{
				reconciled(2, 2*time.Minute, `{"lookup":"answered"}`),
				reconciled(1, time.Minute, `{"lookup":"indeterminate"}`),
			}
		}, receipt.ReconciliationComplete, receipt.ReviewReady},
		{"an unreadable reconciliation record proves nothing", func(in *receipt.Input) {
			in.Events = []*ledger.Event{reconciled(1, time.Minute, `"ok"`)}
		}, receipt.ReconciliationIndeterminate, receipt.ReviewNeedsReview},
		{"waiting for review", func(in *receipt.Input) { in.Operation.State = ledger.StateReview; in.Operation.ReviewReason = "r" },
			receipt.ReconciliationIncomplete, receipt.ReviewNeedsReview},
		{"an open duplicate blocks even an indeterminate receipt", func(in *receipt.Input) {
			d := job(11, 1, "job-dup", ledger.JobRunning)
			d.Duplicate = true
			in.RemoteJobs = append(in.RemoteJobs, d)
			in.Events = []*ledger.Event{reconciled(1, time.Minute, `{"lookup":"indeterminate"}`)}
		}, receipt.ReconciliationIndeterminate, receipt.ReviewBlocked},
		{"a duplicate cancelled by a human no longer blocks", func(in *receipt.Input) {
			d := job(11, 1, "job-dup", ledger.JobCancelled)
			d.Duplicate, d.DuplicateResolved = true, "cancelled"
			in.RemoteJobs = append(in.RemoteJobs, d)
		}, receipt.ReconciliationComplete, receipt.ReviewReady},
		{"a duplicate accepted by a human no longer blocks", func(in *receipt.Input) {
			d := job(11, 1, "job-dup", ledger.JobCompleted)
			d.Duplicate, d.DuplicateResolved = true, "accepted"
			in.RemoteJobs = append(in.RemoteJobs, d)
		}, receipt.ReconciliationComplete, receipt.ReviewReady},
		{"a duplicate the provider cancelled no longer blocks", func(in *receipt.Input) {
			d := job(11, 1, "job-dup", ledger.JobCancelled)
			d.Duplicate = true
			in.RemoteJobs = append(in.RemoteJobs, d)
		}, receipt.ReconciliationComplete, receipt.ReviewReady},
		{"a fan-out of four with all four intended jobs", func(in *receipt.Input) {
			in.Operation.IntendedRemoteJobs = 4
			for i := int64(11); i <= 13; i++ {
				j := job(i, 1, fmt.Sprintf("job-%d", i), ledger.JobCompleted)
				j.Intended = true
				in.RemoteJobs = append(in.RemoteJobs, j)
			}
		}, receipt.ReconciliationComplete, receipt.ReviewReady},
		{"a fan-out of four that completed with three needs review", func(in *receipt.Input) {
			in.Operation.IntendedRemoteJobs = 4
			for i := int64(11); i <= 12; i++ {
				j := job(i, 1, fmt.Sprintf("job-%d", i), ledger.JobCompleted)
				j.Intended = true
				in.RemoteJobs = append(in.RemoteJobs, j)
			}
		}, receipt.ReconciliationComplete, receipt.ReviewNeedsReview},
		{"a fan-out of four with a fifth job open is blocked", func(in *receipt.Input) {
			in.Operation.IntendedRemoteJobs = 4
			for i := int64(11); i <= 14; i++ {
				j := job(i, 1, fmt.Sprintf("job-%d", i), ledger.JobCompleted)
				j.Intended, j.Duplicate = i < 14, i == 14
				in.RemoteJobs = append(in.RemoteJobs, j)
			}
		}, receipt.ReconciliationComplete, receipt.ReviewBlocked},
		{"final cost above the ceiling without the flag", func(in *receipt.Input) {
			in.Approval = approval("1.00", 1)
			in.Charges = []*ledger.Charge{charge(1, 10, "1.01", ledger.ChargeFinal)}
		}, receipt.ReconciliationComplete, receipt.ReviewNeedsReview},
		{"final cost exactly at the ceiling", func(in *receipt.Input) {
			in.Approval = approval("1.00", 1)
			in.Charges = []*ledger.Charge{charge(1, 10, "1.00", ledger.ChargeFinal)}
		}, receipt.ReconciliationComplete, receipt.ReviewReady},
		{"a flagged breach refunded back under the ceiling is settled", func(in *receipt.Input) {
			in.Operation.CostBreach = true
			in.Approval = approval("1.00", 1)
			in.Charges = []*ledger.Charge{charge(1, 10, "0.80", ledger.ChargeFinal), charge(2, 10, "0.50", ledger.ChargeRefunded)}
		}, receipt.ReconciliationComplete, receipt.ReviewReady},
		{"a flagged breach without a known approval stays open", func(in *receipt.Input) {
			in.Operation.CostBreach = true
			in.Charges = []*ledger.Charge{charge(1, 10, "3.00", ledger.ChargeFinal)}
		}, receipt.ReconciliationComplete, receipt.ReviewNeedsReview},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base()
			tt.edit(in)
			r := receipt.Build(in)
			if r.ReconciliationStatus != tt.reconciliation || r.ReviewStatus != tt.review {
				t.Errorf("reconciliation, review = %s, %s, want %s, %s", r.ReconciliationStatus, r.ReviewStatus, tt.reconciliation, tt.review)
			}
		})
	}
}

func TestBreaches(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(in *receipt.Input)
		want    []string // kind final ceiling over charge open
		actions []string
	}{
		{"none", func(in *receipt.Input) { in.Approval = approval("20.00", 1) }, nil, []string{}},
		{"the charge that crossed the ceiling is the refund target", func(in *receipt.Input) {
			in.Approval = approval("20.00", 1)
			in.Charges = []*ledger.Charge{
				charge(1, 10, "12.00", ledger.ChargeFinal), charge(2, 10, "9.00", ledger.ChargeFinal), charge(3, 10, "4.00", ledger.ChargeFinal),
			}
		}, []string{"cost_boundary_breach 25.00 20.00 5.00 ch-9.00-final true"},
			[]string{"request_refund ch-9.00-final", "preserve_evidence op-1"}},
		{"flagged without an approval: the last final charge is the target", func(in *receipt.Input) {
			in.Operation.CostBreach = true
			in.Charges = []*ledger.Charge{charge(1, 10, "2.00", ledger.ChargeFinal), charge(2, 10, "3.00", ledger.ChargeFinal)}
		}, []string{"cost_boundary_breach 5.00 - - ch-3.00-final true"},
			[]string{"request_refund ch-3.00-final", "preserve_evidence op-1"}},
		{"settled by a refund: listed, no refund asked", func(in *receipt.Input) {
			in.Operation.CostBreach = true
			in.Approval = approval("1.00", 1)
			in.Charges = []*ledger.Charge{charge(1, 10, "0.80", ledger.ChargeFinal), charge(2, 10, "0.50", ledger.ChargeRefunded)}
		}, []string{"cost_boundary_breach 0.80 1.00 0.00 - false"},
			[]string{"preserve_evidence op-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base()
			tt.edit(in)
			r := receipt.Build(in)
			var got []string
			for _, b := range r.Breaches {
				str := func(m *receipt.Money) string {
					if m == nil {
						return "-"
					}
					return m.String()
				}
				fields := []string{b.Kind, b.FinalCostUSD.String(), str(b.CeilingUSD), str(b.OverByUSD), cmpOr(b.ChargeID, "-"), boolText(b.Open)}
				got = append(got, strings.Join(fields, " "))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("breaches = %q, want %q", got, tt.want)
			}
			if got := actionList(r); !slices.Equal(got, tt.actions) {
				t.Errorf("next actions = %q, want %q", got, tt.actions)
			}
		})
	}
}

func cmpOr(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func TestNextActions(t *testing.T) {
	tests := []struct {
		name string
		edit func(in *receipt.Input)
		want []receipt.NextAction
	}{
		{
			name: "duplicates: open ones are cancelled, charges refunded unless accepted, evidence kept",
			edit: func(in *receipt.Input) {
				d1 := job(12, 2, "job-z", ledger.JobRunning)
				d1.Duplicate = true
				d2 := job(11, 3, "job-y", ledger.JobCompleted)
				d2.Duplicate, d2.DuplicateResolved = true, "accepted"
				d3 := job(13, 4, "job-x", ledger.JobCancelled)
				d3.Duplicate, d3.DuplicateResolved = true, "cancelled"
				in.RemoteJobs = append(in.RemoteJobs, d1, d2, d3)
				in.Charges = []*ledger.Charge{
					charge(1, 12, "1.00", ledger.ChargePending), charge(2, 11, "2.00", ledger.ChargeFinal),
					charge(3, 13, "3.00", ledger.ChargeFinal), charge(4, 13, "0.50", ledger.ChargeRefunded),
				}
			},
			want: []receipt.NextAction{
				{Action: "cancel_duplicate", Target: "job-z"},
				{Action: "request_refund", Target: "ch-1.00-pending"},
				{Action: "request_refund", Target: "ch-3.00-final"},
				{Action: "preserve_evidence", Target: "op-1"},
			},
		},
		{
			name: "late invoice: default owner is the tenant, due is completion plus the default grace",
			edit: func(in *receipt.Input) { in.Priced = true },
			want: []receipt.NextAction{{Action: "check_late_invoice", Target: "job-a", Due: at(10*time.Minute + 24*time.Hour)}},
		},
		{
			name: "late invoice: completion comes from the observation, grace from the input",
			edit: func(in *receipt.Input) {
				in.Priced, in.InvoiceGrace, in.Owner = true, 2*time.Hour, "billing"
				in.Events = []*ledger.Event{{ID: 1, Kind: ledger.EventRemoteJobObserved, CreatedAt: at(3 * time.Minute),
					Data: json.RawMessage(`{"remote_job_id":"job-a","status":"completed"}`)}}
			},
			want: []receipt.NextAction{{Action: "check_late_invoice", Target: "job-a", Owner: "billing", Due: at(3*time.Minute + 2*time.Hour)}},
		},
		{
			name: "late invoice: a pending charge is not an invoice yet",
			edit: func(in *receipt.Input) {
				in.Priced = true
				in.Charges = []*ledger.Charge{charge(1, 10, "1.00", ledger.ChargePending)}
			},
			want: []receipt.NextAction{{Action: "check_late_invoice", Target: "job-a", Due: at(10*time.Minute + 24*time.Hour)}},
		},
		{
			name: "unknown job status: reconcile again and keep evidence",
			edit: func(in *receipt.Input) { in.RemoteJobs[0].Status = ledger.JobUnknown },
			want: []receipt.NextAction{
				{Action: "preserve_evidence", Target: "op-1"},
				{Action: "reconcile_again", Target: "op-1"},
			},
		},
		{
			name: "review: resolve it with its reason",
			edit: func(in *receipt.Input) {
				in.Operation.State = ledger.StateReview
				in.Operation.ReviewReason = ledger.ReasonLookupNotFoundUnsafe
			},
			want: []receipt.NextAction{{Action: "resolve_review", Target: "op-1"}},
		},
		{
			name: "waiting for an approval: decide its request",
			edit: func(in *receipt.Input) {
				in.Operation.State = ledger.StateAwaitingApproval
				in.Operation.StatusMessage = "waiting for an approver to decide approval request 7"
				in.RemoteJobs, in.Charges = nil, nil
			},
			want: []receipt.NextAction{{Action: "decide_approval_request", Target: "op-1"}},
		},
		{
			name: "a fan-out that completed without one of its jobs: check the missing job, keep evidence",
			edit: func(in *receipt.Input) {
				in.Operation.IntendedRemoteJobs = 2
			},
			want: []receipt.NextAction{
				{Action: "check_missing_job", Target: "op-1"},
				{Action: "preserve_evidence", Target: "op-1"},
			},
		},
		{
			name: "a foreign-currency charge is reviewed",
			edit: func(in *receipt.Input) {
				in.Charges = []*ledger.Charge{{ID: 2, RemoteJobRef: 10, ProviderChargeID: "ch-eur", Amount: money.MustParse("7.00", "EUR"), Status: ledger.ChargeFinal}}
			},
			want: []receipt.NextAction{{Action: "review_charge_currency", Target: "ch-eur"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base()
			tt.edit(in)
			r := receipt.Build(in)
			owner := cmpOr(in.Owner, "acme")
			var got, want []receipt.NextAction
			for _, a := range r.NextActions {
				if a.Reason == "" {
					t.Errorf("%s %s has no reason", a.Action, a.Target)
				}
				if a.Owner != owner {
					t.Errorf("%s %s owner = %q, want %q", a.Action, a.Target, a.Owner, owner)
				}
				got = append(got, receipt.NextAction{Action: a.Action, Target: a.Target, Due: a.Due})
			}
			for _, a := range tt.want {
				want = append(want, receipt.NextAction{Action: a.Action, Target: a.Target, Due: a.Due})
			}
			if !slices.Equal(got, want) {
				t.Errorf("next actions =\n%+v\nwant\n%+v", got, want)
			}
			if in.Operation.State == ledger.StateReview && !strings.Contains(r.NextActions[len(r.NextActions)-1].Reason, in.Operation.ReviewReason) {
				t.Errorf("resolve_review reason %q does not carry the review reason", r.NextActions[len(r.NextActions)-1].Reason)
			}
		})
	}
}

func TestCancellation(t *testing.T) {
	tests := []struct {
		name string
		edit func(in *receipt.Input)
		want *receipt.Cancellation
	}{
		{"nothing happened", func(in *receipt.Input) {}, nil},
		{"a timed-out client is only a client that stopped watching", func(in *receipt.Input) {
			in.Attempts[0].ClientResult = ledger.ClientTimedOut
			in.Attempts[0].UpdatedAt = at(time.Minute)
		}, &receipt.Cancellation{ClientStoppedWatching: true, ClientStoppedWatchingAt: at(time.Minute)}},
		{"cancellation before completion is not after the effect", func(in *receipt.Input) {
			in.Operation.CancelRequestedAt = at(5 * time.Minute) // the job completes at 10m
		}, &receipt.Cancellation{CancellationRequested: true, CancellationRequestedAt: at(5 * time.Minute), EffectReversed: "unknown"}},
		{"a job-level request at the completion instant is after the effect", func(in *receipt.Input) {
			in.RemoteJobs[0].CancelRequestedAt = at(10 * time.Minute)
		}, &receipt.Cancellation{CancellationRequested: true, CancellationRequestedAt: at(10 * time.Minute), RequestedAfterEffect: true, EffectReversed: "unknown"}},
		{"a request naming another job does not concern this one", func(in *receipt.Input) {
			in.Events = []*ledger.Event{{ID: 1, Kind: ledger.EventCancellationRequested, CreatedAt: at(20 * time.Minute),
				Data: json.RawMessage(`{"remote_job_id":"job-other"}`)}}
		}, &receipt.Cancellation{CancellationRequested: true, CancellationRequestedAt: at(20 * time.Minute), EffectReversed: "unknown"}},
		{"the effect was reversed", func(in *receipt.Input) {
			in.Operation.CancelRequestedAt = at(20 * time.Minute)
			in.Events = []*ledger.Event{{ID: 1, Kind: ledger.EventEffectReversed, CreatedAt: at(21 * time.Minute),
				Data: json.RawMessage(`{"remote_job_id":"job-a"}`)}}
		}, &receipt.Cancellation{CancellationRequested: true, CancellationRequestedAt: at(20 * time.Minute), RequestedAfterEffect: true, EffectReversed: "yes"}},
		{"an unreadable reversal proves nothing", func(in *receipt.Input) {
			in.Operation.CancelRequestedAt = at(20 * time.Minute)
			in.Events = []*ledger.Event{{ID: 1, Kind: ledger.EventEffectReversed, CreatedAt: at(21 * time.Minute),
				Data: json.RawMessage(`"ok"`)}}
		}, &receipt.Cancellation{CancellationRequested: true, CancellationRequestedAt: at(20 * time.Minute), RequestedAfterEffect: true, EffectReversed: "unknown"}},
		{"one job reversed, another not: the effect stands", func(in *receipt.Input) {
			in.RemoteJobs = append(in.RemoteJobs, job(11, 1, "job-b", ledger.JobRunning))
			in.RemoteJobs[0].EffectReversed = ledger.Yes
			in.RemoteJobs[1].EffectReversed = ledger.No
		}, &receipt.Cancellation{EffectReversed: "no"}},
		{"an effect_not_reversed event alone says the request came after the effect", func(in *receipt.Input) {
			in.Events = []*ledger.Event{{ID: 1, Kind: ledger.EventEffectNotReversed, CreatedAt: at(30 * time.Minute)}}
		}, &receipt.Cancellation{RequestedAfterEffect: true, EffectReversed: "no"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base()
			tt.edit(in)
			got := receipt.Build(in).Cancellation
			if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
				t.Errorf("cancellation = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestApprovalHeadroom(t *testing.T) {
	tests := []struct {
		name         string
		reservations []*ledger.Reservation
		charges      []*ledger.Charge
		jobs         int
		wantUSD      string
		wantJobs     int
	}{
		{"a held reservation commits its estimate",
			[]*ledger.Reservation{{OperationRef: 42, Amount: usd("18.00"), RemoteJobs: 1, Status: ledger.ReservationHeld}}, nil, 0, "2.00", 0},
		{"charges above the reservation count",
			[]*ledger.Reservation{{OperationRef: 42, Amount: usd("18.00"), RemoteJobs: 1, Status: ledger.ReservationHeld}},
			[]*ledger.Charge{charge(1, 10, "19.00", ledger.ChargeFinal), charge(2, 10, "0.50", ledger.ChargePending)}, 1, "0.50", 0},
		{"a released reservation commits nothing", []*ledger.Reservation{{OperationRef: 42, Amount: usd("18.00"), RemoteJobs: 1, Status: ledger.ReservationReleased}},
			nil, 0, "20.00", 1},
		{"more jobs than approved go negative", nil, nil, 2, "20.00", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base()
			in.Approval, in.Reservations, in.Charges = approval("20.00", 1), tt.reservations, tt.charges
			in.RemoteJobs = nil
			for i := range tt.jobs {
				in.RemoteJobs = append(in.RemoteJobs, job(int64(10+i), 1, "job", ledger.JobCompleted))
			}
			a := receipt.Build(in).Approval
			if a.HeadroomUSD.String() != tt.wantUSD || a.RemoteJobsHeadroom != tt.wantJobs {
				t.Errorf("headroom = %s, %d jobs; want %s, %d", a.HeadroomUSD, a.RemoteJobsHeadroom, tt.wantUSD, tt.wantJobs)
			}
		})
	}
}

// A nested paid service's charges are listed as what the provider calls
// them and count in the totals like the job's own.
func TestChargeKinds(t *testing.T) {
	in := base()
	own, nested := charge(1, 10, "17.84", ledger.ChargeFinal), charge(2, 10, "1.50", ledger.ChargeFinal)
	own.Kind, nested.Kind = "runner", "browser_grid"
	in.Charges = []*ledger.Charge{own, nested}
	r := receipt.Build(in)
	if r.FinalCostUSD.String() != "19.34" {
		t.Errorf("final cost %s, want 19.34: the nested service's charge counts", r.FinalCostUSD)
	}
	if len(r.Charges) != 2 || r.Charges[0].Kind != "runner" || r.Charges[1].Kind != "browser_grid" {
		t.Fatalf("charges = %+v, want the runner's and the browser grid's, with their kinds", r.Charges)
	}
	if md := string(r.Markdown()); !strings.Contains(md, "| charge | remote job | kind | amount | status |") || !strings.Contains(md, `| browser\_grid | 1.50 USD |`) {
		t.Errorf("the Markdown charges table does not show kinds:\n%s", md)
	}
	j, err := r.JSON()
	if err != nil || !strings.Contains(string(j), `"kind": "browser_grid"`) {
		t.Errorf("JSON %s, %v; want each charge's kind", j, err)
	}

	// Charges without a kind render as before: no kind column, no field.
	plain := base()
	plain.Charges = []*ledger.Charge{charge(1, 10, "17.84", ledger.ChargeFinal)}
	pr := receipt.Build(plain)
	if md := string(pr.Markdown()); !strings.Contains(md, "| charge | remote job | amount | status |") {
		t.Errorf("a receipt without kinds has a kind column:\n%s", md)
	}
	if len(pr.Charges) != 1 || pr.Charges[0].Kind != "" {
		t.Fatalf("charges = %+v, want one without a kind", pr.Charges)
	}
	if j, _ := json.Marshal(pr.Charges[0]); strings.Contains(string(j), `"kind"`) {
		t.Errorf("a charge without a kind names one: %s", j)
	}
}

// Each remote job names the provider's own latest records of it that the
// reconciler saw, with the time it saw them; older records and records of
// other jobs stay out.
func TestEvidence(t *testing.T) {
	in := base()
	in.Events = []*ledger.Event{
		reconciled(1, time.Minute, `{"lookup":"answered","evidence":[
			{"remote_job_id":"job-a","kind":"status","tool":"get_job","answer":"{\"job_id\":\"job-a\",\"status\":\"running\"}"},
			{"remote_job_id":"job-a","kind":"charges","tool":"list_charges","answer":"{\"charges\":[]}"}]}`),
		reconciled(2, 2*time.Minute, `{"lookup":"answered","evidence":[
			{"remote_job_id":"job-a","kind":"status","tool":"get_job","answer":"{\"job_id\":\"job-a\",\"status\":\"succeeded\",\"finished_ns\":1714800000000000000}"},
			{"remote_job_id":"job-other","kind":"status","tool":"get_job","answer":"{}"}]}`),
		reconciled(3, 3*time.Minute, `{"lookup":"answered","evidence":"unreadable"}`),
	}
	r := receipt.Build(in)
	ev := r.RemoteJobs[0].Evidence
	if len(ev) != 2 {
		t.Fatalf("evidence = %+v, want job-a's latest status and charges", ev)
	}
	status, charges := ev[0], ev[1]
	if status.Record != "status" || status.Tool != "get_job" || !status.SeenAt.Equal(at(2*time.Minute)) {
		t.Errorf("status evidence = %+v, want get_job's answer seen at the second pass", status)
	}
	if status.Answer != `{"job_id":"job-a","status":"succeeded","finished_ns":1714800000000000000}` {
		t.Errorf("status answer = %s, want the provider's latest, as written", status.Answer)
	}
	if charges.Record != "charges" || !charges.SeenAt.Equal(at(time.Minute)) {
		t.Errorf("charges evidence = %+v, want list_charges's answer seen at the first pass", charges)
	}
	if md := string(r.Markdown()); !strings.Contains(md, "### Provider evidence") || !strings.Contains(md, "| `job-a` | status | `get_job` |") {
		t.Errorf("Markdown has no provider evidence:\n%s", md)
	}
	// The provider's numbers, however large, never stop a receipt from
	// being signed.
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := receipt.Sign(r, key, at(time.Hour)); err != nil {
		t.Errorf("signing a receipt whose evidence holds a large integer: %v", err)
	}
	if plain := receipt.Build(base()); plain.RemoteJobs[0].Evidence != nil || strings.Contains(string(plain.Markdown()), "Provider evidence") {
		t.Error("a receipt without recorded evidence shows some")
	}
}

func TestBuildLeavesInputAlone(t *testing.T) {
	in := duplicate()
	in.Attempts[0], in.Attempts[1] = in.Attempts[1], in.Attempts[0]
	in.RemoteJobs[0], in.RemoteJobs[1] = in.RemoteJobs[1], in.RemoteJobs[0]
	before, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	first := receipt.Build(in)
	after, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Error("Build modified its input")
	}
	a, _ := first.JSON()
	b, _ := receipt.Build(in).JSON()
	if string(a) != string(b) {
		t.Error("two builds of one input render differently")
	}
	if first.Lineage[0].RequestID != "req-first" || first.RemoteJobs[0].RemoteJobID != "hosted-suite-9912" {
		t.Errorf("lineage or jobs not in time order: %s, %s", first.Lineage[0].RequestID, first.RemoteJobs[0].RemoteJobID)
	}
}

func TestRenderFormats(t *testing.T) {
	r := receipt.Build(clean())
	for _, f := range []string{"yaml", "json", "md", "markdown", "YAML"} {
		if b, err := receipt.Render(r, f); err != nil || len(b) == 0 {
			t.Errorf("Render(%q) = %d bytes, %v", f, len(b), err)
		}
	}
	if _, err := receipt.Render(r, "pdf"); err == nil || !strings.Contains(err.Error(), "use yaml, json or md") {
		t.Errorf("Render(pdf) error = %v, want one naming the formats", err)
	}
}

func TestMarkdownEscapesCells(t *testing.T) {
	in := clean()
	in.Attempts[0].Reason = "a | b\nc"
	md := string(receipt.Build(in).Markdown())
	// The pipe cannot end the cell and the newline is shown, not kept.
	if !strings.Contains(md, `| a \| b\\nc |`) {
		t.Errorf("table cell not escaped:\n%s", md)
	}
}

// An operation that was sent, with no remote job known, is indeterminate
// unless something recorded since the latest send proves that it started
// nothing.
func TestSentWithoutKnownJob(t *testing.T) {
	sent := func(id int64, when time.Duration) *ledger.Event {
		return event(id, ledger.EventSendStarted, when, `{"send":1}`)
	}
	tests := []struct {
		name     string
		state    ledger.State
		accepted ledger.Knowledge // of the creating attempt
		events   []*ledger.Event
		want     receipt.ReconciliationStatus
	}{
		{
			name: "a lookup that found nothing proves nothing",
			events: []*ledger.Event{sent(1, time.Second),
				reconciled(2, time.Minute, `{"lookup":"answered","complete":true,"jobs":0}`)},
			want: receipt.ReconciliationIndeterminate,
		},
		{
			name:   "no reconciliation at all",
			events: []*ledger.Event{sent(1, time.Second)},
			want:   receipt.ReconciliationIndeterminate,
		},
		{
			name:   "still sending",
			state:  ledger.StateSending,
			events: []*ledger.Event{sent(1, time.Second)},
			want:   receipt.ReconciliationIndeterminate,
		},
		{
			name: "an authoritative lookup found nothing",
			events: []*ledger.Event{sent(1, time.Second),
				reconciled(2, time.Minute, `{"lookup":"answered","authoritative":true,"jobs":0}`)},
			want: receipt.ReconciliationComplete,
		},
		{
			name: "an authoritative lookup before a later send",
			events: []*ledger.Event{sent(1, time.Second),
				reconciled(2, time.Minute, `{"lookup":"answered","authoritative":true,"jobs":0}`), sent(3, 2*time.Minute)},
			want: receipt.ReconciliationIndeterminate,
		},
		{
			name: "the upstream refused the call before any work began",
			events: []*ledger.Event{sent(1, time.Second),
				event(2, ledger.EventFailed, 2*time.Second, `{"code":-32602,"message":"bad suite","nothing_started":true}`)},
			want: receipt.ReconciliationComplete,
		},
		{
			name: "a failure that may have started work",
			events: []*ledger.Event{sent(1, time.Second),
				event(2, ledger.EventFailed, 2*time.Second, `{"code":-32603,"message":"internal error"}`)},
			want: receipt.ReconciliationIndeterminate,
		},
		{
			name:   "the call never left the gateway",
			state:  ledger.StateCancelled,
			events: []*ledger.Event{sent(1, time.Second), event(2, ledger.EventLookup, 2*time.Second, `{"answer":"not_sent"}`)},
			want:   receipt.ReconciliationComplete,
		},
		{
			name:     "the creating attempt is known to have started nothing",
			accepted: ledger.No,
			events:   []*ledger.Event{sent(1, time.Second)},
			want:     receipt.ReconciliationComplete,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base()
			in.Operation.State = ledger.StateFailed
			if tt.state != "" {
				in.Operation.State = tt.state
			}
			in.Operation.SendCount = 1
			in.Attempts[0].RemoteAccepted = cmpOrKnowledge(tt.accepted, ledger.Unknown)
			in.RemoteJobs = nil
			in.Events = tt.events
			r := receipt.Build(in)
			if r.ReconciliationStatus != tt.want {
				t.Fatalf("reconciliation_status = %s, want %s", r.ReconciliationStatus, tt.want)
			}
			if tt.want == receipt.ReconciliationIndeterminate {
				if r.ReviewStatus != receipt.ReviewNeedsReview || !slices.ContainsFunc(r.NextActions, func(a receipt.NextAction) bool {
					return a.Action == receipt.ActionReconcileAgain && strings.Contains(a.Reason, "no remote job is known")
				}) {
					t.Errorf("review %s, next actions %+v; want needs_review and reconcile_again saying no remote job is known", r.ReviewStatus, r.NextActions)
				}
			}
		})
	}
}

func cmpOrKnowledge(k, alt ledger.Knowledge) ledger.Knowledge {
	if k == "" {
		return alt
	}
	return k
}

// The approval request an operation waited on shows who asked and who
// decided, from the ledger's request or else from its events.
func TestApprovalRequestLine(t *testing.T) {
	ev := func(id int64, kind ledger.EventKind, data string) *ledger.Event {
		return &ledger.Event{ID: id, Kind: kind, CreatedAt: at(time.Duration(id) * time.Minute), Data: json.RawMessage(data)}
	}
	requested := ev(1, ledger.EventApprovalRequested, `{"request_id":7,"requested_by":"api_key:3"}`)
	tests := []struct {
		name   string
		state  ledger.State
		events []*ledger.Event
		// request is the request that gave the approval, as the ledger
		// holds it; it wins over the events.
		request *ledger.ApprovalRequest
		want    *receipt.ApprovalRequestLine
	}{
		{"none", ledger.StateCompleted, nil, nil, nil},
		{"approved", ledger.StateCompleted, []*ledger.Event{requested, ev(2, ledger.EventApprovalRequestApproved, `{"request_id":7,"approver":"api_key:9","approval_id":4,"note":"ok"}`)}, nil,
			&receipt.ApprovalRequestLine{ID: 7, RequestedBy: "api_key:3", RequestedAt: at(time.Minute), Status: "approved", ApprovedBy: "api_key:9", Note: "ok", DecidedAt: at(2 * time.Minute)}},
		{"declined", ledger.StateFailed, []*ledger.Event{requested, ev(2, ledger.EventApprovalRequestDeclined, `{"request_id":7,"approver":"jwt:dana"}`)}, nil,
			&receipt.ApprovalRequestLine{ID: 7, RequestedBy: "api_key:3", RequestedAt: at(time.Minute), Status: "declined", DeclinedBy: "jwt:dana", DecidedAt: at(2 * time.Minute)}},
		{"expired", ledger.StateFailed, []*ledger.Event{requested, ev(2, ledger.EventApprovalRequestExpired, `{"request_id":7}`)}, nil,
			&receipt.ApprovalRequestLine{ID: 7, RequestedBy: "api_key:3", RequestedAt: at(time.Minute), Status: "expired", DecidedAt: at(2 * time.Minute)}},
		{"pending", ledger.StateAwaitingApproval, []*ledger.Event{requested}, nil, &receipt.ApprovalRequestLine{ID: 7, RequestedBy: "api_key:3", RequestedAt: at(time.Minute), Status: "pending"}},
		{"approved for a client without tasks", ledger.StateCompleted, nil,
			&ledger.ApprovalRequest{ID: 8, RequestedBy: "api_key:3", Status: ledger.RequestApproved, CreatedAt: at(time.Minute),
				DecidedAt: at(3 * time.Minute), DecidedBy: "jwt:dana", Note: "budget checked"},
			&receipt.ApprovalRequestLine{ID: 8, RequestedBy: "api_key:3", RequestedAt: at(time.Minute), Status: "approved", ApprovedBy: "jwt:dana",
				Note: "budget checked", DecidedAt: at(3 * time.Minute)}},
		{"declined, by the ledger", ledger.StateFailed, []*ledger.Event{requested},
			&ledger.ApprovalRequest{ID: 7, RequestedBy: "api_key:3", Status: ledger.RequestDeclined, CreatedAt: at(time.Minute),
				DecidedAt: at(2 * time.Minute), DecidedBy: "jwt:dana"},
			&receipt.ApprovalRequestLine{ID: 7, RequestedBy: "api_key:3", RequestedAt: at(time.Minute), Status: "declined", DeclinedBy: "jwt:dana",
				DecidedAt: at(2 * time.Minute)}},
		{"cancelled while pending", ledger.StateCancelled, []*ledger.Event{requested}, nil, &receipt.ApprovalRequestLine{ID: 7, RequestedBy: "api_key:3", RequestedAt: at(time.Minute), Status: "cancelled"}},
	}
	for _, tt := range tests {
		in := base()
		in.Operation.State = tt.state
		in.Events = tt.events
		in.ApprovalRequest = tt.request
		got := receipt.Build(in).ApprovalRequest
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: approval request = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
