package taskwire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// httpFixture is a taskwire server over real Streamable HTTP on 127.0.0.1,
// behind the go-sdk bearer-token middleware.
type httpFixture struct {
	host *testHost
	url  string
	wire *wireRecorder
}

// wireRecorder keeps the tools/call request bodies exactly as they arrived,
// before any shim.
type wireRecorder struct {
	next   http.Handler
	mu     sync.Mutex
	bodies []map[string]any
}

func (w *wireRecorder) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		var msg map[string]any
		if json.Unmarshal(b, &msg) == nil && msg["method"] == methodCallTool {
			w.mu.Lock()
			w.bodies = append(w.bodies, msg)
			w.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	w.next.ServeHTTP(rw, r)
}

// lastParams returns the params of the last recorded tools/call of tool.
func (w *wireRecorder) lastParams(t *testing.T, tool string) map[string]any {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.bodies) - 1; i >= 0; i-- {
		p, _ := w.bodies[i]["params"].(map[string]any)
		if p["name"] == tool {
			return p
		}
	}
	t.Fatalf("no tools/call of %q reached the server", tool)
	return nil
}

func startHTTP(t *testing.T) *httpFixture {
	t.Helper()
	host := newTestHost()
	server := newTestServer(t, host)
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		if token == "alice" || token == "bob" {
			return &auth.TokenInfo{UserID: token, Expiration: time.Now().Add(time.Hour)}, nil
		}
		return nil, auth.ErrInvalidToken
	}
	handler := auth.RequireBearerToken(verify, nil)(NewHTTPHandler(server, &HTTPOptions{
		Streamable: mcp.StreamableHTTPOptions{Logger: testLogger(t)},
	}))
	rec := &wireRecorder{next: handler}
	ts := httptest.NewServer(rec)
	t.Cleanup(ts.Close)
	return &httpFixture{host: host, url: ts.URL, wire: rec}
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// connect opens a client session as token. version pins the protocol
// ("" lets the SDK negotiate 2026-07-28); wrap applies the client shim and
// registers the task methods.
func (f *httpFixture) connect(t *testing.T, token, version string, wrap bool) *mcp.ClientSession {
	t.Helper()
	return f.connectWith(t, token, version, wrap, nil)
}

func (f *httpFixture) connectWith(t *testing.T, token, version string, wrap bool, copts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "taskwire-test-client", Version: "v0.0.1"}, copts)
	var transport mcp.Transport = &mcp.StreamableClientTransport{
		Endpoint:   f.url,
		HTTPClient: &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}},
		MaxRetries: -1,
	}
	if wrap {
		if err := InstallClient(client); err != nil {
			t.Fatal(err)
		}
		transport = WrapClientTransport(transport)
	}
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := client.Connect(testContext(t), transport, opts)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// rpcError returns the JSON-RPC error inside err, failing the test if there
// is none.
func rpcError(t *testing.T, err error) *jsonrpc.Error {
	t.Helper()
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		t.Fatalf("error = %v, want a JSON-RPC error", err)
	}
	return werr
}

func wantCode(t *testing.T, err error, code int64) {
	t.Helper()
	if got := rpcError(t, err).Code; got != code {
		t.Errorf("error code = %d (%v), want %d", got, err, code)
	}
}

func resultText(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var res mcp.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	return contentText(t, &res)
}

func contentText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("result has %d content blocks, want 1", len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T, want text", res.Content[0])
	}
	return tc.Text
}

func callParams(tool string, args map[string]any) *mcp.CallToolParams {
	if args == nil {
		args = map[string]any{}
	}
	return &mcp.CallToolParams{Name: tool, Arguments: args}
}

// startTask calls tool as a task and fails the test unless a task comes back.
func startTask(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, ttl *time.Duration) *Task {
	t.Helper()
	task, res, err := CallToolAsTask(testContext(t), cs, callParams(tool, args), ttl)
	if err != nil {
		t.Fatalf("CallToolAsTask(%s): %v", tool, err)
	}
	if task == nil {
		t.Fatalf("CallToolAsTask(%s) answered directly with %+v, want a task", tool, res)
	}
	return task
}

func TestHTTPExtensionEra(t *testing.T) {
	f := startHTTP(t)
	cs := f.connect(t, "alice", "", true)
	ctx := testContext(t)

	if got := cs.InitializeResult().ProtocolVersion; got != protocolExtension {
		t.Fatalf("negotiated protocol %q, want %q", got, protocolExtension)
	}
	if got := ServerOffersTasks(cs); got != EraExtension {
		t.Fatalf("ServerOffersTasks = %v, want extension (server/discover must advertise %s)", got, ExtensionID)
	}

	t.Run("task polled to completion with inlined result", func(t *testing.T) {
		p := callParams("slow", nil)
		p.Meta = mcp.Meta{MetaIdempotencyKey: "op-ext-1", "com.example/trace": "tr-1"}
		task, res, err := CallToolAsTask(ctx, cs, p, nil)
		if err != nil || task == nil {
			t.Fatalf("CallToolAsTask = %v, %+v, %v; want a task", task, res, err)
		}
		if task.Status != StatusWorking || task.TTL == nil || *task.TTL != time.Minute || task.PollInterval != 5*time.Millisecond {
			t.Errorf("created task = %+v, want working with ttl 1m and poll interval 5ms", task)
		}
		// Durable creation: tasks/get resolves right away.
		if got, err := GetTask(ctx, cs, task.ID); err != nil || got.Status != StatusWorking {
			t.Fatalf("GetTask right after creation = %+v, %v; want working", got, err)
		}
		f.host.release(task.ID)
		done, err := AwaitTask(ctx, cs, task.ID, 5*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if done.Status != StatusCompleted || resultText(t, done.Result) != "slow done" {
			t.Errorf("final task = %+v, want completed with the tool result inlined", done)
		}
		if bytes.Contains(done.Result, []byte(RelatedTaskMetaKey)) {
			t.Errorf("inlined result %s carries related-task _meta", done.Result)
		}

		calls := f.host.callsTo("slow")
		c := calls[len(calls)-1].Caller
		if c.Era != EraExtension || !c.TasksDeclared || c.ProtocolVersion != protocolExtension {
			t.Errorf("caller era %v, declared %v, version %q; want extension, true, %s", c.Era, c.TasksDeclared, c.ProtocolVersion, protocolExtension)
		}
		if c.TokenInfo == nil || c.TokenInfo.UserID != "alice" {
			t.Errorf("caller token info = %+v, want user alice from the auth middleware", c.TokenInfo)
		}
		if c.IdempotencyKey != "op-ext-1" {
			t.Errorf("caller idempotency key = %q, want op-ext-1", c.IdempotencyKey)
		}
		if c.RequestID == "" || c.Header.Get("Authorization") == "" {
			t.Errorf("caller request ID %q, header %v; want both set", c.RequestID, c.Header)
		}
		if c.Meta["com.example/trace"] != "tr-1" {
			t.Errorf("caller meta = %v, want the client's com.example/trace", c.Meta)
		}
		for _, k := range []string{metaTask, MetaIdempotencyKey, metaRequestID} {
			if _, ok := c.Meta[k]; ok {
				t.Errorf("caller meta still holds reserved key %q", k)
			}
		}
		wire := f.wire.lastParams(t, "slow")
		if wire["idempotencyKey"] != "op-ext-1" {
			t.Errorf("wire params.idempotencyKey = %v, want op-ext-1", wire["idempotencyKey"])
		}
		if _, ok := wire["task"]; ok {
			t.Errorf("a 2026-07-28 request carried params.task: %v", wire)
		}
		meta, _ := wire["_meta"].(map[string]any)
		if _, ok := meta[MetaIdempotencyKey]; ok {
			t.Errorf("wire _meta carried the reserved key: %v", meta)
		}
	})

	t.Run("isError result completes the task", func(t *testing.T) {
		task := startTask(t, cs, "slow", map[string]any{"outcome": "iserror"}, nil)
		f.host.release(task.ID)
		done, err := AwaitTask(ctx, cs, task.ID, 5*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if done.Status != StatusCompleted || !resultIsError(done.Result) {
			t.Errorf("task = %+v, want completed with an isError result", done)
		}
	})

	t.Run("JSON-RPC error fails the task", func(t *testing.T) {
		task := startTask(t, cs, "slow", map[string]any{"outcome": "error"}, nil)
		f.host.release(task.ID)
		done, err := AwaitTask(ctx, cs, task.ID, 5*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if done.Status != StatusFailed || done.Error == nil || done.Error.Code != jsonrpc.CodeInternalError || done.Error.Message != "API rate limit exceeded" {
			t.Errorf("task = %+v (error %+v), want failed with the JSON-RPC error", done, done.Error)
		}
	})

	t.Run("input_required answered with tasks/update", func(t *testing.T) {
		task := startTask(t, cs, "slow", map[string]any{"outcome": "ask"}, nil)
		waiting, err := AwaitTask(ctx, cs, task.ID, 5*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		var req struct {
			Method string `json:"method"`
		}
		if waiting.Status != StatusInputRequired || json.Unmarshal(waiting.InputRequests["name"], &req) != nil || req.Method != "elicitation/create" {
			t.Fatalf("task = %+v, want input_required with an elicitation under key name", waiting)
		}
		if err := UpdateTask(ctx, cs, task.ID, map[string]json.RawMessage{
			"name": json.RawMessage(`{"action":"accept","content":{"input":"Luca"}}`),
		}); err != nil {
			t.Fatal(err)
		}
		done, err := AwaitTask(ctx, cs, task.ID, 5*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if done.Status != StatusCompleted || resultText(t, done.Result) != "Hello, Luca!" {
			t.Errorf("task = %+v, want completed with Hello, Luca!", done)
		}
	})

	t.Run("cancel acknowledges, also for terminal tasks", func(t *testing.T) {
		task := startTask(t, cs, "slow", nil, nil)
		for i := range 2 {
			got, err := CancelTask(ctx, cs, task.ID)
			if err != nil || got != nil {
				t.Fatalf("CancelTask #%d = %+v, %v; want an empty acknowledgement", i+1, got, err)
			}
		}
		if got, err := GetTask(ctx, cs, task.ID); err != nil || got.Status != StatusCancelled {
			t.Errorf("GetTask after cancel = %+v, %v; want cancelled", got, err)
		}
	})

	t.Run("tasks/result and tasks/list are method-not-found", func(t *testing.T) {
		task := startTask(t, cs, "quick", nil, nil)
		_, err := TaskResult(ctx, cs, task.ID)
		wantCode(t, err, jsonrpc.CodeMethodNotFound)
		_, _, err = ListTasks(ctx, cs, "")
		wantCode(t, err, jsonrpc.CodeMethodNotFound)
	})

	t.Run("unknown and foreign tasks are not found", func(t *testing.T) {
		_, err := GetTask(ctx, cs, "no-such-task")
		wantCode(t, err, jsonrpc.CodeInvalidParams)
		task := startTask(t, cs, "slow", nil, nil)
		bob := f.connect(t, "bob", "", true)
		_, err = GetTask(ctx, bob, task.ID)
		wantCode(t, err, jsonrpc.CodeInvalidParams)
	})

	t.Run("required tool runs as a task", func(t *testing.T) {
		task := startTask(t, cs, "needs_task", nil, nil)
		f.host.release(task.ID)
		if done, err := AwaitTask(ctx, cs, task.ID, 5*time.Millisecond); err != nil || done.Status != StatusCompleted {
			t.Errorf("AwaitTask = %+v, %v; want completed", done, err)
		}
	})

	t.Run("client-wide declaration lets any tools/call become a task", func(t *testing.T) {
		declaring := f.connectWith(t, "alice", "", true, &mcp.ClientOptions{Capabilities: ClientCapabilitiesWithTasks(nil)})
		res, err := declaring.CallTool(ctx, callParams("slow", nil))
		if err != nil {
			t.Fatal(err)
		}
		task, err := TaskFromResult(res)
		if err != nil || task == nil || task.Status != StatusWorking {
			t.Errorf("TaskFromResult = %+v, %v; want the working task the server created", task, err)
		}
	})

	t.Run("plain tools still work", func(t *testing.T) {
		res, err := cs.CallTool(ctx, callParams("plain", nil))
		if err != nil || contentText(t, res) != "plain handled by the SDK" {
			t.Errorf("CallTool(plain) = %+v, %v; want the SDK handler's answer", res, err)
		}
		task, res, err := CallToolAsTask(ctx, cs, callParams("direct", nil), nil)
		if err != nil || task != nil || contentText(t, res) != "direct ok" {
			t.Errorf("CallToolAsTask(direct) = %+v, %+v, %v; want the host's direct answer", task, res, err)
		}
		if c := f.host.callsTo("direct")[0].Caller; c.Era != EraNone || !c.TasksDeclared {
			t.Errorf("caller of a forbidden tool = era %v, declared %v; want none, true", c.Era, c.TasksDeclared)
		}
	})
}

func TestHTTPExtensionNonDeclaringClient(t *testing.T) {
	f := startHTTP(t)
	cs := f.connect(t, "alice", "", false)
	ctx := testContext(t)

	_, err := cs.CallTool(ctx, callParams("needs_task", nil))
	werr := rpcError(t, err)
	if werr.Code != mcp.CodeMissingRequiredClientCapabilities {
		t.Fatalf("code = %d, want -32021", werr.Code)
	}
	var data map[string]any
	if err := json.Unmarshal(werr.Data, &data); err != nil {
		t.Fatal(err)
	}
	compareJSON(t, data, specExample(t, "extension_error_missing_capability.json", "error").(map[string]any)["data"])

	res, err := cs.CallTool(ctx, callParams("slow", nil))
	if err != nil || contentText(t, res) != "slow done" {
		t.Fatalf("CallTool(slow) = %+v, %v; want a direct answer", res, err)
	}
	if calls := f.host.callsTo("slow"); calls[len(calls)-1].Caller.Era != EraNone || calls[len(calls)-1].Caller.TasksDeclared {
		t.Errorf("caller = %+v, want era none and nothing declared for a client without the extension", calls[len(calls)-1].Caller)
	}

	t.Run("missing capability is HTTP 400 with the spec error", func(t *testing.T) {
		status, msg := f.rawPost(t, "alice", modernHeaders(methodCallTool, "needs_task"),
			modernRequest(1, methodCallTool, map[string]any{"name": "needs_task", "arguments": map[string]any{}}, false))
		if status != http.StatusBadRequest {
			t.Errorf("HTTP status = %d, want 400", status)
		}
		compareJSON(t, msg["error"], specExample(t, "extension_error_missing_capability.json", "error"))
	})

	t.Run("legacy params.task is ignored", func(t *testing.T) {
		status, msg := f.rawPost(t, "alice", modernHeaders(methodCallTool, "slow"),
			modernRequest(2, methodCallTool, map[string]any{"name": "slow", "arguments": map[string]any{}, "task": map[string]any{"ttl": 1000}}, false))
		result, _ := msg["result"].(map[string]any)
		if status != http.StatusOK || result["content"] == nil || result["resultType"] != resultTypeComplete {
			t.Errorf("HTTP %d %v, want a direct complete result", status, msg)
		}
	})

	t.Run("reserved _meta keys from the client are dropped", func(t *testing.T) {
		params := map[string]any{"name": "slow", "arguments": map[string]any{}}
		body := modernRequest(3, methodCallTool, params, false)
		body = strings.Replace(body, `"_meta":{`, `"_meta":{"dev.taskgate/idempotency-key":"spoofed","dev.taskgate/task":{},`, 1)
		if status, msg := f.rawPost(t, "alice", modernHeaders(methodCallTool, "slow"), body); status != http.StatusOK {
			t.Fatalf("HTTP %d %v", status, msg)
		}
		calls := f.host.callsTo("slow")
		if c := calls[len(calls)-1].Caller; c.IdempotencyKey != "" || c.Era != EraNone {
			t.Errorf("caller = era %v, key %q; want none and empty: _meta must not stand in for params", c.Era, c.IdempotencyKey)
		}
	})

	t.Run("subscriptions/listen for task notifications needs the extension", func(t *testing.T) {
		status, msg := f.rawPost(t, "alice", modernHeaders(methodSubscriptionsListen, ""),
			modernRequest(5, methodSubscriptionsListen, map[string]any{"notifications": map[string]any{"taskIds": []string{"x"}}}, false))
		errObj, _ := msg["error"].(map[string]any)
		if status != http.StatusBadRequest || errObj["code"] != float64(mcp.CodeMissingRequiredClientCapabilities) {
			t.Errorf("HTTP %d %v, want 400 with -32021", status, msg)
		}
	})

	t.Run("tasks/get needs the extension", func(t *testing.T) {
		status, msg := f.rawPost(t, "alice", modernHeaders(methodTasksGet, "x"),
			modernRequest(4, methodTasksGet, map[string]any{"taskId": "x"}, false))
		errObj, _ := msg["error"].(map[string]any)
		if status != http.StatusBadRequest || errObj["code"] != float64(mcp.CodeMissingRequiredClientCapabilities) {
			t.Errorf("HTTP %d %v, want 400 with -32021", status, msg)
		}
	})
}

func TestHTTPMcpNameHeader(t *testing.T) {
	f := startHTTP(t)
	cs := f.connect(t, "alice", "", true)
	task := startTask(t, cs, "slow", nil, nil)
	body := modernRequest(7, methodTasksGet, map[string]any{"taskId": task.ID}, true)

	tests := []struct {
		name       string
		mcpName    string
		wantStatus int
		wantCode   float64 // 0: success
	}{
		{"matching", task.ID, http.StatusOK, 0},
		{"matching, base64-encoded", "=?base64?" + b64(task.ID) + "?=", http.StatusOK, 0},
		{"mismatch", "another-task", http.StatusBadRequest, mcp.CodeHeaderMismatch},
		{"missing", "", http.StatusBadRequest, mcp.CodeHeaderMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, msg := f.rawPost(t, "alice", modernHeaders(methodTasksGet, tt.mcpName), body)
			if status != tt.wantStatus {
				t.Errorf("HTTP status = %d, want %d (%v)", status, tt.wantStatus, msg)
			}
			if tt.wantCode == 0 {
				result, _ := msg["result"].(map[string]any)
				if result["taskId"] != task.ID {
					t.Errorf("response %v, want the task", msg)
				}
				return
			}
			errObj, _ := msg["error"].(map[string]any)
			if errObj["code"] != tt.wantCode || msg["id"] != float64(7) {
				t.Errorf("response %v, want error %v for request 7", msg, tt.wantCode)
			}
		})
	}
}

func TestHTTPLegacyEra(t *testing.T) {
	f := startHTTP(t)
	cs := f.connect(t, "alice", protocolLegacy, true)
	ctx := testContext(t)

	ir := cs.InitializeResult()
	if ir.ProtocolVersion != protocolLegacy || cs.ID() == "" {
		t.Fatalf("session %q on %q, want a stateful %s session", cs.ID(), ir.ProtocolVersion, protocolLegacy)
	}
	var gotCaps any
	if err := remarshal(ir.Meta[metaTasksCapability], &gotCaps); err != nil {
		t.Fatalf("initialize result lacks capabilities.tasks: %v", err)
	}
	var wantCaps any
	if err := json.Unmarshal(legacyTaskCapability, &wantCaps); err != nil {
		t.Fatal(err)
	}
	compareJSON(t, gotCaps, wantCaps)
	if got := ServerOffersTasks(cs); got != EraLegacy {
		t.Fatalf("ServerOffersTasks = %v, want legacy", got)
	}

	t.Run("tools/list carries execution.taskSupport", func(t *testing.T) {
		want := map[string]TaskSupport{"slow": TaskOptional, "quick": TaskOptional, "needs_task": TaskRequired, "plain": TaskForbidden, "direct": TaskForbidden, "ask_user": TaskForbidden}
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]TaskSupport{}
		for _, tool := range res.Tools {
			got[tool.Name] = ToolTaskSupport(tool)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("task support = %v, want %v", got, want)
		}
	})

	var completedID string
	t.Run("task, tasks/get and blocking tasks/result", func(t *testing.T) {
		ttl := 90 * time.Second
		p := callParams("slow", nil)
		p.Meta = mcp.Meta{MetaIdempotencyKey: "op-legacy-1"}
		task, res, err := CallToolAsTask(ctx, cs, p, &ttl)
		if err != nil || task == nil {
			t.Fatalf("CallToolAsTask = %v, %+v, %v; want a task", task, res, err)
		}
		if task.Status != StatusWorking || task.TTL == nil || *task.TTL != ttl {
			t.Errorf("created task = %+v, want working with the requested ttl of 90s", task)
		}
		if got, err := GetTask(ctx, cs, task.ID); err != nil || got.Status != StatusWorking {
			t.Fatalf("GetTask = %+v, %v; want working", got, err)
		}

		type answer struct {
			res *mcp.CallToolResult
			err error
		}
		answers := make(chan answer, 1)
		go func() {
			res, err := TaskResult(ctx, cs, task.ID)
			answers <- answer{res, err}
		}()
		select {
		case id := <-f.host.waiting:
			if id != task.ID {
				t.Fatalf("host waits for %q, want %q", id, task.ID)
			}
		case <-ctx.Done():
			t.Fatal("tasks/result never reached the host")
		}
		f.host.release(task.ID)
		a := <-answers
		if a.err != nil {
			t.Fatal(a.err)
		}
		if contentText(t, a.res) != "slow done" {
			t.Errorf("tasks/result = %+v, want the tool result", a.res)
		}
		related, _ := a.res.Meta[RelatedTaskMetaKey].(map[string]any)
		if related["taskId"] != task.ID {
			t.Errorf("tasks/result _meta = %v, want related-task %s", a.res.Meta, task.ID)
		}
		if got, err := GetTask(ctx, cs, task.ID); err != nil || got.Status != StatusCompleted {
			t.Errorf("GetTask after completion = %+v, %v; want completed", got, err)
		}
		completedID = task.ID

		calls := f.host.callsTo("slow")
		c := calls[len(calls)-1].Caller
		if c.Era != EraLegacy || c.RequestedTTL == nil || *c.RequestedTTL != ttl || c.IdempotencyKey != "op-legacy-1" {
			t.Errorf("caller = era %v, ttl %v, key %q; want legacy, 90s, op-legacy-1", c.Era, c.RequestedTTL, c.IdempotencyKey)
		}
		if c.SessionID != cs.ID() || c.TokenInfo == nil || c.TokenInfo.UserID != "alice" {
			t.Errorf("caller session %q, token %+v; want %q and alice", c.SessionID, c.TokenInfo, cs.ID())
		}
		wire := f.wire.lastParams(t, "slow")
		wireTask, _ := wire["task"].(map[string]any)
		if wireTask["ttl"] != float64(90000) || wire["idempotencyKey"] != "op-legacy-1" {
			t.Errorf("wire params = %v, want task.ttl 90000 and idempotencyKey op-legacy-1", wire)
		}
	})

	t.Run("cancel, and cancelling a terminal task is invalid", func(t *testing.T) {
		task := startTask(t, cs, "slow", nil, nil)
		got, err := CancelTask(ctx, cs, task.ID)
		if err != nil || got == nil || got.Status != StatusCancelled {
			t.Fatalf("CancelTask = %+v, %v; want the task, cancelled", got, err)
		}
		_, err = CancelTask(ctx, cs, task.ID)
		wantCode(t, err, jsonrpc.CodeInvalidParams)
		if completedID != "" {
			_, err = CancelTask(ctx, cs, completedID)
			if werr := rpcError(t, err); werr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(werr.Message, "'completed'") {
				t.Errorf("cancel of a completed task = %v, want -32602 naming the status", werr)
			}
		}
	})

	t.Run("tasks/list is paginated and filtered to the caller", func(t *testing.T) {
		mine := map[string]bool{}
		for range 3 {
			mine[startTask(t, cs, "quick", nil, nil).ID] = true
		}
		bob := f.connect(t, "bob", protocolLegacy, true)
		startTask(t, bob, "quick", nil, nil)

		seen := map[string]bool{}
		pages := 0
		for cursor := ""; ; {
			tasks, next, err := ListTasks(ctx, cs, cursor)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for _, task := range tasks {
				seen[task.ID] = true
			}
			if next == "" {
				break
			}
			cursor = next
		}
		for id := range mine {
			if !seen[id] {
				t.Errorf("tasks/list misses task %s", id)
			}
		}
		bobTasks, _, err := ListTasks(ctx, bob, "")
		if err != nil || len(bobTasks) != 1 {
			t.Errorf("bob's tasks/list = %d tasks, %v; want only bob's one task", len(bobTasks), err)
		}
		if pages < 2 {
			t.Errorf("tasks/list returned %d page(s) for %d tasks with page size 2", pages, len(seen))
		}
		_, _, err = ListTasks(ctx, cs, "not-a-cursor")
		wantCode(t, err, jsonrpc.CodeInvalidParams)
	})

	t.Run("isError result fails the task but tasks/result returns the result", func(t *testing.T) {
		task := startTask(t, cs, "slow", map[string]any{"outcome": "iserror"}, nil)
		f.host.release(task.ID)
		res, err := TaskResult(ctx, cs, task.ID)
		if err != nil || !res.IsError {
			t.Fatalf("TaskResult = %+v, %v; want the isError result", res, err)
		}
		if got, err := GetTask(ctx, cs, task.ID); err != nil || got.Status != StatusFailed {
			t.Errorf("GetTask = %+v, %v; want failed", got, err)
		}
	})

	t.Run("tasks/result replays the JSON-RPC error", func(t *testing.T) {
		task := startTask(t, cs, "slow", map[string]any{"outcome": "error"}, nil)
		f.host.release(task.ID)
		_, err := TaskResult(ctx, cs, task.ID)
		if werr := rpcError(t, err); werr.Code != jsonrpc.CodeInternalError || werr.Message != "API rate limit exceeded" {
			t.Errorf("TaskResult error = %+v, want the tool call's error", werr)
		}
	})

	t.Run("required tool without params.task is method-not-found", func(t *testing.T) {
		_, err := cs.CallTool(ctx, callParams("needs_task", nil))
		wantCode(t, err, jsonrpc.CodeMethodNotFound)
	})

	t.Run("forbidden tool as a task is method-not-found", func(t *testing.T) {
		_, _, err := CallToolAsTask(ctx, cs, callParams("plain", nil), nil)
		wantCode(t, err, jsonrpc.CodeMethodNotFound)
	})

	t.Run("calls without params.task are answered directly", func(t *testing.T) {
		res, err := cs.CallTool(ctx, callParams("plain", nil))
		if err != nil || contentText(t, res) != "plain handled by the SDK" {
			t.Errorf("CallTool(plain) = %+v, %v", res, err)
		}
		res, err = cs.CallTool(ctx, callParams("slow", nil))
		if err != nil || contentText(t, res) != "slow done" {
			t.Errorf("CallTool(slow) = %+v, %v; want a direct answer", res, err)
		}
	})

	t.Run("server-to-client requests reach a legacy session", func(t *testing.T) {
		asker := f.connectWith(t, "alice", protocolLegacy, true, &mcp.ClientOptions{
			ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
			},
		})
		res, err := asker.CallTool(ctx, callParams("ask_user", nil))
		if err != nil || contentText(t, res) != "hello Ada" {
			t.Errorf("CallTool(ask_user) = %+v, %v; want the elicited answer", res, err)
		}
	})

	t.Run("unknown task and tasks/update", func(t *testing.T) {
		_, err := GetTask(ctx, cs, "no-such-task")
		wantCode(t, err, jsonrpc.CodeInvalidParams)
		err = UpdateTask(ctx, cs, "no-such-task", nil)
		wantCode(t, err, jsonrpc.CodeMethodNotFound)
	})
}

func TestHTTPOlderProtocolHasNoTasks(t *testing.T) {
	f := startHTTP(t)
	cs := f.connect(t, "alice", "2025-06-18", true)
	ctx := testContext(t)
	if got := ServerOffersTasks(cs); got != EraNone {
		t.Errorf("ServerOffersTasks = %v, want none: capabilities.tasks belongs to 2025-11-25 only", got)
	}
	task, res, err := CallToolAsTask(ctx, cs, callParams("slow", nil), nil)
	if err != nil || task != nil || contentText(t, res) != "slow done" {
		t.Errorf("CallToolAsTask = %+v, %+v, %v; want a direct answer", task, res, err)
	}
	_, err = cs.CallTool(ctx, callParams("needs_task", nil))
	wantCode(t, err, jsonrpc.CodeInvalidRequest)
	_, err = GetTask(ctx, cs, "task-1")
	wantCode(t, err, jsonrpc.CodeMethodNotFound)
}

func TestClientCapabilitiesWithTasks(t *testing.T) {
	base := &mcp.ClientCapabilities{Extensions: map[string]any{"com.example/other": map[string]any{}}}
	got := ClientCapabilitiesWithTasks(base)
	if _, ok := got.Extensions[ExtensionID]; !ok {
		t.Errorf("extensions = %v, want %s", got.Extensions, ExtensionID)
	}
	if _, ok := got.Extensions["com.example/other"]; !ok {
		t.Errorf("extensions = %v, want the base's own extension kept", got.Extensions)
	}
	if _, ok := base.Extensions[ExtensionID]; ok {
		t.Error("ClientCapabilitiesWithTasks modified its argument")
	}
	if def := ClientCapabilitiesWithTasks(nil); def.RootsV2 == nil || !def.RootsV2.ListChanged {
		t.Errorf("capabilities from nil = %+v, want the go-sdk defaults (roots with listChanged)", def)
	}
}

func TestHTTPRequestBodyLimit(t *testing.T) {
	host := newTestHost()
	handler := NewHTTPHandler(newTestServer(t, host), &HTTPOptions{Streamable: mcp.StreamableHTTPOptions{MaxRequestBodyBytes: 512}})
	ts := httptest.NewServer(handler)
	t.Cleanup(ts.Close)
	body := modernRequest(1, methodCallTool, map[string]any{"name": "slow", "arguments": map[string]any{"pad": strings.Repeat("x", 1024)}}, true)
	req, err := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range modernHeaders(methodCallTool, "slow") {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("HTTP status = %d, want 413", resp.StatusCode)
	}
	if calls := host.callsTo("slow"); len(calls) != 0 {
		t.Errorf("host saw %d calls, want none", len(calls))
	}
}

// modernRequest builds a 2026-07-28 JSON-RPC request body.
func modernRequest(id int, method string, params map[string]any, declare bool) string {
	caps := map[string]any{}
	if declare {
		caps["extensions"] = map[string]any{ExtensionID: map[string]any{}}
	}
	params["_meta"] = map[string]any{
		mcp.MetaKeyProtocolVersion:    protocolExtension,
		mcp.MetaKeyClientCapabilities: caps,
		mcp.MetaKeyClientInfo:         map[string]any{"name": "raw", "version": "0"},
	}
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// modernHeaders are the headers of a 2026-07-28 request; an empty name omits
// Mcp-Name.
func modernHeaders(method, name string) map[string]string {
	h := map[string]string{
		"Content-Type":         "application/json",
		"Accept":               "application/json, text/event-stream",
		"Mcp-Protocol-Version": protocolExtension,
		"Mcp-Method":           method,
	}
	if name != "" {
		h["Mcp-Name"] = name
	}
	return h
}

// rawPost sends one JSON-RPC request with net/http and returns the HTTP
// status and the decoded JSON-RPC response, from a JSON or an SSE body.
func (f *httpFixture) rawPost(t *testing.T, token string, headers map[string]string, body string) (int, map[string]any) {
	t.Helper()
	resp, msg := f.rawExchange(t, token, headers, body)
	return resp.StatusCode, msg
}

// rawExchange is rawPost returning the whole HTTP response, its body read.
func (f *httpFixture) rawExchange(t *testing.T, token string, headers map[string]string, body string) (*http.Response, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, f.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if mediaType(resp.Header.Get("Content-Type")) == "text/event-stream" {
		data = lastSSEData(data)
	}
	var msg map[string]any
	if err := json.Unmarshal(data, &msg); err != nil {
		t.Fatalf("HTTP %d body %q is not JSON: %v", resp.StatusCode, data, err)
	}
	return resp, msg
}

func lastSSEData(stream []byte) []byte {
	var last []byte
	sc := bufio.NewScanner(bytes.NewReader(stream))
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:")); ok {
			last = bytes.Clone(bytes.TrimSpace(v))
		}
	}
	return last
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestHTTPParseError: a body that is not JSON is answered, by whichever
// handler the request would reach, as JSON-RPC 2.0 says (-32700, id null)
// with the 400 the MCP transport asks for, never as plain text.
func TestHTTPParseError(t *testing.T) {
	f := startHTTP(t)
	legacy := f.connect(t, "alice", protocolLegacy, true)
	sessionHeaders := map[string]string{
		"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": protocolLegacy, "Mcp-Session-Id": legacy.ID(),
	}
	newSession := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
	for _, era := range []struct {
		name    string
		headers map[string]string
	}{
		{"2026-07-28", modernHeaders(methodCallTool, "quick")},
		{"2025-11-25 session", sessionHeaders},
		{"no session yet", newSession},
	} {
		for _, body := range []struct{ name, body string }{
			{"truncated", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`},
			{"not JSON", `jsonrpc 2.0 please`},
			{"trailing garbage", `{"jsonrpc":"2.0","id":1,"method":"ping"} x`},
			{"empty", ``},
		} {
			t.Run(era.name+"/"+body.name, func(t *testing.T) {
				resp, msg := f.rawExchange(t, "alice", era.headers, body.body)
				if resp.StatusCode != http.StatusBadRequest || mediaType(resp.Header.Get("Content-Type")) != "application/json" {
					t.Errorf("HTTP %d %q, want 400 application/json", resp.StatusCode, resp.Header.Get("Content-Type"))
				}
				errObj, _ := msg["error"].(map[string]any)
				id, hasID := msg["id"]
				if msg["jsonrpc"] != "2.0" || !hasID || id != nil || errObj["code"] != float64(jsonrpc.CodeParseError) {
					t.Errorf("response %v, want a -32700 error with id null", msg)
				}
				if text, _ := errObj["message"].(string); !strings.Contains(text, "not valid JSON") {
					t.Errorf("message %q does not say the body is not JSON", text)
				}
			})
		}
	}
	if calls := f.host.callsTo("quick"); len(calls) != 0 {
		t.Errorf("host saw %d calls, want none", len(calls))
	}
}

// TestHTTPArgumentsBeyondDoubles: a number no double holds, which the
// go-sdk cannot decode, is the client's invalid argument in both eras: -32602
// with data.reason invalid_arguments and the value's path, whether the tool is
// the Host's or passed to the SDK's handler.
func TestHTTPArgumentsBeyondDoubles(t *testing.T) {
	f := startHTTP(t)
	args := json.RawMessage(`{"outcome":"ok","items":[{"n":1e400}]}`)
	check := func(t *testing.T, e map[string]any) {
		t.Helper()
		data, _ := e["data"].(map[string]any)
		if e["code"] != float64(jsonrpc.CodeInvalidParams) || data["reason"] != ReasonInvalidArguments || data["path"] != "arguments.items[0].n" {
			t.Errorf("error %v, want -32602 with reason %s and path arguments.items[0].n", e, ReasonInvalidArguments)
		}
	}
	for _, tool := range []string{"quick", "plain"} {
		t.Run("2026-07-28/"+tool, func(t *testing.T) {
			body := modernRequest(5, methodCallTool, map[string]any{"name": tool, "arguments": nil}, true)
			body = strings.Replace(body, `"arguments":null`, `"arguments":`+string(args), 1)
			status, msg := f.rawPost(t, "alice", modernHeaders(methodCallTool, tool), body)
			if status != http.StatusBadRequest || msg["id"] != float64(5) {
				t.Errorf("HTTP %d, id %v; want 400 for request 5", status, msg["id"])
			}
			e, _ := msg["error"].(map[string]any)
			check(t, e)
		})
		t.Run("2025-11-25/"+tool, func(t *testing.T) {
			cs := f.connect(t, "alice", protocolLegacy, true)
			_, err := cs.CallTool(testContext(t), &mcp.CallToolParams{Name: tool, Arguments: args})
			werr := rpcError(t, err)
			var data map[string]any
			_ = json.Unmarshal(werr.Data, &data)
			check(t, map[string]any{"code": float64(werr.Code), "data": data})
		})
	}
	if calls := f.host.callsTo("quick"); len(calls) != 0 {
		t.Errorf("host saw %d calls, want none", len(calls))
	}
}
