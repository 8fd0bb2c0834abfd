package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/taskwire"
)

// A hostile agent files a 64-runner run_matrix (approval request 1), then
// a small call whose operation ID climbs from its console page to request
// 1's approve route. Against a real gateway process, that call is refused
// at acceptance with -32602 invalid_operation_id naming "/" at byte 2, in
// both protocol eras and for another tenant alike, and refused again on a
// retry: nothing is kept under the ID, no approval request joins request
// 1 in the approvers' inbox, request 1 stays pending and no job runs.
func TestHostileRouteOperationIDIsRefusedAtAcceptance(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	h, err := fixtures.New(ctx, &fixtures.Options{Process: []string{gatewayBinary}, Config: fixtures.ConfigOptions{Approval: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	acme, err := h.Connect(ctx, "acme", fixtures.EraExtension)
	if err != nil {
		t.Fatal(err)
	}
	defer acme.Close()
	task, _, err := taskwire.CallToolAsTask(ctx, acme, fixtures.RunMatrixCall("op-matrix-64", "settlement", 64), nil)
	if err != nil || task == nil || task.Status != taskwire.StatusWorking {
		t.Fatalf("the big run_matrix = %+v, %v; want a task waiting for approval", task, err)
	}
	pending := routePending(t, ctx, h)
	if len(pending) != 1 {
		t.Fatalf("pending approval requests = %+v; want the run_matrix's one", pending)
	}
	target := pending[0]
	hostile := fmt.Sprintf("../requests/%d/approve?x=", target.ID)

	for _, tc := range []struct {
		tenant string
		era    fixtures.Era
	}{
		{"acme", fixtures.EraExtension}, {"acme", fixtures.EraLegacy}, {"acme", fixtures.EraExtension}, {"globex", fixtures.EraExtension},
	} {
		cs, err := h.Connect(ctx, tc.tenant, tc.era)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall(hostile, nil), nil)
		cs.Close()
		var e *jsonrpc.Error
		if !errors.As(err, &e) {
			t.Fatalf("%s over %s: the hostile call = %v; want a JSON-RPC error", tc.tenant, tc.era, err)
		}
		var data map[string]any
		_ = json.Unmarshal(e.Data, &data)
		if e.Code != jsonrpc.CodeInvalidParams || data["reason"] != ledger.ReasonInvalidOperationID || data["position"] != float64(2) || data["character"] != "/" {
			t.Fatalf("%s over %s: the hostile call = %d %q %v; want -32602 %s naming \"/\" at byte 2",
				tc.tenant, tc.era, e.Code, e.Message, data, ledger.ReasonInvalidOperationID)
		}
		for _, tenant := range []string{"acme", "globex"} {
			if op, err := h.Store.OperationGet(ctx, &ledger.OperationGetParams{Tenant: tenant, OperationID: hostile}); !errors.Is(err, ledger.ErrNotFound) {
				t.Fatalf("%s's operation %q = %+v, %v; want none", tenant, hostile, op, err)
			}
		}
	}
	if now := routePending(t, ctx, h); len(now) != 1 || now[0].ID != target.ID {
		t.Fatalf("pending approval requests after the hostile calls = %+v; want request %d alone", now, target.ID)
	}
	if approvals, err := h.Store.ApprovalList(ctx, &ledger.ApprovalListParams{Tenant: "acme"}); err != nil || len(approvals) != 0 {
		t.Fatalf("approvals = %+v, %v; want none", approvals, err)
	}
	if n := len(h.Sim.Jobs()); n != 0 {
		t.Fatalf("provider jobs = %d, want 0", n)
	}
}

// routePending lists every tenant's pending approval requests.
func routePending(t *testing.T, ctx context.Context, h *fixtures.Harness) []*ledger.ApprovalRequest {
	t.Helper()
	var all []*ledger.ApprovalRequest
	for _, tenant := range []string{"acme", "globex"} {
		list, err := h.Store.ApprovalRequestList(ctx, &ledger.ApprovalRequestListParams{Tenant: tenant, Statuses: []ledger.ApprovalRequestStatus{ledger.RequestPending}})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, list...)
	}
	return all
}
