package claudecode

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/sim/fixtures"
)

// approveByElicitation lets run_suite's approval come from the client's
// user only, a form answer capped at 20.00 USD.
func approveByElicitation(y string) string {
	return strings.Replace(y, "approval: required\n", "approval: required\n        approve_by: [elicitation]\n        elicitation_max_total_cost: \"20.00\"\n", 1)
}

// approveByRequest lets run_suite's approval come from an approver only.
func approveByRequest(y string) string {
	return strings.Replace(y, "approval: required\n", "approval: required\n        approve_by: [request]\n", 1)
}

// question is what Claude Code's Elicitation hook is given.
type question struct {
	Server  string `json:"mcp_server_name"`
	Message string `json:"message"`
	Mode    string `json:"mode"`
	URL     string `json:"url"`
}

// elicitationHook makes Claude Code answer every elicitation with action,
// from a hook that keeps each question it is asked in dir.
func (c *client) elicitationHook(t *testing.T, dir, action string) {
	t.Helper()
	answer, _ := json.Marshal(map[string]any{"hookSpecificOutput": map[string]any{"hookEventName": "Elicitation", "action": action}})
	script := filepath.Join(dir, "elicitation-hook")
	body := fmt.Sprintf("#!/bin/sh\ncat > \"$(mktemp %s/question-XXXXXX.json)\"\nprintf '%%s\\n' '%s'\n", dir, answer)
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	c.settings(t, map[string]any{"hooks": map[string]any{"Elicitation": []any{
		map[string]any{"matcher": "", "hooks": []any{map[string]any{"type": "command", "command": script}}},
	}}})
}

// questions are what the elicitation hook was asked.
func questions(t *testing.T, dir string) []question {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "question-*.json"))
	var out []question
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var q question
		if err := json.Unmarshal(b, &q); err != nil {
			t.Fatalf("read the hook's question %s: %v", b, err)
		}
		out = append(out, q)
	}
	return out
}

// retryAfter calls tool with input once ToolSearch has loaded it; while
// the call fails it calls again, at most calls times in all, but the
// first retry only once ready is closed (or ctx ends: pass the test's
// context, so that a test that fails early does not hold the client): the
// model goes on after a human has acted.
func retryAfter(ctx context.Context, ready <-chan struct{}, tool string, input map[string]any, calls int) Script {
	next := retryWhileFailing(tool, input, calls)
	return func(c *Conversation) Reply {
		if c.Turn == 2 {
			select {
			case <-ready:
			case <-ctx.Done():
			}
		}
		return next(c)
	}
}

// pendingRequest waits for the tenant's one pending approval request.
func (s *stage) pendingRequest(t *testing.T, ctx context.Context) *ledger.ApprovalRequest {
	t.Helper()
	var req *ledger.ApprovalRequest
	testwait.Until(t, ctx, "a pending approval request", func() (bool, error) {
		list, err := s.Store.ApprovalRequestList(ctx, &ledger.ApprovalRequestListParams{Tenant: Tenant, Statuses: []ledger.ApprovalRequestStatus{ledger.RequestPending}})
		if err != nil || len(list) == 0 {
			return false, err
		}
		req = list[0]
		return true, nil
	})
	return req
}

// headlessInBackground runs c.headless on its own goroutine; the returned
// channel closes when it has ended.
func (c *client) headlessInBackground(t *testing.T, ctx context.Context, prompt, allowed string) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := c.runHeadless(t, ctx, prompt, allowed); err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(func() { <-done })
	return done
}

// Claude Code declares URL-mode elicitation, so an approval it is asked
// for goes to the console's page of an approval request, even where
// elicitation_max_total_cost would let a form approve: an Elicitation hook
// that accepts only agrees to open the page. Nothing starts until an
// approver approves (here with the CLI); then the model's retry gets the
// one job's result.
func TestHeadlessElicitationHookAccepts(t *testing.T) {
	testElicitationHook(t, "accept", "cc-elicit-accept")
}

// The hook declines: nothing starts; the request waits for an approver,
// who declines, and the model's retry is refused with nothing started.
func TestHeadlessElicitationHookDeclines(t *testing.T) {
	testElicitationHook(t, "decline", "cc-elicit-decline")
}

func testElicitationHook(t *testing.T, action, opID string) {
	needClaude(t)
	ctx := testCtx(t, 3*time.Minute)
	s := newStage(t, ctx, 2*time.Second, fixtures.ConfigOptions{Approval: true, Wait: 3 * time.Second}, approveByElicitation)
	ready := make(chan struct{})
	m := newModel(t, retryAfter(t.Context(), ready, runSuite, suiteInput(opID), 4))
	c := gatewayClient(t, s, m)
	dir := t.TempDir()
	c.elicitationHook(t, dir, action)
	done := c.headlessInBackground(t, ctx, "Run the settlement suite.", "mcp__taskgate")

	req := s.pendingRequest(t, ctx)
	testwait.Until(t, ctx, "the model to see the first call's answer", func() (bool, error) { return len(m.Results()) >= 2, nil })
	qs := questions(t, dir)
	want := strings.TrimSuffix(s.MCPURL(), "/mcp") + fmt.Sprintf("/console/requests/%d", req.ID)
	if len(qs) != 1 || qs[0].Server != "taskgate" || qs[0].Mode != "url" || qs[0].URL != want {
		t.Fatalf("the hook was asked %+v; want one URL question sending the user to %s", qs, want)
	}
	if first := m.Results()[1]; !first.IsError || !strings.Contains(first.Text, fmt.Sprintf("approval request %d", req.ID)) {
		t.Fatalf("the first call answered %+v; want it waiting for approval request %d", first, req.ID)
	}
	if n := len(s.Sim.Jobs()); n != 0 {
		t.Fatalf("the provider has %d jobs before an approver decided; want 0", n)
	}
	id := fmt.Sprint(req.ID)
	if action == "accept" {
		s.taskgate(t, ctx, "approval-requests", "approve", id, "--tenant", Tenant, "--note", "checked the suite")
	} else {
		s.taskgate(t, ctx, "approval-requests", "decline", id, "--tenant", Tenant, "--note", "not this week")
	}
	close(ready)
	<-done

	last := m.Results()[len(m.Results())-1]
	r := s.receipt(t, ctx, opID)
	if action == "accept" {
		if last.IsError || !strings.Contains(last.Text, `"status":"succeeded"`) {
			t.Fatalf("the last call answered %+v; want the job's result", last)
		}
		jobsEnded(t, ctx, s.Sim, 1)
		if r.State != "completed" || r.ObservedRemoteJobs != 1 || r.FinalCostUSD.String() != "17.84" || r.Approval == nil {
			t.Errorf("receipt: state %s, %d remote jobs, final cost %s, approval %+v; want completed, 1, 17.84 and the approval",
				r.State, r.ObservedRemoteJobs, r.FinalCostUSD, r.Approval)
		}
		checkApprovalRequest(t, r, req, "checked the suite")
		return
	}
	if !last.IsError || !strings.Contains(last.Text, "declined") {
		t.Fatalf("the last call answered %+v; want the decline", last)
	}
	if n := len(s.Sim.Jobs()); n != 0 {
		t.Fatalf("the provider has %d jobs after the decline; want 0", n)
	}
	if r.State != "failed" || r.ObservedRemoteJobs != 0 || r.FinalCostUSD.String() != "0.00" {
		t.Errorf("receipt: state %s, %d remote jobs, final cost %s; want failed, 0, 0.00", r.State, r.ObservedRemoteJobs, r.FinalCostUSD)
	}
}

// A client that cannot take a task and is not asked: its call is refused
// with approval_required and files an approval request; an approver
// approves it with the CLI while the model retries, and the retry runs the
// one job.
func TestHeadlessApprovalRequestApprovedByCLI(t *testing.T) {
	needClaude(t)
	ctx := testCtx(t, 3*time.Minute)
	s := newStage(t, ctx, 2*time.Second, fixtures.ConfigOptions{Approval: true}, approveByRequest)
	const opID = "cc-approval-request"
	ready := make(chan struct{})
	m := newModel(t, retryAfter(t.Context(), ready, runSuite, suiteInput(opID), 4))
	c := gatewayClient(t, s, m)
	done := c.headlessInBackground(t, ctx, "Run the settlement suite.", "mcp__taskgate")

	req := s.pendingRequest(t, ctx)
	testwait.Until(t, ctx, "the model to see the first call's answer", func() (bool, error) { return len(m.Results()) >= 2, nil })
	first := m.Results()[1]
	if !first.IsError || !strings.Contains(first.Text, fmt.Sprintf("taskgate approval-requests approve %d", req.ID)) {
		t.Fatalf("the first call answered %+v; want a refusal that names how to approve request %d", first, req.ID)
	}
	if n := len(s.Sim.Jobs()); n != 0 {
		t.Fatalf("the provider has %d jobs before the approval; want 0", n)
	}
	s.taskgate(t, ctx, "approval-requests", "approve", fmt.Sprint(req.ID), "--tenant", Tenant, "--note", "checked the suite")
	close(ready)
	<-done

	if last := m.Results()[len(m.Results())-1]; last.IsError || !strings.Contains(last.Text, `"status":"succeeded"`) {
		t.Fatalf("the last call answered %+v; want the job's result", last)
	}
	jobsEnded(t, ctx, s.Sim, 1)
	r := s.receipt(t, ctx, opID)
	if r.State != "completed" || r.ObservedRemoteJobs != 1 || r.FinalCostUSD.String() != "17.84" || r.Approval == nil {
		t.Errorf("receipt: state %s, %d remote jobs, final cost %s, approval %+v; want completed, 1, 17.84 and the approval",
			r.State, r.ObservedRemoteJobs, r.FinalCostUSD, r.Approval)
	}
	checkApprovalRequest(t, r, req, "checked the suite")
	// The model called twice: the refused call that filed the request, and
	// the retry after the approval, which ran the job.
	if calls := len(m.Results()) - 1; calls != 2 {
		t.Fatalf("the model called run_suite %d times; want 2", calls)
	}
	if r.DeniedAttempts != 1 || r.Attempts != 1 || len(r.Lineage) != 2 {
		t.Fatalf("receipt: %d denied attempts, %d attempts, %d lineage lines; want 1, 1, 2: %+v", r.DeniedAttempts, r.Attempts, len(r.Lineage), r.Lineage)
	}
	if l := r.Lineage[0]; l.Decision != "denied" || l.Reason != ledger.ReasonApprovalRequired {
		t.Errorf("the first lineage line is %+v; want the refused call, denied with %s", l, ledger.ReasonApprovalRequired)
	}
	t.Logf("lineage: %+v", r.Lineage)
}

// checkApprovalRequest checks the receipt's line of the approval request
// req: approved with the CLI by this machine's user, with note.
func checkApprovalRequest(t *testing.T, r *receipt.Receipt, req *ledger.ApprovalRequest, note string) {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	got := r.ApprovalRequest
	if got == nil {
		t.Fatalf("the receipt has no approval request; want request %d", req.ID)
	}
	if got.ID != req.ID || got.Status != "approved" || got.ApprovedBy != "cli:"+u.Username || got.Note != note || got.RequestedBy == "" {
		t.Errorf("the receipt's approval request is %+v; want request %d, requested by the agent's key, approved by cli:%s with the note %q",
			got, req.ID, u.Username, note)
	}
}
