package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/api"
	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

// waiting accepts a call of acme's that waits for an approval and returns
// its operation and request.
func waiting(t *testing.T, f *fixture, opID string) (*ledger.Operation, *ledger.ApprovalRequest) {
	t.Helper()
	args := json.RawMessage(`{"suite":"` + opID + `","token":"hunter2"}`)
	fp, err := canon.Compute("hosted_test", "run_suite", args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.store.Accept(context.Background(), &ledger.AcceptParams{
		Tenant: "acme", OperationID: opID, Upstream: "hosted_test", Tool: "run_suite", Fingerprint: string(fp), Arguments: args,
		RequestID: ledger.NewRequestID(), TaskID: ledger.NewTaskID(), Source: "test", SecretArguments: []string{"token"}, Now: clock(),
		Approval: ledger.ApprovalRequirement{Required: true, Estimate: money.MustParse("12.00", "USD"), RemoteJobs: 2,
			Request: ledger.RequestWait, RequestTTL: time.Hour, RequestedBy: "api_key:1"},
	})
	if err != nil || res.Request == nil {
		t.Fatalf("Accept = %+v, %v; want a waiting operation", res, err)
	}
	return res.Operation, res.Request
}

func requests(t *testing.T, r response) []api.ApprovalRequestView {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("list: status %d %s, want 200", r.status, r.body)
	}
	var l struct {
		ApprovalRequests []api.ApprovalRequestView `json:"approval_requests"`
	}
	if err := json.Unmarshal(r.body, &l); err != nil {
		t.Fatal(err)
	}
	return l.ApprovalRequests
}

func decided(t *testing.T, r response) api.ApprovalRequestDecided {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("decision: status %d %s, want 200", r.status, r.body)
	}
	var d api.ApprovalRequestDecided
	if err := json.Unmarshal(r.body, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestApprovalRequests(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	op, req := waiting(t, f, "op-wait")
	path := "/v1/approval-requests/" + strconv.FormatInt(req.ID, 10)

	got := requests(t, f.do(t, http.MethodGet, "/v1/approval-requests", f.acme, ""))
	if len(got) != 1 || got[0].ID != req.ID || got[0].Estimate != "12.00" || got[0].RemoteJobs != 2 || !got[0].OperationWaits ||
		got[0].Status != "pending" || strings.Contains(string(got[0].Arguments), "hunter2") {
		t.Fatalf("pending requests = %+v", got)
	}
	if other := requests(t, f.do(t, http.MethodGet, "/v1/approval-requests", f.other, "")); len(other) != 0 {
		t.Fatalf("another tenant sees %+v", other)
	}
	if code, _, field := apiError(t, f.do(t, http.MethodGet, "/v1/approval-requests?status=maybe", f.acme, "")); code != api.CodeInvalidRequest || field != "status" {
		t.Fatalf("?status=maybe: %s %s", code, field)
	}

	// Only an approver of the request's tenant decides it.
	if r := f.do(t, http.MethodPost, path+"/approve", f.acme, `{}`); r.status != http.StatusForbidden {
		t.Fatalf("agent approve: %d %s, want 403", r.status, r.body)
	}
	if r := f.do(t, http.MethodPost, path+"/approve", f.otherApprover, `{}`); r.status != http.StatusNotFound {
		t.Fatalf("another tenant's approve: %d %s, want 404", r.status, r.body)
	}
	// Terms short of the route change nothing and name the term.
	r := f.do(t, http.MethodPost, path+"/approve", f.acmeApprover, `{"max_total_cost": "5.00"}`)
	if code, msg, field := apiError(t, r); r.status != http.StatusBadRequest || code != api.CodeInvalidRequest || field != "max_total_cost" {
		t.Fatalf("short ceiling: %d %s %s %q", r.status, code, field, msg)
	}
	r = f.do(t, http.MethodPost, path+"/approve", f.acmeApprover, `{"max_remote_jobs": 1}`)
	if _, _, field := apiError(t, r); r.status != http.StatusBadRequest || field != "max_remote_jobs" {
		t.Fatalf("short job limit: %d %s", r.status, field)
	}

	// The defaults approve the request's route.
	d := decided(t, f.do(t, http.MethodPost, path+"/approve", f.acmeApprover, `{"note": "looks right"}`))
	if d.ApprovalRequest.Status != "approved" || d.Approval == nil || d.Approval.MaxTotalCost != "12.00" || d.Approval.MaxRemoteJobs != 2 ||
		d.Approval.OperationID != "op-wait" || d.Approval.Tool != "hosted_test.run_suite" || !d.Approval.ExpiresAt.Equal(clock().Add(24*time.Hour)) ||
		!strings.HasPrefix(d.Approval.CreatedBy, "api_key:") || d.ApprovalRequest.DecidedBy != d.Approval.CreatedBy || d.ApprovalRequest.Note != "looks right" {
		t.Fatalf("approved = %+v / %+v", d.ApprovalRequest, d.Approval)
	}
	now, err := f.store.OperationGet(ctx, &ledger.OperationGetParams{ID: op.ID})
	if err != nil || now.State != ledger.StateAccepted || now.ApprovalID != d.Approval.ID {
		t.Fatalf("operation = %+v, %v; want accepted under approval %d", now, err, d.Approval.ID)
	}
	r = f.do(t, http.MethodPost, path+"/decline", f.acmeApprover, `{"note": "too late"}`)
	if code, _, _ := apiError(t, r); r.status != http.StatusConflict || code != api.CodeConflict {
		t.Fatalf("decline after approve: %d %s, want 409 conflict", r.status, r.body)
	}
	if pending := requests(t, f.do(t, http.MethodGet, "/v1/approval-requests", f.acme, "")); len(pending) != 0 {
		t.Fatalf("pending after approval = %+v", pending)
	}
	if all := requests(t, f.do(t, http.MethodGet, "/v1/approval-requests?status=all", f.acme, "")); len(all) != 1 {
		t.Fatalf("every request = %+v", all)
	}

	// A decline ends the waiting operation failed.
	op2, req2 := waiting(t, f, "op-decline")
	d = decided(t, f.do(t, http.MethodPost, "/v1/approval-requests/"+strconv.FormatInt(req2.ID, 10)+"/decline", f.acmeApprover, `{"note": "not this week"}`))
	if d.ApprovalRequest.Status != "declined" || d.Approval != nil || d.ApprovalRequest.Note != "not this week" {
		t.Fatalf("declined = %+v", d)
	}
	if got, err := f.store.OperationGet(ctx, &ledger.OperationGetParams{ID: op2.ID}); err != nil || got.State != ledger.StateFailed ||
		!strings.Contains(string(got.Error), ledger.ReasonApprovalDeclined) {
		t.Fatalf("declined operation = %+v, %v", got, err)
	}
	if r := f.do(t, http.MethodPost, "/v1/approval-requests/0/decline", f.acmeApprover, `{}`); r.status != http.StatusBadRequest {
		t.Fatalf("request 0: %d", r.status)
	}
	if r := f.do(t, http.MethodDelete, path, f.acmeApprover, ""); r.status != http.StatusMethodNotAllowed {
		t.Fatalf("DELETE: %d", r.status)
	}
}
