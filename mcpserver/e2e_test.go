package mcpserver_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
	"github.com/taskgate/taskgate/taskwire"
)

func harness(t *testing.T, opts *fixtures.Options) *fixtures.Harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := fixtures.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func connect(t *testing.T, h *fixtures.Harness, tenant string, era fixtures.Era) *mcp.ClientSession {
	t.Helper()
	cs, err := h.Connect(testCtx(t), tenant, era)
	if err != nil {
		t.Fatalf("connect %s: %v", era, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// jobOf reads the provider's job ID from a run_suite result and fails the
// test when there is none.
func jobOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	job := fixtures.ResultJob(res)
	if job == "" {
		t.Fatalf("result without a job ID: %s", fixtures.ResultText(res))
	}
	return job
}

// awaitTask polls the task until it ends, or needs input.
func awaitTask(t *testing.T, cs *mcp.ClientSession, id string) *taskwire.Task {
	t.Helper()
	task, err := taskwire.AwaitTask(testCtx(t), cs, id, 50*time.Millisecond)
	if err != nil {
		t.Fatalf("await task %s: %v", id, err)
	}
	return task
}

func TestConsequentialCallBecomesTask(t *testing.T) {
	for _, era := range []fixtures.Era{fixtures.EraExtension, fixtures.EraLegacy} {
		t.Run(string(era), func(t *testing.T) {
			h := harness(t, nil)
			cs := connect(t, h, "acme", era)
			ctx := testCtx(t)
			task, res, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall("op-1", nil), nil)
			if err != nil || task == nil {
				t.Fatalf("tools/call = %v, %v, %v; want a task", task, res, err)
			}
			again, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall("op-1", nil), nil)
			if err != nil || again == nil || again.ID != task.ID {
				t.Fatalf("retry with the same operation ID = %v, %v; want task %s", again, err, task.ID)
			}
			done := awaitTask(t, cs, task.ID)
			if done.Status != taskwire.StatusCompleted {
				t.Fatalf("task ended %s: %+v", done.Status, done.Error)
			}
			var result *mcp.CallToolResult
			if era == fixtures.EraLegacy {
				result, err = taskwire.TaskResult(ctx, cs, task.ID)
				if err != nil {
					t.Fatal(err)
				}
			} else {
				result = &mcp.CallToolResult{}
				if err := json.Unmarshal(done.Result, result); err != nil {
					t.Fatal(err)
				}
			}
			if job := jobOf(t, result); job != "hosted-suite-9912" {
				t.Errorf("result job = %s", job)
			}
			if n := len(h.Sim.Jobs()); n != 1 {
				t.Errorf("provider jobs = %d, want 1", n)
			}
		})
	}
}

func TestPlainClientWaitsForTheResult(t *testing.T) {
	h := harness(t, nil)
	cs := connect(t, h, "acme", fixtures.EraPlain)
	res, err := cs.CallTool(testCtx(t), fixtures.RunSuiteCall("op-plain", nil))
	if err != nil || res.IsError {
		t.Fatalf("tools/call = %+v, %v", res, err)
	}
	if jobOf(t, res) != "hosted-suite-9912" || len(h.Sim.Jobs()) != 1 {
		t.Fatalf("jobs = %v", h.Sim.Jobs())
	}
	// The retry attaches and gets the stored result; nothing new starts.
	res2, err := cs.CallTool(testCtx(t), fixtures.RunSuiteCall("op-plain", nil))
	if err != nil || jobOf(t, res2) != "hosted-suite-9912" || len(h.Sim.Jobs()) != 1 {
		t.Fatalf("retry = %+v, %v; provider jobs %d", res2, err, len(h.Sim.Jobs()))
	}
}

func TestPassThrough(t *testing.T) {
	h := harness(t, nil)
	for _, era := range []fixtures.Era{fixtures.EraExtension, fixtures.EraLegacy, fixtures.EraPlain} {
		cs := connect(t, h, "acme", era)
		res, err := cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: "hosted_test.estimate_suite", Arguments: map[string]any{"suite": "x"}})
		if err != nil || res.IsError {
			t.Fatalf("%s: estimate_suite = %+v, %v", era, res, err)
		}
	}
	if n := len(h.Sim.Jobs()); n != 0 {
		t.Fatalf("provider jobs = %d, want 0", n)
	}
}

func TestRestartMidTaskLosesNothing(t *testing.T) {
	h := harness(t, &fixtures.Options{Sim: providersim.Options{JobDuration: 1500 * time.Millisecond}})
	cs := connect(t, h, "acme", fixtures.EraExtension)
	ctx := testCtx(t)
	task, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall("op-restart", nil), nil)
	if err != nil || task == nil {
		t.Fatalf("tools/call = %v, %v", task, err)
	}
	cs.Close()
	if err := h.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cs = connect(t, h, "acme", fixtures.EraExtension)
	done := awaitTask(t, cs, task.ID)
	if done.Status != taskwire.StatusCompleted {
		t.Fatalf("after restart the task ended %s (%+v)", done.Status, done.Error)
	}
	if n := len(h.Sim.Jobs()); n != 1 {
		t.Fatalf("provider jobs = %d, want 1", n)
	}
}
