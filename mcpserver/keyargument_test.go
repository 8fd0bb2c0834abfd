package mcpserver_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/taskwire"
)

// TestContractKeyArgumentIsTaskgates: the argument in which the provider
// contract passes taskgate's key (run_suite's idempotency_key) is not
// shown to the model, whose own retry rule is operation_id; a value a
// client sends in it anyway is discarded, counts in no fingerprint, and
// the provider receives taskgate's key. A retry with another value
// attaches, and the provider has one job.
func TestContractKeyArgumentIsTaskgates(t *testing.T) {
	h := harness(t, nil)
	cs := connect(t, h, "acme", fixtures.EraExtension)
	ctx := testCtx(t)

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name != fixtures.RunSuiteTool {
			continue
		}
		b, _ := json.Marshal(tool.InputSchema)
		var schema struct {
			Properties map[string]any `json:"properties"`
			Required   []string       `json:"required"`
		}
		_ = json.Unmarshal(b, &schema)
		if _, shown := schema.Properties["idempotency_key"]; shown || slices.Contains(schema.Required, "idempotency_key") {
			t.Errorf("%s lists the contract's key argument idempotency_key: %s", tool.Name, b)
		}
		if _, shown := schema.Properties["operation_id"]; !shown {
			t.Errorf("%s does not list operation_id: %s", tool.Name, b)
		}
	}

	call := func(key string) *taskwire.Task {
		t.Helper()
		task, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall("op-keyed", map[string]any{"suite": "settlement", "idempotency_key": key}), nil)
		if err != nil || task == nil {
			t.Fatalf("call with idempotency_key %q = %+v, %v; want a task", key, task, err)
		}
		return task
	}
	first := call("model-chose-this")
	retry := call("model-chose-another")
	if retry.ID != first.ID {
		t.Fatalf("retry with another idempotency_key got task %s, want %s (attached)", retry.ID, first.ID)
	}
	if done := awaitTask(t, cs, first.ID); done.Status != taskwire.StatusCompleted {
		t.Fatalf("task = %+v, want completed", done)
	}
	op, err := h.Store.OperationGet(ctx, &ledger.OperationGetParams{Tenant: "acme", OperationID: "op-keyed"})
	if err != nil {
		t.Fatal(err)
	}
	var stored map[string]any
	_ = json.Unmarshal(op.Arguments, &stored)
	if _, kept := stored["idempotency_key"]; kept {
		t.Errorf("the operation keeps the client's idempotency_key: %s", op.Arguments)
	}
	jobs := h.Sim.Jobs()
	if len(jobs) != 1 || jobs[0].IdempotencyKey != op.ProviderKey() {
		t.Fatalf("provider jobs = %+v; want one, keyed %q", jobs, op.ProviderKey())
	}
	atts, err := h.Store.AttemptList(ctx, op.ID)
	if err != nil || len(atts) != 2 || atts[1].Decision != ledger.DecisionAttached {
		t.Fatalf("attempts = %+v, %v; want created, attached", atts, err)
	}
}

// TestKeyArgumentOfAnEarlierOperation: an operation accepted while the
// contract's key argument still counted in the fingerprint stored the
// fingerprint of the value its client sent there. A retry of it, with any
// value or none, attaches to it rather than conflicting.
func TestKeyArgumentOfAnEarlierOperation(t *testing.T) {
	h := harness(t, nil)
	cs := connect(t, h, "acme", fixtures.EraExtension)
	ctx := testCtx(t)
	earlier := json.RawMessage(`{"suite":"settlement","idempotency_key":"chosen-by-the-model"}`)
	fp, err := canon.Compute("hosted_test", "run_suite", earlier)
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Store.Accept(ctx, &ledger.AcceptParams{
		Tenant: "acme", OperationID: "op-earlier", Upstream: "hosted_test", Tool: "run_suite", Fingerprint: string(fp),
		Arguments: earlier, RequestID: ledger.NewRequestID(), TaskID: ledger.NewTaskID(), Source: "test", RetryPolicy: ledger.RetryLookupThenAttach,
	})
	if err != nil || res.Decision != ledger.DecisionCreated {
		t.Fatalf("the earlier acceptance = %+v, %v", res, err)
	}
	for _, args := range []map[string]any{
		{"suite": "settlement", "idempotency_key": "another-value"},
		{"suite": "settlement", "idempotency_key": "chosen-by-the-model"},
		{"suite": "settlement"},
	} {
		task, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall("op-earlier", args), nil)
		if err != nil || task == nil || task.ID != res.Operation.TaskID {
			t.Fatalf("retry with %v = %+v, %v; want the earlier operation's task %s", args, task, err, res.Operation.TaskID)
		}
	}
	// Other arguments are still other work.
	if _, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall("op-earlier", map[string]any{"suite": "billing", "idempotency_key": "chosen-by-the-model"}), nil); err == nil {
		t.Fatal("a call with other arguments under the earlier operation ID was accepted; want a conflict")
	}
}
