package mcpserver_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/api"
	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/taskwire"
)

// approveBy rewrites the harness's configuration so that its
// approval-gated tools allow the approval ways in list (YAML flow style).
func approveBy(list string) func(string) string {
	return func(y string) string {
		return strings.ReplaceAll(y, "        approval: required\n", "        approval: required\n        approve_by: "+list+"\n")
	}
}

// approverREST calls the gateway's REST API as an approver of acme.
type approverREST struct {
	t     *testing.T
	h     *fixtures.Harness
	key   string
	keyID int64
}

func newApprover(t *testing.T, h *fixtures.Harness) *approverREST {
	t.Helper()
	key, k, err := authn.NewAPIKeyWithRole(testCtx(t), h.Store, "acme", "approver", ledger.RoleApprover)
	if err != nil {
		t.Fatal(err)
	}
	return &approverREST{t: t, h: h, key: key, keyID: k.ID}
}

func (a *approverREST) credential() string { return fmt.Sprintf("api_key:%d", a.keyID) }

func (a *approverREST) do(method, path, body string) (int, []byte) {
	a.t.Helper()
	req, err := http.NewRequestWithContext(testCtx(a.t), method, strings.TrimSuffix(a.h.MCPURL(), "/mcp")+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	return resp.StatusCode, b
}

// pending is the one pending approval request of opID, as an approver
// sees it.
func (a *approverREST) pending(opID string) api.ApprovalRequestView {
	a.t.Helper()
	status, body := a.do(http.MethodGet, "/v1/approval-requests", "")
	var l struct {
		ApprovalRequests []api.ApprovalRequestView `json:"approval_requests"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &l) != nil {
		a.t.Fatalf("GET /v1/approval-requests: %d %s", status, body)
	}
	for _, q := range l.ApprovalRequests {
		if q.OperationID == opID {
			return q
		}
	}
	a.t.Fatalf("no pending approval request for %s in %s", opID, body)
	return api.ApprovalRequestView{}
}

func (a *approverREST) decide(id int64, verb, body string) {
	a.t.Helper()
	if status, b := a.do(http.MethodPost, fmt.Sprintf("/v1/approval-requests/%d/%s", id, verb), body); status != http.StatusOK {
		a.t.Fatalf("%s request %d: %d %s", verb, id, status, b)
	}
}

// receipt is acme's receipt of opID as JSON.
func (a *approverREST) receipt(opID string) string {
	a.t.Helper()
	status, body := a.do(http.MethodGet, "/v1/operations/"+opID+"/receipt?format=json", "")
	if status != http.StatusOK {
		a.t.Fatalf("receipt of %s: %d %s", opID, status, body)
	}
	return string(body)
}

// reasonOf is the data.reason of a JSON-RPC error.
func reasonOf(t *testing.T, err error) (string, json.RawMessage) {
	t.Helper()
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) {
		t.Fatalf("error = %v, want a JSON-RPC error", err)
	}
	var data struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(rpcErr.Data, &data)
	return data.Reason, rpcErr.Data
}

// failedWith reads why a failed task failed, as the client of its era
// learns it: from the task (2026-07-28) or from tasks/result (2025-11-25).
func failedWith(t *testing.T, cs *mcp.ClientSession, era fixtures.Era, task *taskwire.Task) string {
	t.Helper()
	if task.Status != taskwire.StatusFailed {
		t.Fatalf("task = %s %q; want failed", task.Status, task.StatusMessage)
	}
	if era == fixtures.EraLegacy {
		_, err := taskwire.TaskResult(testCtx(t), cs, task.ID)
		reason, _ := reasonOf(t, err)
		return reason
	}
	if task.Error == nil {
		t.Fatalf("failed task without an error: %+v", task)
	}
	var data struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(task.Error.Data, &data)
	return data.Reason
}

var taskEras = []fixtures.Era{fixtures.EraExtension, fixtures.EraLegacy}

// A call without an approval, from a client that takes a task, waits for
// one: retries attach, nothing reaches the provider, and once an approver
// approves through the REST API the one job runs and the receipt names
// the approver.
func TestApprovalRequestApprovedRuns(t *testing.T) {
	for _, era := range taskEras {
		t.Run(string(era), func(t *testing.T) {
			h := harness(t, &fixtures.Options{Config: fixtures.ConfigOptions{Approval: true}})
			cs := connect(t, h, "acme", era)
			ctx := testCtx(t)
			task, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall("op-wait", nil), nil)
			if err != nil || task == nil {
				t.Fatalf("tools/call = %v, %v; want a task", task, err)
			}
			if task.Status != taskwire.StatusWorking || !strings.Contains(task.StatusMessage, "approval request") ||
				!strings.Contains(task.StatusMessage, "/v1/approval-requests/") {
				t.Fatalf("task = %s %q; want working, saying it waits for an approval request and where", task.Status, task.StatusMessage)
			}
			again, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall("op-wait", nil), nil)
			if err != nil || again == nil || again.ID != task.ID {
				t.Fatalf("retry while waiting = %v, %v; want task %s", again, err, task.ID)
			}
			_, _, err = taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall("op-other", nil), nil)
			if reason, data := reasonOf(t, err); reason != ledger.ReasonRetryUsesNewOperation {
				t.Fatalf("same arguments under a new operation ID: %s", data)
			}

			ap := newApprover(t, h)
			q := ap.pending("op-wait")
			if !q.OperationWaits || q.Tool != fixtures.RunSuiteTool || q.Estimate == "" || q.RequestedBy == "" {
				t.Fatalf("approval request = %+v", q)
			}
			if n := len(h.Sim.Jobs()); n != 0 {
				t.Fatalf("provider jobs before the approval = %d, want 0", n)
			}
			ap.decide(q.ID, "approve", `{"note": "go ahead"}`)

			done := awaitTask(t, cs, task.ID)
			if done.Status != taskwire.StatusCompleted {
				t.Fatalf("task after the approval = %s %q", done.Status, done.StatusMessage)
			}
			if n := len(h.Sim.Jobs()); n != 1 {
				t.Fatalf("provider jobs = %d, want 1", n)
			}
			receipt := ap.receipt("op-wait")
			for _, want := range []string{`"approved_by": "` + ap.credential() + `"`, fmt.Sprintf(`"id": %d`, q.ID), `"note": "go ahead"`} {
				if !strings.Contains(receipt, want) {
					t.Errorf("the receipt lacks %s:\n%s", want, receipt)
				}
			}
		})
	}
}

// A declined request ends the task failed approval_declined, and the
// provider never hears of it.
func TestApprovalRequestDeclined(t *testing.T) {
	for _, era := range taskEras {
		t.Run(string(era), func(t *testing.T) {
			h := harness(t, &fixtures.Options{Config: fixtures.ConfigOptions{Approval: true}})
			cs := connect(t, h, "acme", era)
			task, _, err := taskwire.CallToolAsTask(testCtx(t), cs, fixtures.RunSuiteCall("op-no", nil), nil)
			if err != nil || task == nil {
				t.Fatalf("tools/call = %v, %v; want a task", task, err)
			}
			ap := newApprover(t, h)
			ap.decide(ap.pending("op-no").ID, "decline", `{"note": "not this week"}`)
			done := awaitTask(t, cs, task.ID)
			if reason := failedWith(t, cs, era, done); reason != ledger.ReasonApprovalDeclined {
				t.Fatalf("task failed with %q, want %s", reason, ledger.ReasonApprovalDeclined)
			}
			if n := len(h.Sim.Jobs()); n != 0 {
				t.Fatalf("provider jobs = %d, want 0", n)
			}
			if receipt := ap.receipt("op-no"); !strings.Contains(receipt, `"declined_by": "`+ap.credential()+`"`) {
				t.Errorf("the receipt does not name who declined:\n%s", receipt)
			}
		})
	}
}

// A request nobody decides expires: the task fails
// approval_request_expired, with nothing started.
func TestApprovalRequestExpires(t *testing.T) {
	for _, era := range taskEras {
		t.Run(string(era), func(t *testing.T) {
			h := harness(t, &fixtures.Options{Config: fixtures.ConfigOptions{Approval: true},
				EditConfig: func(y string) string { return "approval_request_ttl: 500ms\n" + y }})
			cs := connect(t, h, "acme", era)
			task, _, err := taskwire.CallToolAsTask(testCtx(t), cs, fixtures.RunSuiteCall("op-late", nil), nil)
			if err != nil || task == nil {
				t.Fatalf("tools/call = %v, %v; want a task", task, err)
			}
			done := awaitTask(t, cs, task.ID)
			if reason := failedWith(t, cs, era, done); reason != ledger.ReasonApprovalRequestExpired {
				t.Fatalf("task failed with %q, want %s", reason, ledger.ReasonApprovalRequestExpired)
			}
			if n := len(h.Sim.Jobs()); n != 0 {
				t.Fatalf("provider jobs = %d, want 0", n)
			}
			// Approving too late changes nothing.
			ap := newApprover(t, h)
			list, err := h.Store.ApprovalRequestList(testCtx(t), &ledger.ApprovalRequestListParams{Tenant: "acme"})
			if err != nil || len(list) != 1 || list[0].Status != ledger.RequestExpired {
				t.Fatalf("requests = %+v, %v; want one expired", list, err)
			}
			if status, body := ap.do(http.MethodPost, fmt.Sprintf("/v1/approval-requests/%d/approve", list[0].ID), `{}`); status != http.StatusConflict {
				t.Fatalf("approving an expired request: %d %s, want 409", status, body)
			}
		})
	}
}

// Cancelling a waiting task cancels its request: nothing starts, and a
// late approval changes nothing.
func TestCancelledWhileWaiting(t *testing.T) {
	h := harness(t, &fixtures.Options{Config: fixtures.ConfigOptions{Approval: true}})
	cs := connect(t, h, "acme", fixtures.EraExtension)
	task, _, err := taskwire.CallToolAsTask(testCtx(t), cs, fixtures.RunSuiteCall("op-cancel", nil), nil)
	if err != nil || task == nil {
		t.Fatalf("tools/call = %v, %v; want a task", task, err)
	}
	ap := newApprover(t, h)
	q := ap.pending("op-cancel")
	if _, err := taskwire.CancelTask(testCtx(t), cs, task.ID); err != nil {
		t.Fatalf("tasks/cancel: %v", err)
	}
	if got, err := taskwire.GetTask(testCtx(t), cs, task.ID); err != nil || got.Status != taskwire.StatusCancelled {
		t.Fatalf("task after tasks/cancel = %+v, %v; want cancelled", got, err)
	}
	if status, body := ap.do(http.MethodPost, fmt.Sprintf("/v1/approval-requests/%d/approve", q.ID), `{}`); status != http.StatusConflict {
		t.Fatalf("approving a cancelled task's request: %d %s, want 409", status, body)
	}
	if got, err := h.Store.ApprovalRequestGet(testCtx(t), "acme", q.ID); err != nil || got.Status != ledger.RequestCancelled {
		t.Fatalf("request = %+v, %v; want cancelled", got, err)
	}
	if n := len(h.Sim.Jobs()); n != 0 {
		t.Fatalf("provider jobs = %d, want 0", n)
	}
}

// A client that cannot take a task keeps getting approval_required, now
// naming its pending request; once an approver approves it, the client's
// retry runs.
func TestApprovalRequestOfAClientWithoutTasks(t *testing.T) {
	h := harness(t, &fixtures.Options{Config: fixtures.ConfigOptions{Approval: true}})
	cs := connect(t, h, "acme", fixtures.EraPlain)
	_, err := cs.CallTool(testCtx(t), fixtures.RunSuiteCall("op-plain", nil))
	reason, raw := reasonOf(t, err)
	var data struct {
		Request struct {
			ID           int64  `json:"id"`
			HowToApprove string `json:"how_to_approve"`
		} `json:"approval_request"`
	}
	if err := json.Unmarshal(raw, &data); err != nil || reason != ledger.ReasonApprovalRequired || data.Request.ID == 0 ||
		data.Request.HowToApprove != fmt.Sprintf("taskgate approval-requests approve %d", data.Request.ID) {
		t.Fatalf("data = %s; want approval_required naming its approval request", raw)
	}
	// Retrying before the approval names the same request.
	_, err = cs.CallTool(testCtx(t), fixtures.RunSuiteCall("op-plain", nil))
	if _, again := reasonOf(t, err); !strings.Contains(string(again), fmt.Sprintf(`"id":%d`, data.Request.ID)) {
		t.Fatalf("retry = %s; want request %d again", again, data.Request.ID)
	}
	ap := newApprover(t, h)
	if q := ap.pending("op-plain"); q.ID != data.Request.ID || q.OperationWaits {
		t.Fatalf("approval request = %+v", q)
	}
	ap.decide(data.Request.ID, "approve", `{}`)
	res, err := cs.CallTool(testCtx(t), fixtures.RunSuiteCall("op-plain", nil))
	if err != nil || res.IsError {
		t.Fatalf("retry after the approval = %+v, %v", res, err)
	}
	jobOf(t, res)
	testwait.Until(t, testCtx(t), "the provider's one job", func() (bool, error) { return len(h.Sim.Jobs()) == 1, nil })
	if receipt := ap.receipt("op-plain"); !strings.Contains(receipt, `"approved_by": "`+ap.credential()+`"`) {
		t.Errorf("the receipt does not name the approver:\n%s", receipt)
	}
}

// With approve_by naming only elicitation, a client that takes a task but
// cannot be asked gets today's approval_required, and no request waits.
func TestApproveByElicitationOnly(t *testing.T) {
	h := harness(t, &fixtures.Options{Config: fixtures.ConfigOptions{Approval: true}, EditConfig: approveBy("[elicitation]")})
	cs := connect(t, h, "acme", fixtures.EraExtension)
	_, _, err := taskwire.CallToolAsTask(testCtx(t), cs, fixtures.RunSuiteCall("op-ask", nil), nil)
	if reason, data := reasonOf(t, err); reason != ledger.ReasonApprovalRequired || strings.Contains(string(data), "approval_request") {
		t.Fatalf("data = %s; want approval_required without a request", data)
	}
	list, err := h.Store.ApprovalRequestList(testCtx(t), &ledger.ApprovalRequestListParams{Tenant: "acme", Statuses: nil})
	if err != nil || len(list) != 0 {
		t.Fatalf("approval requests = %+v, %v; want none", list, err)
	}
}
