package claudecode

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
)

// runSuite is the gateway's run_suite as Claude Code names it.
const runSuite = "mcp__taskgate__hosted_test_run_suite"

// retryWhileFailing calls tool with input, once ToolSearch has loaded it,
// and again with the same input while the call fails, making at most calls
// calls; then it ends with a text.
func retryWhileFailing(tool string, input map[string]any, calls int) Script {
	return func(c *Conversation) Reply {
		switch {
		case c.Turn == 0:
			return Select(tool)
		case c.Turn <= calls && (c.Last().Name != tool || c.Last().IsError):
			return Reply{Tool: tool, Input: input}
		}
		return Reply{Text: "finished"}
	}
}

// suiteInput is what the model passes run_suite through the gateway: the
// suite and an operation ID, nothing else.
func suiteInput(opID string) map[string]any {
	return map[string]any{"suite": "settlement", "operation_id": opID}
}

// checkOneJob checks the provider's record and the operation's receipt
// after a call that should have cost one job, attached to by every retry.
func checkOneJob(t *testing.T, ctx context.Context, s *stage, m *model, opID string) {
	t.Helper()
	jobsEnded(t, ctx, s.Sim, 1)
	if tot := s.Sim.Totals(); tot.JobsStarted != 1 || tot.FinalChargeUSD != providersim.DefaultFinalCharge {
		t.Errorf("provider totals = %+v; want 1 job, %s", tot, providersim.DefaultFinalCharge)
	}
	calls := 0
	for _, r := range m.Results() {
		if r.Name == runSuite {
			calls++
		}
	}
	r := s.receipt(t, ctx, opID)
	if r.State != "completed" || r.ObservedRemoteJobs != 1 || r.DuplicateJobs != 0 || r.FinalCostUSD.String() != "17.84" {
		t.Errorf("receipt: state %s, observed remote jobs %d, duplicate jobs %d, final cost %s; want completed, 1, 0, 17.84",
			r.State, r.ObservedRemoteJobs, r.DuplicateJobs, r.FinalCostUSD)
	}
	if r.Attempts != calls || r.AttachedAttempts != calls-1 || calls < 2 {
		t.Errorf("receipt: %d attempts, %d attached; the client called %d times (at least 2), every call after the first attaching",
			r.Attempts, r.AttachedAttempts, calls)
	}
}

// The seed scenario with the real client: its call times out
// (MCP_TOOL_TIMEOUT), the model retries with the same operation ID, the
// retry attaches, and the provider runs one job. Headless Claude Code
// speaks 2026-07-28 and declares no tasks.
func TestHeadlessTimeoutRetryAttaches(t *testing.T) {
	testTimeoutRetry(t, "cc-timeout-retry")
}

// The same on 2025-11-25 (MCP_PROTOCOL_NEGOTIATION=legacy): one job.
func TestHeadlessLegacyTimeoutRetryAttaches(t *testing.T) {
	testTimeoutRetry(t, "cc-timeout-retry-legacy", "MCP_PROTOCOL_NEGOTIATION=legacy")
}

func testTimeoutRetry(t *testing.T, opID string, env ...string) {
	needClaude(t)
	ctx := testCtx(t, 3*time.Minute)
	s := newStage(t, ctx, 5*time.Second, fixtures.ConfigOptions{}, nil)
	m := newModel(t, retryWhileFailing(runSuite, suiteInput(opID), 8))
	c := gatewayClient(t, s, m, append([]string{"MCP_TOOL_TIMEOUT=2000"}, env...)...)
	c.headless(t, ctx, "Run the settlement suite.", "mcp__taskgate")
	t.Logf("the model was offered %s with the input schema %s", runSuite, m.Schema(runSuite))
	// The provider's key argument is the gateway's to fill: the model sees
	// only operation_id.
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(m.Schema(runSuite), &schema); err != nil || schema.Properties["operation_id"] == nil {
		t.Fatalf("the model was offered the schema %s (%v); want one with operation_id", m.Schema(runSuite), err)
	}
	if _, ok := schema.Properties["idempotency_key"]; ok || slices.Contains(schema.Required, "idempotency_key") {
		t.Errorf("the model was offered idempotency_key in %s; want the contract's key argument hidden", m.Schema(runSuite))
	}
	results := m.Results()
	if first := results[1]; first.Name != runSuite || !strings.Contains(first.Text, "timed out") {
		t.Fatalf("the first call answered %+v; want Claude Code's own timeout", first)
	}
	if last := results[len(results)-1]; last.IsError || !strings.Contains(last.Text, `"status":"succeeded"`) {
		t.Fatalf("the last call answered %+v; want the job's result", last)
	}
	checkOneJob(t, ctx, s, m, opID)
	// The gateway logs a 2025-11-25 session's initialize; 2026-07-28 has
	// none.
	legacy := slices.Contains(env, "MCP_PROTOCOL_NEGOTIATION=legacy")
	if initialized := strings.Contains(s.Output(), `msg="session initialized"`); initialized != legacy {
		t.Errorf("the gateway logged a 2025-11-25 session initialized: %v; want %v", initialized, legacy)
	}
	// A client that gives up on its call is no failure of the gateway's,
	// and a request it cancelled gets no answer.
	log := s.Output()
	for _, bad := range []string{"task host failed", "-32603", "could not complete this request"} {
		if strings.Contains(log, bad) {
			t.Errorf("the gateway logged %q after the client's timeout; want neither a warning nor an answer to the cancelled request", bad)
		}
	}
	if !strings.Contains(log, "the client went away before its answer") {
		t.Errorf("the gateway did not log that the client went away before its answer")
	}
}

// The control: the same client straight at the provider. Its call times
// out, the model retries once with the same arguments, and the provider
// starts and charges a second job.
func TestHeadlessControlStraightAtProvider(t *testing.T) {
	needClaude(t)
	ctx := testCtx(t, 3*time.Minute)
	s := newStage(t, ctx, 5*time.Second, fixtures.ConfigOptions{}, nil)
	const tool = "mcp__hosted_test__run_suite"
	m := newModel(t, retryWhileFailing(tool, map[string]any{"suite": "settlement"}, 2))
	c := newClient(t, m, "hosted_test", s.SimURL, map[string]string{}, "MCP_TOOL_TIMEOUT=2000")
	c.headless(t, ctx, "Run the settlement suite.", "mcp__hosted_test")
	for _, r := range m.Results()[1:] {
		if !strings.Contains(r.Text, "timed out") {
			t.Fatalf("a call answered %+v; want Claude Code's own timeout", r)
		}
	}
	jobsEnded(t, ctx, s.Sim, 2)
	if tot := s.Sim.Totals(); tot.JobsStarted != 2 || tot.FinalChargeUSD != 2*providersim.DefaultFinalCharge {
		t.Errorf("provider totals = %+v; want 2 jobs, %s", tot, 2*providersim.DefaultFinalCharge)
	}
	t.Logf("straight at the provider: %d jobs, %s USD", s.Sim.Totals().JobsStarted, s.Sim.Totals().FinalChargeUSD)
}

// A job longer than the gateway's wait: each call ends with a
// still-running answer, the model calls again with the same operation ID,
// and the last call gets the result. One job.
func TestHeadlessLongJobAnsweredByWait(t *testing.T) {
	needClaude(t)
	ctx := testCtx(t, 3*time.Minute)
	s := newStage(t, ctx, 6*time.Second, fixtures.ConfigOptions{Wait: 2 * time.Second}, nil)
	const opID = "cc-long-job"
	m := newModel(t, retryWhileFailing(runSuite, suiteInput(opID), 10))
	c := gatewayClient(t, s, m, "MCP_TOOL_TIMEOUT=60000")
	c.headless(t, ctx, "Run the settlement suite.", "mcp__taskgate")
	results := m.Results()
	if first := results[1]; !first.IsError || !strings.Contains(first.Text, "still running") || !strings.Contains(first.Text, opID) {
		t.Fatalf("the first call answered %+v; want a still-running answer naming the operation", first)
	}
	if last := results[len(results)-1]; last.IsError || !strings.Contains(last.Text, `"status":"succeeded"`) {
		t.Fatalf("the last call answered %+v; want the job's result", last)
	}
	checkOneJob(t, ctx, s, m, opID)
}
