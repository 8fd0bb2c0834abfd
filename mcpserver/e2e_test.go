package mcpserver_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/fixtures"
	"github.com/taskgate/taskgate/providersim"
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

func runSuite(opID string) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: "hosted_test.run_suite", Arguments: map[string]any{"suite": "settlement", "operation_id": opID}}
}

func jobOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	b, _ := json.Marshal(res.StructuredContent)
	var sc struct {
		JobID string `json:"job_id"`
	}
	_ = json.Unmarshal(b, &sc)
	if sc.JobID == "" {
		t.Fatalf("result without a job ID: %s", b)
	}
	return sc.JobID
}

func awaitTask(t *testing.T, cs *mcp.ClientSession, id string) *taskwire.Task {
	t.Helper()
	ctx := testCtx(t)
	for {
		task, err := taskwire.GetTask(ctx, cs, id)
		if err != nil {
			t.Fatalf("tasks/get %s: %v", id, err)
		}
		if task.Status.IsTerminal() {
			return task
		}
		select {
		case <-ctx.Done():
			t.Fatalf("task %s still %s", id, task.Status)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func TestConsequentialCallBecomesTask(t *testing.T) {
	for _, era := range []fixtures.Era{fixtures.EraExtension, fixtures.EraLegacy} {
		t.Run(string(era), func(t *testing.T) {
			h := harness(t, nil)
			cs := connect(t, h, "acme", era)
			ctx := testCtx(t)
			task, res, err := taskwire.CallToolAsTask(ctx, cs, runSuite("op-1"), nil)
			if err != nil || task == nil {
				t.Fatalf("tools/call = %v, %v, %v; want a task", task, res, err)
			}
			again, _, err := taskwire.CallToolAsTask(ctx, cs, runSuite("op-1"), nil)
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
	res, err := cs.CallTool(testCtx(t), runSuite("op-plain"))
	if err != nil || res.IsError {
		t.Fatalf("tools/call = %+v, %v", res, err)
	}
	if jobOf(t, res) != "hosted-suite-9912" || len(h.Sim.Jobs()) != 1 {
		t.Fatalf("jobs = %v", h.Sim.Jobs())
	}
	// The retry attaches and gets the stored result; nothing new starts.
	res2, err := cs.CallTool(testCtx(t), runSuite("op-plain"))
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
	task, _, err := taskwire.CallToolAsTask(ctx, cs, runSuite("op-restart"), nil)
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
