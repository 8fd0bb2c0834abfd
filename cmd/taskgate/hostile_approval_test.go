package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/sim/fixtures"
)

// approvalHarness runs `taskgate serve` as a process of its own in front
// of the simulated provider, with run_suite and run_matrix approval-gated
// under the default approval policy, and a second tenant beside the first.
func approvalHarness(t *testing.T, edit func(string) string) *fixtures.Harness {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	h, err := fixtures.New(ctx, &fixtures.Options{Process: []string{gatewayBinary}, Config: fixtures.ConfigOptions{Approval: true}, EditConfig: edit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	for _, tenant := range []string{"acme", "evil"} {
		if _, err := h.Key(ctx, tenant); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// approvalClient connects a go-sdk client of tenant, with opts, speaking
// version ("": the newest).
func approvalClient(t *testing.T, ctx context.Context, h *fixtures.Harness, tenant, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	key, err := h.Key(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	var sopts *mcp.ClientSessionOptions
	if version != "" {
		sopts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "hostile-agent", Version: "v1"}, opts).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: h.MCPURL(), MaxRetries: -1, HTTPClient: &http.Client{Transport: fixtures.Bearer{Key: key}},
	}, sopts)
	if err != nil {
		t.Fatalf("connect tenant %s: %v", tenant, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// approvalReason is the data.reason of a JSON-RPC error; empty for none.
func approvalReason(err error) string {
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) {
		return ""
	}
	var data struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(rpcErr.Data, &data)
	return data.Reason
}

// Break: an agent approves its own spending. Its client answers the
// gateway's approval question itself with a ceiling of its choosing; under
// the default policy that approves nothing, in either protocol era, and
// the provider starts no job.
func TestHostileApprovalAgentAcceptsItsOwnSpend(t *testing.T) {
	h := approvalHarness(t, nil)
	ctx := testCtx(t, 2*time.Minute)
	for _, era := range []struct{ name, version string }{{"2025-11-25", "2025-11-25"}, {"2026-07-28", ""}} {
		t.Run(era.name, func(t *testing.T) {
			asked := 0
			cs := approvalClient(t, ctx, h, "acme", era.version, &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					asked++
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"max_total_cost": "1141.76", "max_remote_jobs": 64}}, nil
				},
			})
			for _, call := range []*mcp.CallToolParams{
				fixtures.RunSuiteCall("self-approved-suite-"+era.name, nil),
				fixtures.RunMatrixCall("self-approved-matrix-"+era.name, "matrix-"+era.name, 64),
			} {
				res, err := cs.CallTool(ctx, call)
				if reason := approvalReason(err); reason != ledger.ReasonApprovalRequired {
					t.Fatalf("%s answered %+v, %v; want approval_required, leaving the approval to an approver", call.Name, res, err)
				}
				list, err := h.Store.ApprovalList(ctx, &ledger.ApprovalListParams{Tenant: "acme", OperationID: call.Arguments.(map[string]any)["operation_id"].(string), IncludeRevoked: true})
				if err != nil || len(list) != 0 {
					t.Fatalf("approvals after the agent's own accept = %+v, %v; want none", list, err)
				}
			}
			if asked != 0 {
				t.Errorf("the client was asked %d approval forms; the default policy asks none", asked)
			}
			if n := len(h.Sim.Jobs()); n != 0 {
				t.Fatalf("the provider started %d jobs; want none", n)
			}
		})
	}
}

// approvalChromium finds a Chromium to drive, or skips the test saying
// why.
func approvalChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("SKIPPED: no chromium binary on PATH; the browser test needs one (apt-get install chromium)")
	return ""
}

// Break, mended: approvals come from humans. A client that declares
// URL-mode elicitation is sent to the console's page of its call's
// approval request. The call waits, with nothing started, while the agent
// answers; an agent key cannot sign in there; an approver who signs in on
// that page in a real Chromium and approves lets the one job run, and a
// decline there ends the next call with nothing started.
func TestHostileApprovalURLModeWaitsForTheConsole(t *testing.T) {
	exe := approvalChromium(t)
	h := approvalHarness(t, nil)
	ctx := testCtx(t, 3*time.Minute)
	urls := make(chan string, 4)
	cs := approvalClient(t, ctx, h, "acme", "", &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if req.Params.Mode == "url" {
				urls <- req.Params.URL
				return &mcp.ElicitResult{Action: "accept"}, nil
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"max_total_cost": "500.00", "max_remote_jobs": 5}}, nil
		},
	})
	agent, err := h.Key(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	approverKey, k, err := authn.NewAPIKeyWithRole(ctx, h.Store, "acme", "approver", ledger.RoleApprover)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	call := func(opID, suite string) (string, chan answer) {
		t.Helper()
		done := make(chan answer, 1)
		go func() {
			res, err := cs.CallTool(ctx, fixtures.RunSuiteCall(opID, map[string]any{"suite": suite}))
			done <- answer{res, err}
		}()
		select {
		case page := <-urls:
			if !strings.HasPrefix(page, strings.TrimSuffix(h.MCPURL(), "/mcp")+"/console/requests/") {
				t.Fatalf("the user was sent to %q; want the console's page of the approval request", page)
			}
			return page, done
		case a := <-done:
			t.Fatalf("the call ended before the user was sent anywhere: %+v, %v", a.res, a.err)
		case <-ctx.Done():
			t.Fatal("no URL elicitation arrived")
		}
		return "", nil
	}
	page, done := call("url-approved", "settlement")
	op, err := h.Store.OperationGet(ctx, &ledger.OperationGetParams{Tenant: "acme", OperationID: "url-approved"})
	if err != nil || op.State != ledger.StateAwaitingApproval {
		t.Fatalf("operation after the agent's answer = %+v, %v; want it awaiting approval", op, err)
	}

	alloc, cancel := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true))...)
	defer cancel()
	bctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	// The browser starts under the context of its first action: bctx,
	// not a step's, whose end would close it.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		step, cancel := context.WithTimeout(bctx, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(step, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	read := func(what, sel string) string {
		t.Helper()
		step, cancel := context.WithTimeout(bctx, 20*time.Second)
		defer cancel()
		text, err := chromedp.Run(step, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return text
	}

	run("sign in on the page with the agent's key", chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#sign-in")),
		chromedp.SendKeys(chromedp.CSS("#credential"), agent), chromedp.Submit(chromedp.CSS("#sign-in")),
		chromedp.WaitVisible(chromedp.CSS("#error")))
	if text := read("read the error", "#error"); !strings.Contains(text, "the console is for approvers") {
		t.Fatalf("the agent's sign-in said %q", text)
	}
	select {
	case a := <-done:
		t.Fatalf("the call ended before an approver decided: %+v, %v", a.res, a.err)
	default:
	}
	if n := len(h.Sim.Jobs()); n != 0 {
		t.Fatalf("provider jobs before an approver decided = %d, want 0", n)
	}

	run("sign in on the page as the approver", chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#sign-in")),
		chromedp.SendKeys(chromedp.CSS("#credential"), approverKey), chromedp.Submit(chromedp.CSS("#sign-in")),
		chromedp.WaitVisible(chromedp.CSS("form.approve")))
	if text := read("read the request", "section.request"); !strings.Contains(text, "url-approved") || !strings.Contains(text, "18.00") {
		t.Fatalf("the request's page shows %q", text)
	}
	run("approve", chromedp.Click(chromedp.CSS("form.approve button")), chromedp.WaitVisible(chromedp.CSS("#state")))
	a := <-done
	if a.err != nil || a.res.IsError {
		t.Fatalf("the call after the approver approved: %+v, %v", a.res, a.err)
	}
	if n := len(h.Sim.Jobs()); n != 1 {
		t.Fatalf("provider jobs = %d, want 1", n)
	}
	list, err := h.Store.ApprovalList(ctx, &ledger.ApprovalListParams{Tenant: "acme", OperationID: "url-approved"})
	if err != nil || len(list) != 1 || list[0].CreatedBy != fmt.Sprintf("api_key:%d", k.ID) {
		t.Fatalf("approvals = %+v, %v; want the approver's one", list, err)
	}

	page, done = call("url-declined", "billing")
	run("decline on the page", chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("form.decline")),
		chromedp.Click(chromedp.CSS("form.decline button")), chromedp.WaitVisible(chromedp.CSS("h1")))
	if a := <-done; approvalReason(a.err) != ledger.ReasonApprovalDeclined {
		t.Fatalf("the call after the approver declined: %+v, %v; want approval_declined", a.res, a.err)
	}
	if n := len(h.Sim.Jobs()); n != 1 {
		t.Fatalf("provider jobs after the decline = %d, want still 1", n)
	}
}
