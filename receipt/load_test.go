package receipt_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/sqlite/sqlitetest"
	"github.com/taskgate/taskgate/receipt"
)

func acceptCall(t *testing.T, s ledger.Store, key, requestID string, now time.Time) *ledger.AcceptResult {
	t.Helper()
	args := json.RawMessage(`{"suite":"settlement"}`)
	fp, err := canon.Compute("hosted_test", "run_suite", args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Accept(context.Background(), &ledger.AcceptParams{
		Tenant: "acme", OperationID: key, Upstream: "hosted_test", Tool: "run_suite", Fingerprint: string(fp),
		Arguments: args, RequestID: requestID, TaskID: ledger.NewTaskID(), Source: "test", RetryPolicy: "lookup_then_attach",
		Approval: ledger.ApprovalRequirement{Required: true, Estimate: usd("18.00")}, Now: now,
	})
	if err != nil {
		t.Fatalf("Accept(%s, %s): %v", key, requestID, err)
	}
	return res
}

// TestLoad builds a receipt from a real SQLite ledger: a created attempt
// whose client disconnected, an attached retry, and a retry under a new
// operation ID that the approval denied.
func TestLoad(t *testing.T) {
	ctx := context.Background()
	s := sqlitetest.Open(t)
	now := time.Now().UTC()
	a, err := s.ApprovalCreate(ctx, &ledger.Approval{
		Tenant: "acme", OperationID: "settlement-regression-842", Tool: "hosted_test.run_suite",
		MaxTotalCost: usd("20.00"), MaxRemoteJobs: 1, RetryPolicy: "lookup_then_attach", ExpiresAt: now.Add(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	created := acceptCall(t, s, "settlement-regression-842", "req-first", now)
	if created.Decision != ledger.DecisionCreated {
		t.Fatalf("first call: %s (%s)", created.Decision, created.Reason)
	}
	if err := s.AttemptSetClientResult(ctx, "req-first", ledger.ClientDisconnected); err != nil {
		t.Fatal(err)
	}
	if res := acceptCall(t, s, "settlement-regression-842", "req-retry", now.Add(time.Second)); res.Decision != ledger.DecisionAttached {
		t.Fatalf("retry: %s (%s)", res.Decision, res.Reason)
	}
	if res := acceptCall(t, s, "settlement-regression-842-again", "req-new-key", now.Add(2*time.Second)); res.Reason != ledger.ReasonRetryUsesNewOperation {
		t.Fatalf("retry under a new operation ID: %s (%s)", res.Decision, res.Reason)
	}
	op, err := s.OperationGet(ctx, &ledger.OperationGetParams{Tenant: "acme", OperationID: "settlement-regression-842"})
	if err != nil {
		t.Fatal(err)
	}

	in, err := receipt.Load(ctx, s, op, &receipt.LoadOptions{Priced: true, Now: now.Add(time.Minute)})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if in.Approval == nil || in.Approval.ID != a.ID || len(in.Reservations) != 1 || !in.Priced {
		t.Fatalf("loaded approval %+v, %d reservations, priced %v; want approval %d, 1 reservation, priced", in.Approval, len(in.Reservations), in.Priced, a.ID)
	}
	r := receipt.Build(in)
	if r.Attempts != 2 || r.AttachedAttempts != 1 || r.DeniedAttempts != 1 || len(r.Lineage) != 3 {
		t.Errorf("attempts, attached, denied, lineage = %d, %d, %d, %d; want 2, 1, 1, 3", r.Attempts, r.AttachedAttempts, r.DeniedAttempts, len(r.Lineage))
	}
	if r.Approval.HeadroomUSD.String() != "2.00" || r.Approval.RemoteJobsHeadroom != 0 {
		t.Errorf("headroom = %s, %d jobs; want 2.00, 0 (the 18.00 estimate and one job are reserved)", r.Approval.HeadroomUSD, r.Approval.RemoteJobsHeadroom)
	}
	if c := r.Cancellation; c == nil || !c.ClientStoppedWatching || c.CancellationRequested {
		t.Errorf("cancellation = %+v, want the client stopped watching and nothing cancelled", c)
	}
	// Nothing has been sent yet: more may happen, so the receipt is open.
	if r.ReconciliationStatus != receipt.ReconciliationIncomplete || r.ReviewStatus != receipt.ReviewNeedsReview {
		t.Errorf("status = %s/%s, want incomplete/needs_review", r.ReconciliationStatus, r.ReviewStatus)
	}
	if b, err := r.JSON(); err != nil || len(b) == 0 {
		t.Errorf("JSON() = %d bytes, %v", len(b), err)
	}

	t.Run("an approval missing from the ledger is an error", func(t *testing.T) {
		lost := *op
		lost.ApprovalID = a.ID + 1000
		if _, err := receipt.Load(ctx, s, &lost, nil); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("Load with an unknown approval: %v, want ErrNotFound", err)
		}
	})
	t.Run("an operation without approval loads none", func(t *testing.T) {
		bare := *op
		bare.ApprovalID = 0
		in, err := receipt.Load(ctx, s, &bare, nil)
		if err != nil {
			t.Fatal(err)
		}
		if in.Approval != nil || in.Reservations != nil || in.Now.IsZero() {
			t.Errorf("approval %v, reservations %v, now %v; want none, none and the current time", in.Approval, in.Reservations, in.Now)
		}
	})
}

// TestLoadRefusedWhileWaiting builds the receipt of a call whose client
// cannot take a task: refused approval_required, its approval request
// approved with a note, then retried. The operation exists only from the
// retry, so the request and the refusal are read from the ledger, not from
// the operation's events.
func TestLoadRefusedWhileWaiting(t *testing.T) {
	ctx := context.Background()
	s := sqlitetest.Open(t)
	now := time.Now().UTC().Truncate(time.Second)
	args := json.RawMessage(`{"suite":"settlement"}`)
	fp, err := canon.Compute("hosted_test", "run_suite", args)
	if err != nil {
		t.Fatal(err)
	}
	call := func(requestID string, at time.Time) *ledger.AcceptResult {
		res, err := s.Accept(ctx, &ledger.AcceptParams{
			Tenant: "acme", OperationID: "op-waited", Upstream: "hosted_test", Tool: "run_suite", Fingerprint: string(fp),
			Arguments: args, RequestID: requestID, TaskID: ledger.NewTaskID(), Source: "test", RetryPolicy: "lookup_then_attach",
			Approval: ledger.ApprovalRequirement{Required: true, Estimate: usd("18.00"), Request: ledger.RequestRecord,
				RequestTTL: time.Hour, RequestedBy: "api_key:1"},
			Now: at,
		})
		if err != nil {
			t.Fatalf("Accept(%s): %v", requestID, err)
		}
		return res
	}
	refused := call("req-refused", now)
	if refused.Decision != ledger.DecisionDenied || refused.Request == nil {
		t.Fatalf("first call = %s %q, request %+v; want denied naming a request", refused.Decision, refused.Reason, refused.Request)
	}
	// Another call's refusal under its own operation ID is not this one's.
	if res := acceptCall(t, s, "op-other", "req-other", now.Add(time.Second)); res.Decision != ledger.DecisionDenied {
		t.Fatalf("other call = %s, want denied", res.Decision)
	}
	decided, err := s.ApprovalRequestDecide(ctx, &ledger.ApprovalRequestDecision{
		Tenant: "acme", ID: refused.Request.ID, Outcome: ledger.RequestApproved, By: "api_key:9", Note: "budget checked with finance",
		Approval: &ledger.Approval{MaxTotalCost: usd("20.00"), MaxRemoteJobs: 1, ExpiresAt: now.Add(time.Hour)}, Now: now.Add(time.Minute),
	})
	if err != nil {
		t.Fatal(err)
	}
	ran := call("req-ran", now.Add(2*time.Minute))
	if ran.Decision != ledger.DecisionCreated {
		t.Fatalf("retry after approval = %s %q, want created", ran.Decision, ran.Reason)
	}

	in, err := receipt.Load(ctx, s, ran.Operation, &receipt.LoadOptions{Now: now.Add(time.Hour)})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	r := receipt.Build(in)
	if r.Attempts != 1 || r.DeniedAttempts != 1 || len(r.Lineage) != 2 {
		t.Fatalf("attempts, denied, lineage = %d, %d, %d; want 1, 1, 2", r.Attempts, r.DeniedAttempts, len(r.Lineage))
	}
	if l := r.Lineage[0]; l.RequestID != "req-refused" || l.Decision != "denied" || l.Reason != ledger.ReasonApprovalRequired {
		t.Errorf("first lineage line = %+v; want the refused attempt, approval_required", l)
	}
	want := &receipt.ApprovalRequestLine{ID: refused.Request.ID, RequestedBy: "api_key:1", RequestedAt: now, Status: "approved",
		ApprovedBy: "api_key:9", Note: "budget checked with finance", DecidedAt: now.Add(time.Minute)}
	if got := r.ApprovalRequest; got == nil || *got != *want {
		t.Errorf("approval request = %+v\nwant %+v", got, want)
	}
	if r.Approval == nil || r.Approval.ID != decided.Approval.ID {
		t.Errorf("approval = %+v, want approval %d", r.Approval, decided.Approval.ID)
	}
}

// TestLoadNamesTheBudget: a receipt of an operation a budget admitted
// names the budget, what the operation settled against it, and its
// breach.
func TestLoadNamesTheBudget(t *testing.T) {
	ctx := context.Background()
	s := sqlitetest.Open(t)
	now := time.Now().UTC()
	b, err := s.BudgetCreate(ctx, &ledger.Budget{Tenant: "acme", ToolPrefix: "hosted_test.", MaxTotalCost: usd("20.00"), MaxRemoteJobs: 5,
		Period: ledger.BudgetPeriodDay, TimeZone: "UTC", ExpiresAt: now.Add(24 * time.Hour), CreatedBy: "api_key:2"})
	if err != nil {
		t.Fatal(err)
	}
	res := acceptCall(t, s, "nightly-1", "req-1", now)
	if res.Decision != ledger.DecisionCreated {
		t.Fatalf("call: %s (%s)", res.Decision, res.Message)
	}
	op, err := s.Transition(ctx, &ledger.TransitionParams{OperationRef: res.Operation.ID,
		Reservation: &ledger.ReservationUpdate{Status: ledger.ReservationSettled, Settled: usd("21.50")}})
	if err != nil {
		t.Fatal(err)
	}
	in, err := receipt.Load(ctx, s, op, &receipt.LoadOptions{Now: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	r := receipt.Build(in)
	if len(r.Budgets) != 1 || r.Budgets[0].ID != b.ID || r.Budgets[0].ToolPrefix != "hosted_test." || r.Budgets[0].Period != "day" ||
		r.Budgets[0].Status != "settled" || r.Budgets[0].Reserved.String() != "21.50" || !r.Budgets[0].Breached {
		t.Fatalf("receipt budgets = %+v, want budget %d settled at 21.50 and breached", r.Budgets, b.ID)
	}
	if r.Approval == nil || r.Approval.ApprovedBy != fmt.Sprintf("budget:%d", b.ID) {
		t.Fatalf("receipt approval = %+v, want one given by budget %d", r.Approval, b.ID)
	}
	md, err := receipt.Render(r, "md")
	if err != nil || !strings.Contains(string(md), fmt.Sprintf("covered by budget | #%d: up to 20.00 USD", b.ID)) {
		t.Fatalf("markdown %s, %v; want a row naming the budget", md, err)
	}
}
