package mcpserver_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/sim/fixtures"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/taskwire"
)

func TestBadInputWritesNothing(t *testing.T) {
	h := harness(t, nil)
	ctx := testCtx(t)
	key, err := h.Key(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	post := func(body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.MCPURL(), strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	t.Run("malformed JSON", func(t *testing.T) {
		resp, body := post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`)
		if resp.StatusCode < 400 && !strings.Contains(body, "-32700") {
			t.Fatalf("status %d body %s; want a parse error", resp.StatusCode, body)
		}
	})
	t.Run("oversized body", func(t *testing.T) {
		big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"pad":"` + strings.Repeat("a", int(h.Config.MaxBodyBytes)) + `"}}}`
		if resp, _ := post(big); resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d, want 413", resp.StatusCode)
		}
	})
	t.Run("no credentials", func(t *testing.T) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.MCPURL(), strings.NewReader(`{}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "resource_metadata=") {
			t.Fatalf("status %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	})

	cs := connect(t, h, "acme", fixtures.EraExtension)
	t.Run("unknown tool", func(t *testing.T) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hosted_test.nope", Arguments: map[string]any{}})
		if err == nil && (res == nil || !res.IsError) {
			t.Fatalf("unknown tool answered %+v", res)
		}
	})
	t.Run("operation_id of the wrong type", func(t *testing.T) {
		_, _, err := taskwire.CallToolAsTask(ctx, cs, &mcp.CallToolParams{Name: fixtures.RunSuiteTool, Arguments: map[string]any{"suite": "x", "operation_id": 42}}, nil)
		if code, reason, _ := fixtures.ErrorReason(err); code != jsonrpc.CodeInvalidParams || reason != "invalid_arguments" {
			t.Fatalf("error = %v (code %d reason %q)", err, code, reason)
		}
	})
	t.Run("integer beyond 2^53", func(t *testing.T) {
		_, _, err := taskwire.CallToolAsTask(ctx, cs, &mcp.CallToolParams{Name: fixtures.RunSuiteTool, Arguments: json.RawMessage(`{"suite":"x","shard":9007199254740993,"operation_id":"op-big"}`)}, nil)
		if code, reason, _ := fixtures.ErrorReason(err); code != jsonrpc.CodeInvalidParams || reason != "invalid_arguments" {
			t.Fatalf("error = %v (code %d reason %q)", err, code, reason)
		}
	})
	t.Run("no operation ID", func(t *testing.T) {
		_, _, err := taskwire.CallToolAsTask(ctx, cs, &mcp.CallToolParams{Name: fixtures.RunSuiteTool, Arguments: map[string]any{"suite": "x"}}, nil)
		code, reason, _ := fixtures.ErrorReason(err)
		if code != jsonrpc.CodeInvalidParams || reason != ledger.ReasonOperationIDRequired || !strings.Contains(err.Error(), "operation_id") {
			t.Fatalf("error = %v (code %d reason %q)", err, code, reason)
		}
	})
	t.Run("unknown task", func(t *testing.T) {
		_, err := taskwire.GetTask(ctx, cs, "task-doesnotexist")
		if code, _, _ := fixtures.ErrorReason(err); code != jsonrpc.CodeInvalidParams {
			t.Fatalf("tasks/get of an unknown task = %v, want -32602", err)
		}
	})
	t.Run("another tenant's task looks unknown", func(t *testing.T) {
		task, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall("op-mine", nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		other := connect(t, h, "globex", fixtures.EraExtension)
		_, err = taskwire.GetTask(ctx, other, task.ID)
		if code, _, _ := fixtures.ErrorReason(err); code != jsonrpc.CodeInvalidParams {
			t.Fatalf("tasks/get of another tenant's task = %v, want -32602 like an unknown one", err)
		}
	})
	ops, err := h.Store.OperationList(ctx, &ledger.OperationListParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 1 || ops[0].OperationID != "op-mine" {
		t.Fatalf("operations after bad input = %d, want only op-mine", len(ops))
	}
}

// TestArgumentsAreCheckedAsSent: taking the operation_id argument out of
// the arguments must not hide what canon refuses in them as sent.
func TestArgumentsAreCheckedAsSent(t *testing.T) {
	h := harness(t, nil)
	cs := connect(t, h, "acme", fixtures.EraExtension)
	for _, tt := range []struct{ name, args string }{
		{"duplicate key", `{"suite":"x","suite":"y","operation_id":"op-dup"}`},
		{"duplicate operation_id", `{"suite":"x","operation_id":"op-dup","operation_id":"op-other"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := taskwire.CallToolAsTask(testCtx(t), cs, &mcp.CallToolParams{Name: fixtures.RunSuiteTool, Arguments: json.RawMessage(tt.args)}, nil)
			if code, reason, _ := fixtures.ErrorReason(err); code != jsonrpc.CodeInvalidParams || reason != "invalid_arguments" {
				t.Fatalf("arguments %s: error = %v (code %d reason %q); want invalid_arguments", tt.args, err, code, reason)
			}
		})
	}
	if ops, err := h.Store.OperationList(testCtx(t), &ledger.OperationListParams{Limit: 10}); err != nil || len(ops) != 0 {
		t.Fatalf("operations = %d, %v; want none", len(ops), err)
	}
}
