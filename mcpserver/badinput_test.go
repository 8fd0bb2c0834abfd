package mcpserver_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/sim/fixtures"
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

// postBody sends body to the gateway at url as key with headers, and
// returns the response and its JSON-RPC message (nil when it is none).
func postBody(t *testing.T, url, key string, headers map[string]string, body string) (*http.Response, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var msg map[string]any
	if json.Unmarshal(lastMessage(resp, data), &msg) != nil {
		t.Logf("HTTP %d body %q is not JSON", resp.StatusCode, data)
	}
	return resp, msg
}

// TestMalformedJSONIsAParseError: whichever way a POST would go — relayed
// as a 2026-07-28 pass-through call or a 2025-11-25 session's, or to the
// stateless or the stateful handler — a body that is not JSON is answered
// with the JSON-RPC parse error: -32700, id null, as JSON, HTTP 400.
func TestMalformedJSONIsAParseError(t *testing.T) {
	rec, up := forwardingUpstream(t, 0)
	url, keys := plumbingGatewayKeys(t, testCtx(t), up.URL, "  - name: plumbing", fixtures.ConfigOptions{}, "acme")
	cs := legacySession(t, url, keys[0], "legacy-client", false, nil)
	for _, path := range []struct {
		name    string
		headers map[string]string
	}{
		{"2026-07-28 relay", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "plumbing.meta"}},
		{"2026-07-28 stateless", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}},
		{"2025-11-25 session relay", map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Session-Id": cs.ID()}},
		{"stateful", nil},
	} {
		for _, body := range []string{
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"plumbing.meta","arguments":{`,
			`not json`,
		} {
			t.Run(path.name, func(t *testing.T) {
				resp, msg := postBody(t, url, keys[0], path.headers, body)
				e, _ := msg["error"].(map[string]any)
				id, hasID := msg["id"]
				if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/json" ||
					msg["jsonrpc"] != "2.0" || !hasID || id != nil || e["code"] != float64(jsonrpc.CodeParseError) {
					t.Errorf("body %q answered HTTP %d %q %v; want 400 application/json with a -32700 error and id null",
						body, resp.StatusCode, resp.Header.Get("Content-Type"), msg)
				}
			})
		}
	}
	if n := len(rec.seen()); n != 0 {
		t.Errorf("the upstream saw %d calls; want none", n)
	}
}

// TestArgumentsBeyondDoubles: a number no double holds is the client's
// invalid argument, named by its path, in both eras, for a consequential
// tool and for one passed through (relayed or not); nothing is started.
func TestArgumentsBeyondDoubles(t *testing.T) {
	want := func(t *testing.T, code int64, data map[string]any, path string) {
		t.Helper()
		if code != jsonrpc.CodeInvalidParams || data["reason"] != taskwire.ReasonInvalidArguments || data["path"] != path {
			t.Errorf("error code %d data %v; want -32602 with reason %s and path %s", code, data, taskwire.ReasonInvalidArguments, path)
		}
	}
	errorData := func(t *testing.T, err error) (int64, map[string]any) {
		t.Helper()
		var e *jsonrpc.Error
		if !errors.As(err, &e) {
			t.Fatalf("error = %v, want a JSON-RPC error", err)
		}
		var data map[string]any
		_ = json.Unmarshal(e.Data, &data)
		return e.Code, data
	}

	t.Run("consequential", func(t *testing.T) {
		h := harness(t, nil)
		for _, era := range []fixtures.Era{fixtures.EraExtension, fixtures.EraLegacy} {
			t.Run(string(era), func(t *testing.T) {
				cs := connect(t, h, "acme", era)
				_, _, err := taskwire.CallToolAsTask(testCtx(t), cs, &mcp.CallToolParams{Name: fixtures.RunSuiteTool,
					Arguments: json.RawMessage(`{"suite":"x","shards":[1,-1e400],"operation_id":"op-inf"}`)}, nil)
				code, data := errorData(t, err)
				want(t, code, data, "arguments.shards[1]")
			})
		}
		if ops, err := h.Store.OperationList(testCtx(t), &ledger.OperationListParams{Limit: 10}); err != nil || len(ops) != 0 {
			t.Errorf("operations = %d, %v; want none", len(ops), err)
		}
		if jobs := h.Sim.Jobs(); len(jobs) != 0 {
			t.Errorf("the provider has %d jobs; want none", len(jobs))
		}
	})

	t.Run("pass-through", func(t *testing.T) {
		rec, up := forwardingUpstream(t, 0)
		url, keys := plumbingGatewayKeys(t, testCtx(t), up.URL, "  - name: plumbing", fixtures.ConfigOptions{}, "acme")
		t.Run("2026-07-28", func(t *testing.T) {
			resp, msg := postRaw(t, url, keys[0], "", "2026-07-28", "plumbing.meta", map[string]any{"arguments": json.RawMessage(`{"n":1e400}`)})
			e, _ := msg["error"].(map[string]any)
			data, _ := e["data"].(map[string]any)
			code, _ := e["code"].(float64)
			if resp.StatusCode != http.StatusBadRequest || msg["id"] != float64(3) {
				t.Errorf("HTTP %d id %v; want 400 answering request 3", resp.StatusCode, msg["id"])
			}
			want(t, int64(code), data, "arguments.n")
		})
		t.Run("2025-11-25", func(t *testing.T) {
			cs := legacySession(t, url, keys[0], "legacy-client", false, nil)
			_, err := cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: "plumbing.meta", Arguments: json.RawMessage(`{"n":{"m":1E999}}`)})
			code, data := errorData(t, err)
			want(t, code, data, "arguments.n.m")
		})
		if n := len(rec.seen()); n != 0 {
			t.Errorf("the upstream saw %d calls; want none", n)
		}
	})
}

// TestOriginIsChecked: a browser's request from an origin that is not
// allowed is refused with 403 and a JSON-RPC error naming allowed_origins,
// before authentication and before anything is relayed; the gateway's own
// origin, a loopback page (the gateway listens on loopback), a configured
// origin and a client that sends no Origin are served.
func TestOriginIsChecked(t *testing.T) {
	rec, up := forwardingUpstream(t, 0)
	url, keys := plumbingGatewayKeys(t, testCtx(t), up.URL, "  - name: plumbing",
		fixtures.ConfigOptions{AllowedOrigins: []string{"https://console.example.com"}}, "acme")
	own := strings.TrimSuffix(url, "/mcp")
	call := func(t *testing.T, origin string, key string) (*http.Response, map[string]any) {
		t.Helper()
		headers := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "plumbing.meta"}
		if origin != "" {
			headers["Origin"] = origin
		}
		body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"plumbing.meta","arguments":{},"_meta":{` +
			`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"0"},` +
			`"io.modelcontextprotocol/clientCapabilities":{}}}}`
		return postBody(t, url, key, headers, body)
	}
	for _, origin := range []string{"", own, "http://localhost:5173", "https://console.example.com"} {
		t.Run("allowed "+origin, func(t *testing.T) {
			if resp, msg := call(t, origin, keys[0]); resp.StatusCode != http.StatusOK || msg["result"] == nil {
				t.Errorf("Origin %q answered HTTP %d %v; want the call served", origin, resp.StatusCode, msg)
			}
		})
	}
	served := len(rec.seen())
	for _, origin := range []string{"http://evil.example", "null", "https://console.example.com.evil.example"} {
		for _, key := range []string{keys[0], "not-a-key"} {
			t.Run("refused "+origin, func(t *testing.T) {
				resp, msg := call(t, origin, key)
				e, _ := msg["error"].(map[string]any)
				data, _ := e["data"].(map[string]any)
				text, _ := e["message"].(string)
				if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Content-Type") != "application/json" ||
					data["reason"] != "origin_not_allowed" || !strings.Contains(text, "allowed_origins") {
					t.Errorf("Origin %q answered HTTP %d %q %v; want 403 with origin_not_allowed naming allowed_origins",
						origin, resp.StatusCode, resp.Header.Get("Content-Type"), msg)
				}
			})
		}
	}
	t.Run("refused on the session handler", func(t *testing.T) {
		resp, _ := postBody(t, url, keys[0], map[string]string{"Origin": "http://evil.example"},
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"0"}}}`)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("initialize from another origin answered HTTP %d; want 403", resp.StatusCode)
		}
	})
	if n := len(rec.seen()); n != served {
		t.Errorf("the upstream saw %d calls after the refused ones began; want none", n-served)
	}
}
