package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/fixtures"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/taskwire"
)

// elicitingClient connects a client whose user answers approval forms
// with answer (nil: declines).
func elicitingClient(t *testing.T, h *fixtures.Harness, version string, answer map[string]any) *mcp.ClientSession {
	t.Helper()
	ctx := testCtx(t)
	key, err := h.Key(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "eliciting"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if answer == nil {
				return &mcp.ElicitResult{Action: "decline"}, nil
			}
			return &mcp.ElicitResult{Action: "accept", Content: answer}, nil
		},
	})
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: h.MCPURL(), MaxRetries: -1,
		HTTPClient: &http.Client{Transport: fixtures.Bearer{Key: key}},
	}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestApprovalByElicitation(t *testing.T) {
	for _, tt := range []struct {
		name, version string
	}{{"2025-11-25 elicitation", "2025-11-25"}, {"2026-07-28 input_required", ""}} {
		t.Run(tt.name, func(t *testing.T) {
			h := harness(t, &fixtures.Options{Config: fixtures.ConfigOptions{Approval: true}})
			cs := elicitingClient(t, h, tt.version, map[string]any{"max_total_cost_usd": "20.00", "max_remote_jobs": 1})
			res, err := cs.CallTool(testCtx(t), fixtures.RunSuiteCall("op-elicited", nil))
			if err != nil || res.IsError {
				t.Fatalf("tools/call = %+v, %v", res, err)
			}
			if n := len(h.Sim.Jobs()); n != 1 {
				t.Fatalf("provider jobs = %d, want 1", n)
			}
			list, err := h.Store.ApprovalList(testCtx(t), &ledger.ApprovalListParams{Tenant: "acme", OperationID: "op-elicited"})
			if err != nil || len(list) != 1 || list[0].MaxTotalCost.String() != "20.00" || list[0].CreatedBy != "elicitation" {
				t.Fatalf("approvals = %+v, %v", list, err)
			}
		})
	}
}

func TestDeclinedApprovalStartsNothing(t *testing.T) {
	h := harness(t, &fixtures.Options{Config: fixtures.ConfigOptions{Approval: true}})
	cs := elicitingClient(t, h, "2025-11-25", nil)
	_, err := cs.CallTool(testCtx(t), fixtures.RunSuiteCall("op-declined", nil))
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) {
		t.Fatalf("tools/call error = %v, want a JSON-RPC error", err)
	}
	var data struct{ Reason string }
	_ = json.Unmarshal(rpcErr.Data, &data)
	if data.Reason != "approval_declined" {
		t.Fatalf("reason = %q (%s), want approval_declined", data.Reason, rpcErr.Message)
	}
	if n := len(h.Sim.Jobs()); n != 0 {
		t.Fatalf("provider jobs = %d, want 0", n)
	}
}

func TestWithoutElicitationTheErrorSaysHowToApprove(t *testing.T) {
	h := harness(t, &fixtures.Options{Config: fixtures.ConfigOptions{Approval: true}})
	cs := connect(t, h, "acme", fixtures.EraExtension)
	_, _, err := taskwire.CallToolAsTask(testCtx(t), cs, fixtures.RunSuiteCall("op-unapproved", nil), nil)
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("error = %v, want -32602", err)
	}
	var data struct {
		Reason       string `json:"reason"`
		HowToApprove string `json:"how_to_approve"`
	}
	_ = json.Unmarshal(rpcErr.Data, &data)
	if data.Reason != ledger.ReasonApprovalRequired || data.HowToApprove == "" {
		t.Fatalf("data = %s", rpcErr.Data)
	}
	if n := len(h.Sim.Jobs()); n != 0 {
		t.Fatalf("provider jobs = %d, want 0", n)
	}
}
