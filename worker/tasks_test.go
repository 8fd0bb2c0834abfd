package worker_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
	"github.com/taskgate/taskgate/taskwire"
	"github.com/taskgate/taskgate/worker"
)

// storedResult decodes the result the operation stored.
func storedResult(t *testing.T, op *ledger.Operation) *mcp.CallToolResult {
	t.Helper()
	var res mcp.CallToolResult
	if err := json.Unmarshal(op.Result, &res); err != nil {
		t.Fatalf("stored result %s: %v", op.Result, err)
	}
	return &res
}

// A 2025-11-25 upstream gets params.task only for a tool whose listed
// execution.taskSupport allows it; a tool that forbids tasks is called
// plainly (it would refuse a task-augmented call).
func TestLegacyToolThatForbidsTasks(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	sim := providersim.New(&providersim.Options{})
	t.Cleanup(func() { sim.Close() })
	counter := countCalls(sim.HTTPHandler())
	g := startGateway(t, serve(t, legacyOnly(counter)), fixtures.ConfigOptions{Lease: time.Second},
		withConfig(func(t *testing.T, y string) string {
			// estimate_suite is one of the provider's tools that forbid tasks.
			return replaceOnce(t, y, "      estimate_suite: {}\n", `      estimate_suite:
        consequential: true
        retry_policy: no_automatic_resend
        contract:
          cost:
            estimate: "0.00"
`)
		}))
	const opID = "op-legacy-forbidden"
	logHistory(t, g.Store, opID)
	cs := g.connect(t, ctx, fixtures.EraExtension)
	call := &mcp.CallToolParams{Name: "hosted_test.estimate_suite", Arguments: map[string]any{"suite": "settlement", "operation_id": opID}}
	if task, res, err := taskwire.CallToolAsTask(ctx, cs, call, nil); err != nil || (task == nil && res == nil) {
		t.Fatalf("tools/call = %v, %v, %v", task, res, err)
	}
	op := awaitOperation(t, ctx, g.Store, opID, endedOrReview)
	g.stop(t)
	if op.State != ledger.StateCompleted {
		t.Fatalf("operation = %s (%s, error %s), want completed", op.State, op.StatusMessage, op.Error)
	}
	if res := storedResult(t, op); res.IsError {
		t.Errorf("stored result = %s, want the estimate", op.Result)
	}
	if got := counter.count("estimate_suite"); got != 1 {
		t.Errorf("estimate_suite calls at the provider = %d, want 1", got)
	}
}

// A 2025-11-25 upstream reports a tool result with isError:true as a
// failed task without an error: the result, read with tasks/result, is the
// operation's outcome.
func TestLegacyTaskFailedWithAResult(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	sim := providersim.New(&providersim.Options{JobDuration: 300 * time.Millisecond, Faults: providersim.Faults{FailJobs: true}})
	t.Cleanup(func() { sim.Close() })
	g := startGateway(t, serve(t, legacyOnly(sim.HTTPHandler())), fixtures.ConfigOptions{Lease: time.Second})
	op := g.settle(t, ctx, "op-legacy-is-error")
	jobs := sim.Jobs()
	if len(jobs) != 1 || jobs[0].Protocol != "2025-11-25" || jobs[0].Status != providersim.StatusFailed {
		t.Fatalf("provider jobs = %+v, want one failed job started over 2025-11-25", jobs)
	}
	if op.State != ledger.StateCompleted {
		t.Fatalf("operation = %s (%s, error %s), want completed with the tool's error result", op.State, op.StatusMessage, op.Error)
	}
	if res := storedResult(t, op); !res.IsError || fixtures.ResultJob(res) != jobs[0].ID {
		t.Errorf("stored result = %s, want job %s's result with isError", op.Result, jobs[0].ID)
	}
}

// An upstream that no longer knows a task (tasks/get answers an error) is
// not asked forever: the job is followed through the provider contract,
// or, when the contract cannot read jobs, the operation waits for a human.
func TestUpstreamForgetsTheTask(t *testing.T) {
	tests := []struct {
		name       string
		edit       []func(*gatewaySetup)
		wantState  ledger.State
		wantReason string
	}{
		{name: "the contract fetches the job", wantState: ledger.StateCompleted},
		{
			name:      "the contract can neither fetch nor look up",
			edit:      []func(*gatewaySetup){withConfig(withoutLookup), withConfig(withoutFetch)},
			wantState: ledger.StateReview, wantReason: ledger.ReasonUpstreamOutcomeUnknown,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t, 30*time.Second)
			sim := providersim.New(&providersim.Options{JobDuration: 300 * time.Millisecond})
			t.Cleanup(func() { sim.Close() })
			g := startGateway(t, serve(t, forgetTasks(sim.HTTPHandler())), fixtures.ConfigOptions{Lease: time.Second}, tt.edit...)
			op := g.settle(t, ctx, "op-forgotten-task")
			if op.State != tt.wantState || op.ReviewReason != tt.wantReason {
				t.Fatalf("operation = %s (review reason %q, %s), want %s (%q)", op.State, op.ReviewReason, op.StatusMessage, tt.wantState, tt.wantReason)
			}
			jobs := sim.Jobs()
			if len(jobs) != 1 {
				t.Fatalf("provider jobs = %+v, want 1", jobs)
			}
			if tt.wantState == ledger.StateCompleted && fixtures.ResultJob(storedResult(t, op)) != jobs[0].ID {
				t.Errorf("stored result = %s, want job %s's", op.Result, jobs[0].ID)
			}
		})
	}
}

// A job attached by hand whose provider contract can neither fetch nor
// look up is not polled forever: the operation goes back to review.
func TestAttachedJobThatCannotBeFollowed(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	p := startScripted(t, providerScript{})
	g := startGateway(t, p.url, fixtures.ConfigOptions{UpstreamTimeout: 300 * time.Millisecond, Lease: time.Second},
		withConfig(withoutLookup), withConfig(withoutFetch))
	const opID = "op-attach-unfollowable"
	logHistory(t, g.Store, opID)
	cs := g.connect(t, ctx, fixtures.EraExtension)
	startTask(t, ctx, cs, opID)
	op := awaitOperation(t, ctx, g.Store, opID, endedOrReview)
	if op.State != ledger.StateReview || op.ReviewReason != ledger.ReasonNoAutomaticResend {
		t.Fatalf("operation = %s (review reason %q), want review for %q", op.State, op.ReviewReason, ledger.ReasonNoAutomaticResend)
	}
	if _, err := worker.Resolve(ctx, g.Store, op, worker.Resolution{Attach: scriptedJob, Actor: "test"}); err != nil {
		t.Fatalf("resolve --attach: %v", err)
	}
	op = awaitOperation(t, ctx, g.Store, opID, func(op *ledger.Operation) bool {
		return op.State != ledger.StateRunning && len(events(t, ctx, g.Store, op, ledger.EventRequireReview)) == 2
	})
	if op.State != ledger.StateReview || op.ReviewReason != ledger.ReasonUpstreamOutcomeUnknown {
		t.Fatalf("operation after the attach = %s (review reason %q), want review for %q", op.State, op.ReviewReason, ledger.ReasonUpstreamOutcomeUnknown)
	}
}

// An upstream that answers a plain call with a task runs the work as that
// task: it is bound and followed, not taken for a lost answer.
func TestUnrequestedTaskIsBound(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	sim := providersim.New(&providersim.Options{JobDuration: 300 * time.Millisecond})
	t.Cleanup(func() { sim.Close() })
	g := startGateway(t, serve(t, declareTasks(sim.HTTPHandler(), "run_suite")), fixtures.ConfigOptions{Tasks: "off", Lease: time.Second})
	op := g.settle(t, ctx, "op-unrequested-task")
	jobs := sim.Jobs()
	if len(jobs) != 1 {
		t.Fatalf("provider jobs = %+v, want 1", jobs)
	}
	if op.State != ledger.StateCompleted || fixtures.ResultJob(storedResult(t, op)) != jobs[0].ID {
		t.Fatalf("operation = %s with result %s, want completed with job %s's result", op.State, op.Result, jobs[0].ID)
	}
	if got := lookups(t, ctx, g.Store, op); len(got) != 0 {
		t.Errorf("lookups = %v, want none: the task was the answer", got)
	}
	bound := events(t, ctx, g.Store, op, ledger.EventRemoteJobBound)
	if len(bound) != 1 || bound[0]["kind"] != string(ledger.JobKindUpstreamTask) || bound[0]["remote_job_id"] != jobs[0].ID {
		t.Errorf("remote_job_bound events = %v, want job %s bound as an upstream task", bound, jobs[0].ID)
	}
}

// The provider's own task, read with tasks/get as evidence of its job's
// status, is recorded as the wire JSON of the upstream's era: taskId,
// status, createdAt, and ttl/pollInterval (2025-11-25) or
// ttlMs/pollIntervalMs (2026-07-28), never the gateway's Go field names.
func TestUpstreamTaskEvidenceIsWireJSON(t *testing.T) {
	for _, tt := range []struct {
		era     string
		wrap    func(http.Handler) http.Handler
		keys    []string
		notKeys []string
	}{
		{"2026-07-28", func(h http.Handler) http.Handler { return h }, []string{"taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"},
			[]string{"ID", "Status", "TTL", "PollInterval", "ttl", "pollInterval"}},
		{"2025-11-25", legacyOnly, []string{"taskId", "status", "createdAt", "lastUpdatedAt", "ttl", "pollInterval"},
			[]string{"ID", "Status", "TTL", "PollInterval", "ttlMs", "pollIntervalMs"}},
	} {
		t.Run(tt.era, func(t *testing.T) {
			ctx := testCtx(t, 30*time.Second)
			sim := providersim.New(&providersim.Options{JobDuration: 300 * time.Millisecond})
			t.Cleanup(func() { sim.Close() })
			g := startGateway(t, serve(t, tt.wrap(sim.HTTPHandler())), fixtures.ConfigOptions{Lease: time.Second})
			opID := "op-task-evidence-" + tt.era
			logHistory(t, g.Store, opID)
			cs := g.connect(t, ctx, fixtures.EraExtension)
			startTask(t, ctx, cs, opID)
			op := awaitOperation(t, ctx, g.Store, opID, endedOrReview)
			var answer string
			waitFor(t, ctx, "the provider's task is recorded as evidence", func() bool {
				evs, err := g.Store.EventList(ctx, op.ID)
				if err != nil {
					return false
				}
				for _, e := range evs {
					d, err := ledger.DecodeEventData[ledger.ReconciledData](e)
					if e.Kind != ledger.EventReconciled || err != nil {
						continue
					}
					for _, rec := range d.Evidence {
						if rec.Tool == "tasks/get" {
							answer = rec.Answer
							return true
						}
					}
				}
				return false
			})
			g.stop(t)
			var wire map[string]any
			if err := json.Unmarshal([]byte(answer), &wire); err != nil {
				t.Fatalf("evidence %s: %v", answer, err)
			}
			for _, k := range tt.keys {
				if _, ok := wire[k]; !ok {
					t.Errorf("evidence %s lacks %q", answer, k)
				}
			}
			for _, k := range tt.notKeys {
				if _, ok := wire[k]; ok {
					t.Errorf("evidence %s holds %q", answer, k)
				}
			}
			jobs := sim.Jobs()
			if len(jobs) != 1 || wire["taskId"] != jobs[0].ID || wire["status"] != string(taskwire.StatusCompleted) {
				t.Errorf("evidence %s; want job %+v's task, completed", answer, jobs)
			}
		})
	}
}
