package taskwire

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/sse"
)

// paramsOf decodes the params of a JSON-RPC message.
func paramsOf(t *testing.T, msg []byte) map[string]any {
	t.Helper()
	var env struct {
		Params map[string]any `json:"params"`
	}
	if err := json.Unmarshal(msg, &env); err != nil {
		t.Fatalf("%s: %v", msg, err)
	}
	return env.Params
}

func TestShimRequest(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wantMeta map[string]any // expected _meta after the shim
		gone     []string       // params keys that must be gone
	}{
		{
			name: "legacy task and idempotency key move into _meta",
			in:   `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":{},"task":{"ttl":60000},"idempotencyKey":"op-1"}}`,
			wantMeta: map[string]any{
				metaTask: map[string]any{"ttl": float64(60000)}, MetaIdempotencyKey: "op-1", metaRequestID: "7",
			},
			gone: []string{"task", "idempotencyKey"},
		},
		{
			name: "reserved keys sent by the client are dropped, others kept",
			in: `{"jsonrpc":"2.0","id":"abc","method":"tools/call","params":{"name":"t","_meta":{` +
				`"dev.taskgate/task":{},"dev.taskgate/idempotency-key":"spoof","dev.taskgate/request-id":"1",` +
				`"dev.taskgate/operation-id":"op-9","progressToken":3}}}`,
			wantMeta: map[string]any{metaRequestID: `"abc"`, "dev.taskgate/operation-id": "op-9", "progressToken": float64(3)},
		},
		{
			name: "listen's task IDs are copied into _meta, a client's own copy dropped",
			in: `{"jsonrpc":"2.0","id":4,"method":"subscriptions/listen","params":{"notifications":{"taskIds":["t1"]},` +
				`"_meta":{"dev.taskgate/task-ids":["spoof"]}}}`,
			wantMeta: map[string]any{metaTaskIDs: []any{"t1"}, metaRequestID: "4"},
		},
		{
			name:     "a listen without task IDs names none",
			in:       `{"jsonrpc":"2.0","id":5,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}`,
			wantMeta: map[string]any{metaRequestID: "5"},
		},
		{
			name:     "task methods get the request ID",
			in:       `{"jsonrpc":"2.0","id":12,"method":"tasks/get","params":{"taskId":"x","idempotencyKey":"stays"}}`,
			wantMeta: map[string]any{metaRequestID: "12"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := shimRequest([]byte(tt.in))
			p := paramsOf(t, out)
			compareJSON(t, p["_meta"], tt.wantMeta)
			for _, k := range tt.gone {
				if _, ok := p[k]; ok {
					t.Errorf("params.%s survived the shim: %s", k, out)
				}
			}
		})
	}
}

func TestShimRequestLeavesOtherBytesAlone(t *testing.T) {
	args := `{"big":12345678901234567890,"f":1.0,"html":"<b>&</b>","nested":{"z":1,"a":[1,2]}}`
	in := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":` + args + `,"idempotencyKey":"k"}}`
	out := shimRequest([]byte(in))
	if !bytes.Contains(out, []byte(`"arguments":`+args)) {
		t.Errorf("arguments changed:\n in: %s\nout: %s", in, out)
	}
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":"not an object"}`,
		`not json "tools/call"`,
	} {
		if got := shimRequest([]byte(msg)); string(got) != msg {
			t.Errorf("shimRequest(%s) = %s, want it unchanged", msg, got)
		}
	}
}

func TestShimReaderRewritesEachLine(t *testing.T) {
	in := "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"a\",\"idempotencyKey\":\"k1\"}}\n" +
		"\n" +
		"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\r\n" +
		"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"b\",\"idempotencyKey\":\"k3\"}}"
	tr := NewStdioTransport(strings.NewReader(in), io.Discard)
	conn, err := tr.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var keys []any
	for range 3 {
		msg, err := conn.Read(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok {
			t.Fatalf("read %T, want a request", msg)
		}
		var p struct {
			Meta map[string]any `json:"_meta"`
		}
		if len(req.Params) > 0 {
			if err := json.Unmarshal(req.Params, &p); err != nil {
				t.Fatal(err)
			}
		}
		keys = append(keys, p.Meta[MetaIdempotencyKey])
	}
	compareJSON(t, keys, []any{"k1", nil, "k3"})
}

func TestClientRewriteParams(t *testing.T) {
	modernMeta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}`
	tests := []struct {
		name     string
		method   string
		in       string
		want     string
		wantName string
	}{
		{
			name:   "2026 task call declares the extension",
			method: methodCallTool,
			in:     `{"name":"t",` + modernMeta + `,"dev.taskgate/task":{},"dev.taskgate/idempotency-key":"k"}}`,
			want: `{"name":"t","idempotencyKey":"k","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
				`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}}}`,
		},
		{
			name:   "2025-11-25 task call sends params.task",
			method: methodCallTool,
			in:     `{"name":"t","_meta":{"dev.taskgate/task":{"ttl":5000},"com.example/x":1}}`,
			want:   `{"name":"t","task":{"ttl":5000},"_meta":{"com.example/x":1}}`,
		},
		{
			name:   "2026 tasks/get declares the extension and names the task",
			method: methodTasksGet,
			in:     `{"taskId":"task-9",` + modernMeta + `}}`,
			want: `{"taskId":"task-9","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
				`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}}}`,
			wantName: "task-9",
		},
		{
			name:   "2025-11-25 tasks/get is unchanged",
			method: methodTasksGet,
			in:     `{"taskId":"task-9"}`,
			want:   `{"taskId":"task-9"}`,
		},
		{
			name:   "plain call is unchanged",
			method: methodCallTool,
			in:     `{"name":"t","arguments":{"a":1}}`,
			want:   `{"name":"t","arguments":{"a":1}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, name, _ := clientRewriteParams(tt.method, json.RawMessage(tt.in))
			compareJSONText(t, got, tt.want)
			if name != tt.wantName {
				t.Errorf("Mcp-Name = %q, want %q", name, tt.wantName)
			}
		})
	}
}

func TestClientRewriteResult(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // "" means unchanged
	}{
		{
			name: "flat CreateTaskResult",
			in:   `{"resultType":"task","taskId":"t1","status":"working","createdAt":"2025-11-25T10:30:00Z","lastUpdatedAt":"2025-11-25T10:30:00Z","ttlMs":null,"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s"}}}`,
			want: `{"content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s"},"dev.taskgate/task":` +
				`{"taskId":"t1","status":"working","createdAt":"2025-11-25T10:30:00Z","lastUpdatedAt":"2025-11-25T10:30:00Z","ttlMs":null}}}`,
		},
		{
			name: "wrapped CreateTaskResult",
			in:   `{"task":{"taskId":"t2","status":"working","createdAt":"x","lastUpdatedAt":"x","ttl":1000}}`,
			want: `{"content":[],"_meta":{"dev.taskgate/task":{"taskId":"t2","status":"working","createdAt":"x","lastUpdatedAt":"x","ttl":1000}}}`,
		},
		{
			name: "initialize result with capabilities.tasks",
			in:   `{"protocolVersion":"2025-11-25","serverInfo":{"name":"s"},"capabilities":{"tasks":{"list":{}}}}`,
			want: `{"protocolVersion":"2025-11-25","serverInfo":{"name":"s"},"capabilities":{"tasks":{"list":{}}},"_meta":{"dev.taskgate/tasks-capability":{"list":{}}}}`,
		},
		{
			name: "tools/list with execution",
			in:   `{"tools":[{"name":"a","execution":{"taskSupport":"required"}},{"name":"b"}]}`,
			want: `{"tools":[{"name":"a","execution":{"taskSupport":"required"},"_meta":{"dev.taskgate/execution":{"taskSupport":"required"}}},{"name":"b"}]}`,
		},
		{name: "tool result that mentions a task", in: `{"content":[],"task":{"taskId":"t","status":"working"}}`},
		{name: "initialize result without tasks", in: `{"protocolVersion":"2025-06-18","serverInfo":{"name":"s"},"capabilities":{}}`},
		{name: "plain tool result", in: `{"content":[{"type":"text","text":"hi"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := clientRewriteResult(json.RawMessage(tt.in))
			if tt.want == "" {
				if changed || string(got) != tt.in {
					t.Errorf("clientRewriteResult(%s) = %s, want it unchanged", tt.in, got)
				}
				return
			}
			compareJSONText(t, got, tt.want)
		})
	}
}

func TestSSERewriter(t *testing.T) {
	notification := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n"
	comment := ": keep-alive\n\n"
	response := "id: s1_2\nevent: message\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":4,\n" +
		"data: \"result\":{\"resultType\":\"task\",\"taskId\":\"t1\",\"status\":\"working\"}}\n\n"
	src := notification + comment + response
	r := sse.NewReader(io.NopCloser(strings.NewReader(src)), mcp.DefaultMaxEventSize, clientRewriteMessage)
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), notification+comment) {
		t.Errorf("events that need no rewrite changed:\n%s", out)
	}
	rest := strings.TrimPrefix(string(out), notification+comment)
	if !strings.HasPrefix(rest, "id: s1_2\nevent: message\ndata: ") || !strings.HasSuffix(rest, "\n\n") || strings.Count(rest, "data:") != 1 {
		t.Fatalf("rewritten event is malformed:\n%q", rest)
	}
	data := strings.TrimSuffix(strings.TrimPrefix(rest, "id: s1_2\nevent: message\ndata: "), "\n\n")
	var msg struct {
		ID     int `json:"id"`
		Result struct {
			Meta map[string]map[string]any `json:"_meta"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(data), &msg); err != nil {
		t.Fatalf("rewritten data %q: %v", data, err)
	}
	if msg.ID != 4 || msg.Result.Meta[metaTask]["taskId"] != "t1" {
		t.Errorf("rewritten response = %s, want request 4 with the task in _meta", data)
	}
}
