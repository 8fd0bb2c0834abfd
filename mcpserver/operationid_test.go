package mcpserver_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/mcpserver"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/taskwire"
)

// TestOperationIDOutsideTheAlphabetIsRefused: an operation ID that could
// steer a URL path (here one that climbs to another approval request's
// approve route) is refused at acceptance, from each of its three sources,
// with -32602 and reason invalid_operation_id naming the first offending
// character and its byte; nothing is recorded under it, so no operation
// or approval request exists, and a call with a good ID still runs.
func TestOperationIDOutsideTheAlphabetIsRefused(t *testing.T) {
	h := harness(t, &fixtures.Options{Config: fixtures.ConfigOptions{Approval: true}})
	cs := connect(t, h, "acme", fixtures.EraExtension)
	ctx := testCtx(t)
	const hostile = "../requests/1/approve?x="
	for _, tc := range []struct {
		source string
		call   *mcp.CallToolParams
	}{
		{"argument", fixtures.RunSuiteCall(hostile, nil)},
		{"_meta", &mcp.CallToolParams{Name: fixtures.RunSuiteTool, Arguments: map[string]any{"suite": "settlement"},
			Meta: mcp.Meta{mcpserver.MetaOperationID: hostile}}},
		{"idempotencyKey", &mcp.CallToolParams{Name: fixtures.RunSuiteTool, Arguments: map[string]any{"suite": "settlement"},
			Meta: mcp.Meta{taskwire.MetaIdempotencyKey: hostile}}},
	} {
		t.Run(tc.source, func(t *testing.T) {
			task, _, err := taskwire.CallToolAsTask(ctx, cs, tc.call, nil)
			var e *jsonrpc.Error
			if !errors.As(err, &e) {
				t.Fatalf("call = task %+v, error %v; want a JSON-RPC error", task, err)
			}
			var data map[string]any
			_ = json.Unmarshal(e.Data, &data)
			if e.Code != jsonrpc.CodeInvalidParams || data["reason"] != ledger.ReasonInvalidOperationID ||
				data["position"] != float64(2) || data["character"] != "/" || !strings.Contains(e.Message, `"/" (U+002F) at byte 2`) {
				t.Fatalf("error = %d %q, data %v; want -32602 %s naming \"/\" at byte 2", e.Code, e.Message, data, ledger.ReasonInvalidOperationID)
			}
			if _, ok := data["operation_id"]; ok {
				t.Errorf("the refusal echoes the refused operation ID: %v", data)
			}
		})
	}
	if ops, err := h.Store.OperationList(ctx, &ledger.OperationListParams{Tenant: "acme"}); err != nil || len(ops) != 0 {
		t.Fatalf("operations after the refusals = %d, %v; want none", len(ops), err)
	}
	if reqs, err := h.Store.ApprovalRequestList(ctx, &ledger.ApprovalRequestListParams{Tenant: "acme"}); err != nil || len(reqs) != 0 {
		t.Fatalf("approval requests after the refusals = %d, %v; want none", len(reqs), err)
	}
	if n := len(h.Sim.Jobs()); n != 0 {
		t.Fatalf("provider jobs = %d, want 0", n)
	}
	// The tool's schema shows the model the rule.
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var prop map[string]any
	for _, tool := range tools.Tools {
		if tool.Name == fixtures.RunSuiteTool {
			b, _ := json.Marshal(tool.InputSchema)
			var schema struct {
				Properties map[string]map[string]any `json:"properties"`
			}
			_ = json.Unmarshal(b, &schema)
			prop = schema.Properties[mcpserver.OperationIDArgument]
		}
	}
	if prop["pattern"] != ledger.IDPattern || prop["maxLength"] != float64(ledger.MaxIDBytes) || !strings.Contains(fmt.Sprint(prop["description"]), ledger.IDPunctuation) {
		t.Errorf("the operation_id argument's schema = %v; want the ID rule's pattern, length and alphabet", prop)
	}
	task, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall("op-after:2026-12-02", nil), nil)
	if err != nil || task == nil {
		t.Fatalf("a call with a good operation ID = %+v, %v; want a task", task, err)
	}
}
