package claudecode

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
)

// Interactive Claude Code declares MCP Tasks (on 2026-07-28): taskgate
// answers run_suite with a task, which Claude Code polls with tasks/get
// and by default moves to the background; its completion reaches the
// model as a notice in a later user message.

// interactiveJob is how long a job runs in these scenarios: long enough to
// act while it runs.
const interactiveJob = 6 * time.Second

// callOnce loads run_suite, calls it once with input and then ends every
// later turn with a text.
func callOnce(input map[string]any) Script {
	return Steps(Select(runSuite), Reply{Tool: runSuite, Input: input}, Reply{Text: "finished"})
}

// jobRunning waits until the provider has one job, running.
func jobRunning(t *testing.T, ctx context.Context, sim *providersim.Sim) providersim.Job {
	t.Helper()
	var job providersim.Job
	testwait.Until(t, ctx, "the provider's one job to run", func() (bool, error) {
		jobs := sim.Jobs()
		if len(jobs) != 1 || jobs[0].Status != providersim.StatusRunning {
			return false, fmt.Errorf("jobs: %+v", jobs)
		}
		job = jobs[0]
		return true, nil
	})
	return job
}

// completionSeen waits until the model has been told that the background
// task completed.
func completionSeen(t *testing.T, ctx context.Context, m *model) {
	t.Helper()
	testwait.Until(t, ctx, "the model to be told the task completed", func() (bool, error) {
		return m.SawText("completed") && m.SawText(`succeeded`), nil
	})
}

// checkCompleted checks the provider's record and the receipt of an
// operation that ran one job to success over attempts calls.
func checkCompleted(t *testing.T, ctx context.Context, s *stage, opID string, attempts int) {
	t.Helper()
	jobsEnded(t, ctx, s.Sim, 1)
	if tot := s.Sim.Totals(); tot.JobsStarted != 1 || tot.FinalChargeUSD != providersim.DefaultFinalCharge {
		t.Errorf("provider totals = %+v; want 1 job, %s", tot, providersim.DefaultFinalCharge)
	}
	var r *receipt.Receipt
	testwait.Until(t, ctx, "the receipt to show the final charge", func() (bool, error) {
		r = s.receipt(t, ctx, opID)
		return r.FinalCostUSD.String() == "17.84", fmt.Errorf("final cost %s", r.FinalCostUSD)
	})
	if r.State != "completed" || r.ObservedRemoteJobs != 1 || r.DuplicateJobs != 0 || r.Attempts != attempts || r.AttachedAttempts != attempts-1 {
		t.Errorf("receipt: state %s, %d remote jobs, %d duplicate, %d attempts (%d attached); want completed, 1, 0, %d (%d attached)",
			r.State, r.ObservedRemoteJobs, r.DuplicateJobs, r.Attempts, r.AttachedAttempts, attempts, attempts-1)
	}
}

// checkCancelled checks that the provider's one job was cancelled, its
// charge refunded, and that the receipt says so over attempts calls; that
// the one cancellation was recorded once, however many tasks/cancel
// Claude Code sent; and that the task's status says what came of it.
func checkCancelled(t *testing.T, ctx context.Context, s *stage, opID string, attempts int) {
	t.Helper()
	jobsEnded(t, ctx, s.Sim, 1)
	job := s.Sim.Jobs()[0]
	if job.Status != providersim.StatusCancelled {
		t.Fatalf("the provider's job is %s; want cancelled", job.Status)
	}
	if tot := s.Sim.Totals(); tot.JobsStarted != 1 || tot.FinalChargeUSD != 0 {
		t.Errorf("provider totals = %+v; want 1 job, nothing charged", tot)
	}
	var r *receipt.Receipt
	testwait.Until(t, ctx, "the receipt to show the operation cancelled", func() (bool, error) {
		r = s.receipt(t, ctx, opID)
		return r.State == "cancelled", fmt.Errorf("state %s", r.State)
	})
	if r.ObservedRemoteJobs != 1 || r.FinalCostUSD.String() != "0.00" || r.Attempts != attempts {
		t.Errorf("receipt: %d remote jobs, final cost %s, %d attempts; want 1, 0.00, %d", r.ObservedRemoteJobs, r.FinalCostUSD, r.Attempts, attempts)
	}
	op := s.operation(t, ctx, opID)
	testwait.Until(t, ctx, "the task's status to say what came of the cancellation", func() (bool, error) {
		op = s.operation(t, ctx, opID)
		return strings.Contains(op.StatusMessage, "the provider stopped job "+string(job.ID)), fmt.Errorf("status %q", op.StatusMessage)
	})
	if msg := op.StatusMessage; strings.Contains(msg, "being asked to stop") || !strings.Contains(msg, "effect was reversed") {
		t.Errorf("the task's status is %q; want what came of the cancellation (the job stopped, its effect reversed), not that the provider is being asked", msg)
	}
	if n := s.events(t, ctx, op)[ledger.EventCancellationRequested]; n != 1 {
		t.Errorf("the ledger recorded %d %s events; want 1", n, ledger.EventCancellationRequested)
	}
}

// A task in the background: the call returns at once, Claude Code polls
// the task, and its completion reaches the model. One job.
func TestInteractiveBackgroundTaskCompletes(t *testing.T) {
	needClaude(t)
	ctx := testCtx(t, 2*time.Minute)
	s := newStage(t, ctx, interactiveJob, fixtures.ConfigOptions{}, nil)
	const opID = "cc-background"
	m := newModel(t, callOnce(suiteInput(opID)))
	u := gatewayClient(t, s, m).interactive(t, ctx)
	u.prompt(t, "Run the settlement suite.")
	completionSeen(t, ctx, m)
	if first := m.Results()[1]; !strings.Contains(first.Text, "moved to the background") {
		t.Fatalf("the call answered %+v; want a task moved to the background", first)
	}
	checkCompleted(t, ctx, s, opID, 1)
}

// CLAUDE_CODE_MCP_AUTO_BACKGROUND_MS=0 keeps the task inline: the call's
// tool result is the job's result. One job.
func TestInteractiveInlineTaskCompletes(t *testing.T) {
	needClaude(t)
	ctx := testCtx(t, 2*time.Minute)
	s := newStage(t, ctx, interactiveJob, fixtures.ConfigOptions{}, nil)
	const opID = "cc-inline"
	m := newModel(t, callOnce(suiteInput(opID)))
	u := gatewayClient(t, s, m, "CLAUDE_CODE_MCP_AUTO_BACKGROUND_MS=0").interactive(t, ctx)
	u.prompt(t, "Run the settlement suite.")
	testwait.Until(t, ctx, "the call's result", func() (bool, error) { return len(m.Results()) >= 2, nil })
	if res := m.Results()[1]; res.IsError || !strings.Contains(res.Text, `"status":"succeeded"`) {
		t.Fatalf("the call answered %+v; want the job's result", res)
	}
	checkCompleted(t, ctx, s, opID, 1)
}

// Claude Code is killed while its task runs, started again and asked
// again: the model's call with the same operation ID attaches to the
// running operation. One job.
func TestInteractiveKilledAndCalledAgain(t *testing.T) {
	needClaude(t)
	ctx := testCtx(t, 2*time.Minute)
	s := newStage(t, ctx, interactiveJob, fixtures.ConfigOptions{}, nil)
	const opID = "cc-killed"
	m := newModel(t, callOnce(suiteInput(opID)))
	u := gatewayClient(t, s, m).interactive(t, ctx)
	u.prompt(t, "Run the settlement suite.")
	jobRunning(t, ctx, s.Sim)
	u.kill(t, ctx)
	u.start(t, ctx)
	u.prompt(t, "Run the settlement suite.")
	completionSeen(t, ctx, m)
	checkCompleted(t, ctx, s, opID, 2)
}

// Claude Code is killed while its task runs and resumed with --resume:
// it polls the same task again, and the completion reaches the model.
// One job, one attempt.
func TestInteractiveResumePollsTheTask(t *testing.T) {
	needClaude(t)
	ctx := testCtx(t, 2*time.Minute)
	s := newStage(t, ctx, interactiveJob, fixtures.ConfigOptions{}, nil)
	const opID = "cc-resumed"
	const session = "2f1c9a4e-6b7d-4e38-9a51-0c2d3e4f5a6b"
	m := newModel(t, callOnce(suiteInput(opID)))
	u := gatewayClient(t, s, m).interactive(t, ctx, "--session-id", session)
	u.prompt(t, "Run the settlement suite.")
	jobRunning(t, ctx, s.Sim)
	testwait.Until(t, ctx, "the task to go to the background", func() (bool, error) { return len(m.Results()) >= 2, nil })
	u.kill(t, ctx)
	u.start(t, ctx, "--resume", session)
	completionSeen(t, ctx, m)
	checkCompleted(t, ctx, s, opID, 1)
}

// The gateway restarts while the task runs: Claude Code's polls fail
// meanwhile and then find the task again, and its completion reaches the
// model. One job.
func TestInteractiveGatewayRestartMidTask(t *testing.T) {
	needClaude(t)
	ctx := testCtx(t, 2*time.Minute)
	s := newStage(t, ctx, interactiveJob, fixtures.ConfigOptions{}, nil)
	const opID = "cc-gateway-restart"
	m := newModel(t, callOnce(suiteInput(opID)))
	u := gatewayClient(t, s, m).interactive(t, ctx)
	u.prompt(t, "Run the settlement suite.")
	jobRunning(t, ctx, s.Sim)
	testwait.Until(t, ctx, "the task to go to the background", func() (bool, error) { return len(m.Results()) >= 2, nil })
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("stop the gateway: %v", err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatalf("start the gateway again: %v", err)
	}
	completionSeen(t, ctx, m)
	checkCompleted(t, ctx, s, opID, 1)
}

// Esc while an inline task runs: Claude Code sends tasks/cancel, and
// taskgate cancels the provider's job, whose charge is refunded.
func TestInteractiveEscCancelsInlineTask(t *testing.T) {
	needClaude(t)
	ctx := testCtx(t, 2*time.Minute)
	s := newStage(t, ctx, 30*time.Second, fixtures.ConfigOptions{}, nil)
	const opID = "cc-esc"
	m := newModel(t, callOnce(suiteInput(opID)))
	u := gatewayClient(t, s, m, "CLAUDE_CODE_MCP_AUTO_BACKGROUND_MS=0").interactive(t, ctx)
	u.prompt(t, "Run the settlement suite.")
	jobRunning(t, ctx, s.Sim)
	u.keys(t, "Escape")
	checkCancelled(t, ctx, s, opID, 1)
}

// backgroundID is the ID Claude Code gives a task it moved to the
// background, as its tool result names it.
var backgroundID = regexp.MustCompile(`moved to the background as task (\S+?)[ .,]`)

// The model stops a background task with TaskStop: Claude Code sends
// tasks/cancel, and taskgate cancels the provider's job. The model then
// calls again with the same operation ID and is told, in the message
// alone, that the operation was cancelled and that new work needs a new
// operation_id.
func TestInteractiveTaskStopCancelsBackgroundTask(t *testing.T) {
	needClaude(t)
	ctx := testCtx(t, 2*time.Minute)
	s := newStage(t, ctx, 30*time.Second, fixtures.ConfigOptions{}, nil)
	const opID = "cc-taskstop"
	m := newModel(t, func(c *Conversation) Reply {
		switch c.Turn {
		case 0:
			return Select(runSuite)
		case 1:
			return Reply{Tool: runSuite, Input: suiteInput(opID)}
		case 2:
			return Select("TaskStop")
		case 3:
			id := backgroundID.FindStringSubmatch(c.Results[1].Text)
			if id == nil {
				return Reply{Text: "no background task to stop"}
			}
			return Reply{Tool: "TaskStop", Input: map[string]any{"task_id": id[1]}}
		case 4:
			return Reply{Tool: runSuite, Input: suiteInput(opID)}
		}
		return Reply{Text: "stopped"}
	})
	u := gatewayClient(t, s, m).interactive(t, ctx)
	u.prompt(t, "Run the settlement suite, then stop it.")
	testwait.Until(t, ctx, "the call after TaskStop", func() (bool, error) { return len(m.Results()) >= 5, nil })
	if res := m.Results()[3]; res.Name != "TaskStop" || res.IsError {
		t.Fatalf("TaskStop answered %+v", res)
	}
	again := m.Results()[4]
	if !again.IsError || !strings.Contains(again.Text, "was cancelled") || !strings.Contains(again.Text, "new operation_id") {
		t.Errorf("the call after the cancel answered %+v; want a refusal saying the operation was cancelled and new work needs a new operation_id", again)
	}
	checkCancelled(t, ctx, s, opID, 2)
}

// MCP_TOOL_TIMEOUT ends an inline task: Claude Code sends tasks/cancel,
// and the model is told the call timed out. The provider ran one job.
func TestInteractiveInlineTimeout(t *testing.T) {
	s, _ := testInlineTimeout(t, "cc-inline-timeout", nil)
	t.Logf("after the client's timeout the provider's job is %s", s.Sim.Jobs()[0].Status)
}

// keepSentJobs sets run_suite's client_cancel to before_send.
func keepSentJobs(y string) string {
	return strings.Replace(y, "retry_policy: lookup_then_attach\n", "retry_policy: lookup_then_attach\n        client_cancel: before_send\n", 1)
}

// The same under client_cancel: before_send: the client's timeout does
// not throw away the paid job, which runs to its end, and the receipt says
// the client asked to cancel and the policy kept the job.
func TestInteractiveInlineTimeoutKeptByPolicy(t *testing.T) {
	s, ctx := testInlineTimeout(t, "cc-inline-timeout-kept", keepSentJobs)
	if job := s.Sim.Jobs()[0]; job.Status != providersim.StatusSucceeded {
		t.Fatalf("after the client's timeout the provider's job is %s; want succeeded", job.Status)
	}
	checkCompleted(t, ctx, s, "cc-inline-timeout-kept", 1)
	r := s.receipt(t, ctx, "cc-inline-timeout-kept")
	if c := r.Cancellation; c == nil || !c.CancellationRequested || c.KeptByPolicy != "before_send" {
		t.Errorf("the receipt's cancellation is %+v; want the client's request, kept_by_policy before_send", c)
	}
}

func testInlineTimeout(t *testing.T, opID string, edit func(string) string) (*stage, context.Context) {
	needClaude(t)
	ctx := testCtx(t, 2*time.Minute)
	s := newStage(t, ctx, interactiveJob, fixtures.ConfigOptions{}, edit)
	m := newModel(t, callOnce(suiteInput(opID)))
	u := gatewayClient(t, s, m, "CLAUDE_CODE_MCP_AUTO_BACKGROUND_MS=0", "MCP_TOOL_TIMEOUT=2000").interactive(t, ctx)
	u.prompt(t, "Run the settlement suite.")
	testwait.Until(t, ctx, "the call's answer", func() (bool, error) { return len(m.Results()) >= 2, nil })
	if res := m.Results()[1]; !res.IsError || !strings.Contains(res.Text, "timed out") {
		t.Fatalf("the call answered %+v; want Claude Code's own timeout", res)
	}
	jobsEnded(t, ctx, s.Sim, 1)
	return s, ctx
}
