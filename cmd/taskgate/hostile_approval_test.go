package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/sim/fixtures"
	"github.com/taskgate/taskgate/ledger"
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

// approvalClient connects a go-sdk client of tenant speaking version ("":
// the newest) whose elicitation handler is handle.
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
