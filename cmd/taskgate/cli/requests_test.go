package cli_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/api"
	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

// waitingCall records a call of acme's to run_suite with suite that waits
// for an approval, and returns its approval request.
func waitingCall(t *testing.T, s ledger.Store, opID, suite string) *ledger.ApprovalRequest {
	t.Helper()
	args := json.RawMessage(`{"suite":"` + suite + `"}`)
	fp, err := canon.Compute("hosted_test", "run_suite", args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Accept(context.Background(), &ledger.AcceptParams{
		Tenant: "acme", OperationID: opID, Upstream: "hosted_test", Tool: "run_suite", Fingerprint: string(fp), Arguments: args,
		RequestID: ledger.NewRequestID(), TaskID: ledger.NewTaskID(), Source: "test",
		Approval: ledger.ApprovalRequirement{Required: true, Estimate: money.MustParse("12.00", "USD"),
			Request: ledger.RequestWait, RequestTTL: time.Hour, RequestedBy: "api_key:1"},
	})
	if err != nil || res.Request == nil {
		t.Fatalf("Accept = %+v, %v; want a waiting operation", res, err)
	}
	return res.Request
}

func TestApprovalRequestsListApproveDecline(t *testing.T) {
	l := newLedger(t)
	first := waitingCall(t, l.store, "op-first", "settlement")
	second := waitingCall(t, l.store, "op-second", "smoke")

	out := l.ok(t, "approval-requests", "list", "--tenant", "acme")
	for _, want := range []string{"op-first", "op-second", "12.00 USD", "api_key:1", "pending"} {
		if !strings.Contains(out, want) {
			t.Errorf("approval-requests list printed\n%s\nwant %q", out, want)
		}
	}
	if r := l.run(t, "approval-requests", "approve", strconv.FormatInt(first.ID, 10), "--tenant", "acme", "--max-total-cost", "5.00"); r.code == 0 ||
		!strings.Contains(r.stderr, "ceiling") || !strings.Contains(r.stderr, "--max-total-cost 12.00") {
		t.Errorf("approving for less than the estimate: exit %d, stderr %s; want a usage error about the ceiling with a command that covers it", r.code, r.stderr)
	}
	out = l.ok(t, "approval-requests", "approve", strconv.FormatInt(first.ID, 10), "--tenant", "acme", "--note", "checked", "--json")
	var d api.ApprovalRequestDecided
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("approve --json printed %q: %v", out, err)
	}
	if d.ApprovalRequest.Status != "approved" || d.Approval == nil || d.Approval.MaxTotalCost != "12.00" ||
		!strings.HasPrefix(d.ApprovalRequest.DecidedBy, "cli:") || d.Approval.CreatedBy != d.ApprovalRequest.DecidedBy {
		t.Errorf("approve --json = %+v / %+v", d.ApprovalRequest, d.Approval)
	}
	op, err := l.store.OperationGet(context.Background(), &ledger.OperationGetParams{Tenant: "acme", OperationID: "op-first"})
	if err != nil || op.State != ledger.StateAccepted {
		t.Fatalf("approved operation = %+v, %v; want accepted", op, err)
	}

	out = l.ok(t, "approval-requests", "decline", strconv.FormatInt(second.ID, 10), "--tenant", "acme", "--note", "not now")
	if !strings.Contains(out, "declined") || !strings.Contains(out, "nothing was started") {
		t.Errorf("decline printed %q", out)
	}
	if r := l.run(t, "approval-requests", "decline", strconv.FormatInt(second.ID, 10), "--tenant", "acme"); r.code == 0 || !strings.Contains(r.stderr, "declined") {
		t.Errorf("declining twice: exit %d, stderr %s; want a failure saying it was declined", r.code, r.stderr)
	}
	if r := l.run(t, "approval-requests", "approve", strconv.FormatInt(second.ID, 10), "--tenant", "globex"); r.code == 0 || !strings.Contains(r.stderr, "no approval request") {
		t.Errorf("another tenant's request: exit %d, stderr %s; want a usage error", r.code, r.stderr)
	}
	if out := l.ok(t, "approval-requests", "list", "--tenant", "acme"); strings.Contains(out, "op-first") || strings.Contains(out, "op-second") {
		t.Errorf("pending after the decisions:\n%s", out)
	}
	all := l.ok(t, "approval-requests", "list", "--tenant", "acme", "--status", "all")
	if !strings.Contains(all, "approved") || !strings.Contains(all, "declined") {
		t.Errorf("--status all printed\n%s", all)
	}
}

// TestReceiptOfACallApprovedOnRequest: a client that cannot take a task is
// refused, naming an approval request; an approver approves it on the
// command line with a note, and the client's retry runs. The receipt names
// the request, who asked and when, who approved it and their note, and
// counts the refused attempt.
func TestReceiptOfACallApprovedOnRequest(t *testing.T) {
	l := newLedger(t)
	args := json.RawMessage(`{"suite":"settlement"}`)
	fp, err := canon.Compute("hosted_test", "run_suite", args)
	if err != nil {
		t.Fatal(err)
	}
	call := func() *ledger.AcceptResult {
		t.Helper()
		res, err := l.store.Accept(context.Background(), &ledger.AcceptParams{
			Tenant: "acme", OperationID: "op-plain", Upstream: "hosted_test", Tool: "run_suite", Fingerprint: string(fp), Arguments: args,
			RequestID: ledger.NewRequestID(), TaskID: ledger.NewTaskID(), Source: "mcp/2025-03-26",
			Approval: ledger.ApprovalRequirement{Required: true, Estimate: money.MustParse("12.00", "USD"),
				Request: ledger.RequestRecord, RequestTTL: time.Hour, RequestedBy: "api_key:1"},
		})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	refused := call()
	if refused.Decision != ledger.DecisionDenied || refused.Request == nil {
		t.Fatalf("first call = %s %q; want denied, naming a request", refused.Decision, refused.Reason)
	}
	l.ok(t, "approval-requests", "approve", strconv.FormatInt(refused.Request.ID, 10), "--tenant", "acme", "--note", "finance agreed")
	if ran := call(); ran.Decision != ledger.DecisionCreated {
		t.Fatalf("retry after the approval = %s %q; want created", ran.Decision, ran.Reason)
	}
	out := l.ok(t, "receipt", "op-plain", "--tenant", "acme", "--format", "json")
	var doc struct {
		Receipt struct {
			Attempts        int `json:"attempts"`
			DeniedAttempts  int `json:"denied_attempts"`
			ApprovalRequest *struct {
				ID          int64  `json:"id"`
				RequestedBy string `json:"requested_by"`
				RequestedAt string `json:"requested_at"`
				Status      string `json:"status"`
				ApprovedBy  string `json:"approved_by"`
				Note        string `json:"note"`
			} `json:"approval_request"`
		} `json:"paid_tool_retry_receipt"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("receipt --format json printed %q: %v", out, err)
	}
	r := doc.Receipt
	q := r.ApprovalRequest
	if r.Attempts != 1 || r.DeniedAttempts != 1 || q == nil || q.ID != refused.Request.ID || q.RequestedBy != "api_key:1" || q.RequestedAt == "" ||
		q.Status != "approved" || !strings.HasPrefix(q.ApprovedBy, "cli:") || q.Note != "finance agreed" {
		t.Errorf("receipt = %s; want 1 attempt, 1 denied, and approval request %d requested by api_key:1, approved on the command line with its note", out, refused.Request.ID)
	}
}
