package mcpserver_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/mcpserver"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/taskwire"
)

// inRun is a run_suite call of operation opID with args, naming run in
// _meta when run is not nil.
func inRun(opID string, args map[string]any, run any) *mcp.CallToolParams {
	p := fixtures.RunSuiteCall(opID, args)
	if run != nil {
		p.Meta = mcp.Meta{mcpserver.MetaRunID: run}
	}
	return p
}

// TestRunIDIsRecordedOnEveryAttempt: the run ID in _meta and the MCP
// session (a 2025-11-25 session's; the 2026-07-28 era has none) are
// recorded on the created, attached and conflicting attempts alike, and
// select the run's operation.
func TestRunIDIsRecordedOnEveryAttempt(t *testing.T) {
	for _, era := range []fixtures.Era{fixtures.EraExtension, fixtures.EraLegacy} {
		t.Run(string(era), func(t *testing.T) {
			h := harness(t, nil)
			cs := connect(t, h, "acme", era)
			ctx := testCtx(t)
			session := ""
			if era == fixtures.EraLegacy {
				session = cs.ID()
				if session == "" {
					t.Fatal("a 2025-11-25 session without a session ID")
				}
			}
			task, _, err := taskwire.CallToolAsTask(ctx, cs, inRun("op-run", nil, "ci-4711"), nil)
			if err != nil || task == nil {
				t.Fatalf("first call = %v, %v; want a task", task, err)
			}
			if again, _, err := taskwire.CallToolAsTask(ctx, cs, inRun("op-run", nil, "ci-4711"), nil); err != nil || again == nil || again.ID != task.ID {
				t.Fatalf("retry = %v, %v; want task %s", again, err, task.ID)
			}
			_, _, err = taskwire.CallToolAsTask(ctx, cs, inRun("op-run", map[string]any{"suite": "other"}, "ci-4711"), nil)
			if _, reason, _ := fixtures.ErrorReason(err); reason != ledger.ReasonArgumentsDiffer {
				t.Fatalf("call with other arguments = %v; want %s", err, ledger.ReasonArgumentsDiffer)
			}
			if _, _, err := taskwire.CallToolAsTask(ctx, cs, inRun("op-run", nil, nil), nil); err != nil {
				t.Fatalf("retry naming no run: %v", err)
			}
			awaitTask(t, cs, task.ID)

			op, err := h.Store.OperationGet(ctx, &ledger.OperationGetParams{Tenant: "acme", TaskID: task.ID})
			if err != nil {
				t.Fatal(err)
			}
			atts, err := h.Store.AttemptList(ctx, op.ID)
			if err != nil {
				t.Fatal(err)
			}
			var got [][3]string
			for _, a := range atts {
				got = append(got, [3]string{string(a.Decision), a.RunID, a.SessionID})
			}
			want := [][3]string{{"created", "ci-4711", session}, {"attached", "ci-4711", session}, {"conflict", "ci-4711", session}, {"attached", "", session}}
			if !slices.Equal(got, want) {
				t.Errorf("attempts as (decision, run, session) = %q, want %q", got, want)
			}
			ops, err := h.Store.OperationList(ctx, &ledger.OperationListParams{Tenant: "acme", RunID: "ci-4711"})
			if err != nil || len(ops) != 1 || ops[0].ID != op.ID {
				t.Errorf("operations of run ci-4711 = %v, %v; want op-run", ops, err)
			}
			if session != "" {
				ops, err := h.Store.OperationList(ctx, &ledger.OperationListParams{SessionID: session})
				if err != nil || len(ops) != 1 || ops[0].ID != op.ID {
					t.Errorf("operations of session %s = %v, %v; want op-run", session, ops, err)
				}
			}
		})
	}
}

// TestInvalidRunIDMetaIsRefused: a run ID that is not a string, or is
// outside the alphabet operation IDs have (too long, a control character,
// a character that could steer a path or a display) is refused with
// -32602 and reason invalid_run_id, naming the _meta key, the first
// offending character and its byte, and starts nothing; 255 bytes of the
// alphabet are a run ID.
func TestInvalidRunIDMetaIsRefused(t *testing.T) {
	h := harness(t, nil)
	cs := connect(t, h, "acme", fixtures.EraExtension)
	ctx := testCtx(t)
	for _, tc := range []struct {
		name string
		run  any
		want string
	}{
		{"a number", 4711, "must be a string"},
		{"256 bytes", strings.Repeat("r", 256), "256 bytes long; use at most 255"},
		{"a newline", "ci-4711\nforged: line", `"\n" (U+000A) at byte 7`},
		{"an escape", "ci-\x1b[31m4711", `"\x1b" (U+001B) at byte 3`},
		{"a slash", "ci/../4711", `"/" (U+002F) at byte 2`},
		{"a bidi override", "ci-\u202e1174", `"\u202e" (U+202E) at byte 3`},
		{"non-ASCII", "ci-é", `"\u00e9" (U+00E9) at byte 3`},
		{"a dot segment", "..", "dot segment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := taskwire.CallToolAsTask(ctx, cs, inRun("op-"+strings.ReplaceAll(tc.name, " ", "-"), nil, tc.run), nil)
			code, reason, _ := fixtures.ErrorReason(err)
			var data map[string]any
			if e := (*jsonrpc.Error)(nil); errors.As(err, &e) {
				_ = json.Unmarshal(e.Data, &data)
			}
			if code != jsonrpc.CodeInvalidParams || reason != mcpserver.ReasonInvalidRunID || data["meta"] != mcpserver.MetaRunID ||
				!strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v (code %d, reason %q, data %v); want -32602 %s naming %s and saying %q",
					err, code, reason, data, mcpserver.ReasonInvalidRunID, mcpserver.MetaRunID, tc.want)
			}
		})
	}
	if ops, err := h.Store.OperationList(ctx, &ledger.OperationListParams{}); err != nil || len(ops) != 0 {
		t.Fatalf("operations after refused run IDs = %d, %v; want none", len(ops), err)
	}
	longest := strings.Repeat("r", 250) + "-._:@"
	task, _, err := taskwire.CallToolAsTask(ctx, cs, inRun("op-longest-run", nil, longest), nil)
	if err != nil || task == nil {
		t.Fatalf("a run ID of 255 bytes = %v, %v; want a task", task, err)
	}
	if ops, err := h.Store.OperationList(ctx, &ledger.OperationListParams{RunID: longest}); err != nil || len(ops) != 1 {
		t.Fatalf("operations of the 255-byte run = %d, %v; want 1", len(ops), err)
	}
}
