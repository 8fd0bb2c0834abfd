package upstream

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var av, bv any
	if err := json.Unmarshal(a, &av); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &bv); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(av, bv)
}

// TestStdioParams: a relayed call's params are its own with the tool's
// name, its _meta less the protocol's keys and its client's token, the
// gateway's token when the client asked for progress, and on a 2026-07-28
// session the go-sdk's per-request _meta and the log level the SDK path
// asks for.
func TestStdioParams(t *testing.T) {
	meta := &requestMeta{clientInfo: json.RawMessage(`{"name":"taskgate"}`), clientCapabilities: json.RawMessage(`{"elicitation":{"form":{}}}`)}
	modern := `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"taskgate"},"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}`
	tests := []struct {
		name     string
		call     RelayedCall
		protocol string
		want     string
	}{
		{"no _meta", RelayedCall{Tool: "t", Params: map[string]json.RawMessage{"arguments": json.RawMessage(`{"a":1}`)}}, protocolLegacy,
			`{"name":"t","arguments":{"a":1}}`},
		{"the call's name and _meta params give way", RelayedCall{Tool: "t", Params: map[string]json.RawMessage{"name": json.RawMessage(`"other"`), "_meta": json.RawMessage(`{"x":1}`), "arguments": json.RawMessage(`{}`)}}, protocolLegacy,
			`{"name":"t","arguments":{}}`},
		{"progress and the client's _meta", RelayedCall{Tool: "t", ProgressToken: json.RawMessage(`7`), Meta: map[string]json.RawMessage{
			"trace": json.RawMessage(`"t-1"`), "progressToken": json.RawMessage(`"theirs"`), "io.modelcontextprotocol/logLevel": json.RawMessage(`"error"`),
		}}, protocolLegacy,
			`{"name":"t","_meta":{"trace":"t-1","progressToken":"taskgate-relay-1"}}`},
		{"a null token asks for no progress", RelayedCall{Tool: "t", ProgressToken: json.RawMessage(`null`)}, protocolLegacy, `{"name":"t"}`},
		{"a 2025-11-25 client on a 2026-07-28 session", RelayedCall{Tool: "t", LogLevel: "error"}, protocolExtension,
			`{"name":"t","_meta":{` + modern + `,"io.modelcontextprotocol/logLevel":"debug"}}`},
		{"a 2026-07-28 client with a level", RelayedCall{Tool: "t", LogLevel: "warning", ServerInfo: json.RawMessage(`{}`)}, protocolExtension,
			`{"name":"t","_meta":{` + modern + `,"io.modelcontextprotocol/logLevel":"warning"}}`},
		{"a 2026-07-28 client without one", RelayedCall{Tool: "t", ServerInfo: json.RawMessage(`{}`)}, protocolExtension,
			`{"name":"t","_meta":{` + modern + `}}`},
		{"names that need escaping", RelayedCall{Tool: `a"b`, Params: map[string]json.RawMessage{"é\n": json.RawMessage(`1`)}}, protocolLegacy,
			`{"name":"a\"b","é\n":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := stdioParams(&tt.call, "taskgate-relay-1", tt.protocol, meta)
			if !sameJSON(t, got, []byte(tt.want)) {
				t.Errorf("stdioParams = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestStdioCallAnswer: the child's answer reaches the client under its
// ID, as one event, its result untouched for a 2025-11-25 client and
// annotated for a 2026-07-28 one, its error as the child sent it; a result
// that cannot be annotated ends the call unanswered.
func TestStdioCallAnswer(t *testing.T) {
	const info = `{"name":"taskgate"}`
	const unanswered = `{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"gone"}}`
	tests := []struct {
		name       string
		resp       *jsonrpc.Response
		serverInfo string
		want       string
	}{
		{"result", &jsonrpc.Response{Result: json.RawMessage(`{"content":[]}`)}, "",
			`{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`},
		{"error", &jsonrpc.Response{Error: &jsonrpc.Error{Code: -32602, Message: "no", Data: json.RawMessage(`{"reason":"r"}`)}}, "",
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"no","data":{"reason":"r"}}}`},
		{"a carriage return in the result", &jsonrpc.Response{Result: json.RawMessage("{\"a\":\r1}")}, "",
			`{"jsonrpc":"2.0","id":7,"result":{"a":1}}`},
		{"result for a 2026-07-28 client", &jsonrpc.Response{Result: json.RawMessage(`{"content":[]}`)}, info,
			`{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":` + info + `},"content":[]}}`},
		{"empty result for a 2026-07-28 client", &jsonrpc.Response{Result: json.RawMessage(`{}`)}, info,
			`{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":` + info + `}}}`},
		{"typed result for a 2026-07-28 client", &jsonrpc.Response{Result: json.RawMessage(`{"resultType":"complete","_meta":{"t":1}}`)}, info,
			`{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","_meta":{"t":1,"io.modelcontextprotocol/serverInfo":` + info + `}}}`},
		{"error for a 2026-07-28 client", &jsonrpc.Response{Error: &jsonrpc.Error{Code: -32601, Message: "no"}}, info,
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no"}}`},
		{"a result that is no object, for a 2026-07-28 client", &jsonrpc.Response{Result: json.RawMessage(`[1]`)}, info, unanswered},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			released := 0
			s := &stdioCall{call: &RelayedCall{ID: json.RawMessage(`7`), Unanswered: []byte(unanswered)}, wake: make(chan struct{}, 1), release: func() { released++ }}
			if tt.serverInfo != "" {
				s.call.ServerInfo = json.RawMessage(tt.serverInfo)
			}
			s.deliverAnswer(tt.resp)
			data, ok := strings.CutPrefix(string(s.queue), sseEvent)
			data, end := strings.CutSuffix(data, "\n\n")
			if !ok || !end || strings.ContainsAny(data, "\r\n") {
				t.Fatalf("queued %q, want one event", s.queue)
			}
			if !sameJSON(t, []byte(data), []byte(tt.want)) {
				t.Errorf("answer %s, want %s", data, tt.want)
			}
			if !s.over || released != 1 {
				t.Errorf("after the answer over = %v and the call released %d times, want true and 1", s.over, released)
			}
			// Nothing follows the answer.
			before := len(s.queue)
			s.deliverProgress(json.RawMessage(`{"progressToken":"taskgate-relay-1","progress":2}`))
			if len(s.queue) != before {
				t.Errorf("progress after the answer was queued: %q", s.queue[before:])
			}
		})
	}
}

// TestTakeRelayed: the tap takes every answer and progress notification
// that names a gateway request ID or token, a late one included, and
// leaves everything else, the child's requests above all, to the go-sdk.
// It reads member names exactly, as the go-sdk does.
func TestTakeRelayed(t *testing.T) {
	tests := []struct {
		name   string
		frame  string
		taken  bool
		queued bool
	}{
		{"an answer to the SDK", `{"jsonrpc":"2.0","id":3,"result":{}}`, false, false},
		{"an answer with a string ID of another's", `{"jsonrpc":"2.0","id":"x-1","result":{}}`, false, false},
		{"the relayed call's answer", `{"jsonrpc":"2.0","id":"taskgate-relay-1","result":{}}`, true, true},
		{"the relayed call's error", `{"jsonrpc":"2.0","id":"taskgate-relay-1","error":{"code":-32602,"message":"no"}}`, true, true},
		{"an answer with spaces", "{ \"jsonrpc\" : \"2.0\" , \"id\" : \"taskgate-relay-1\" , \"result\" : { } }", true, true},
		{"a late answer", `{"jsonrpc":"2.0","id":"taskgate-relay-2","result":{}}`, true, false},
		{"an ID spelt in capitals", `{"jsonrpc":"2.0","ID":"taskgate-relay-1","result":{}}`, false, false},
		{"another JSON-RPC version", `{"jsonrpc":"1.0","id":"taskgate-relay-1","result":{}}`, false, false},
		{"an error that is not an error object", `{"jsonrpc":"2.0","id":"taskgate-relay-1","error":"no"}`, false, false},
		{"a batch", `[{"jsonrpc":"2.0","id":"taskgate-relay-1","result":{}}]`, false, false},
		{"the relayed call's progress", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"taskgate-relay-1","progress":1}}`, true, true},
		{"late progress", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"taskgate-relay-2","progress":1}}`, true, false},
		{"a progress token spelt otherwise", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progresstoken":"taskgate-relay-1","progress":1}}`, false, false},
		{"progress of an SDK call", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"taskgate-4","progress":1,"message":"taskgate-relay-1"}}`, false, false},
		{"a log message", `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"taskgate-relay-1"}}`, false, false},
		{"the child's request", `{"jsonrpc":"2.0","id":"taskgate-relay-1","method":"elicitation/create","params":{}}`, false, false},
		{"an answer nested deeper than the go-sdk takes", `{"jsonrpc":"2.0","id":"taskgate-relay-1","result":{"a":` + strings.Repeat("[", 1001) + strings.Repeat("]", 1001) + `}}`, false, false},
		{"an answer nested as deep as the go-sdk takes", `{"jsonrpc":"2.0","id":"taskgate-relay-1","result":{"a":` + strings.Repeat("[", 998) + strings.Repeat("]", 998) + `}}`, true, true},
		{"an ID spelt with an escape", `{"jsonrpc":"2.0","id":"\u0074askgate-relay-1","result":{}}`, true, true},
		{"a progress token spelt with an escape", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"taskgate\u002drelay-1","progress":1}}`, true, true},
		{"a late answer spelt with an escape", `{"jsonrpc":"2.0","id":"\u0074askgate-relay-2","result":{}}`, true, false},
		{"an escape in another's answer", `{"jsonrpc":"2.0","id":3,"result":{"text":"caf\u00e9"}}`, false, false},
		{"progress sent as a request", `{"jsonrpc":"2.0","id":7,"method":"notifications/progress","params":{"progressToken":"taskgate-relay-1","progress":1}}`, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &tapConn{}
			s := &stdioCall{call: &RelayedCall{ID: json.RawMessage(`1`), ProgressToken: json.RawMessage(`"p"`)}, wake: make(chan struct{}, 1), release: func() {}}
			c.register("taskgate-relay-1", s)
			msg, err := c.decodeOne(json.RawMessage(tt.frame))
			if got := msg == nil && err == nil; got != tt.taken {
				t.Errorf("decodeOne = %v, %v; want taken %v", msg, err, tt.taken)
			}
			if got := len(s.queue) > 0; got != tt.queued {
				t.Errorf("queued for the call: %q, want queued %v", s.queue, tt.queued)
			}
		})
	}
}

// TestStdioCallLogLevel: a log message routed to a relayed call passes at
// its client's level or above.
func TestStdioCallLogLevel(t *testing.T) {
	for _, tt := range []struct {
		client, level mcp.LoggingLevel
		passes        bool
	}{{"info", "info", true}, {"info", "error", true}, {"info", "debug", false}, {"", "error", false}} {
		s := &stdioCall{call: &RelayedCall{LogLevel: tt.client}, wake: make(chan struct{}, 1)}
		s.deliverLog(&mcp.LoggingMessageParams{Level: tt.level, Data: "d"})
		if got := len(s.queue) > 0; got != tt.passes {
			t.Errorf("a %s message to a client at %q passed: %v, want %v", tt.level, tt.client, got, tt.passes)
		}
	}
}

// TestRelayedErrorMembersExact: the members of a relayed call's error are
// matched as the go-sdk matches them, exactly: a "Code" is not the code.
func TestRelayedErrorMembersExact(t *testing.T) {
	c := &tapConn{}
	s := &stdioCall{call: &RelayedCall{ID: json.RawMessage(`1`)}, wake: make(chan struct{}, 1), release: func() {}}
	c.register("taskgate-relay-1", s)
	if msg, err := c.decodeOne(json.RawMessage(`{"jsonrpc":"2.0","id":"taskgate-relay-1","error":{"Code":-32602,"Message":"no","data":{"reason":"x"}}}`)); msg != nil || err != nil {
		t.Fatal("the relayed answer was not taken")
	}
	want := `{"jsonrpc":"2.0","id":1,"error":{"code":0,"message":"","data":{"reason":"x"}}}`
	if !bytes.Contains(s.queue, []byte(want)) {
		t.Errorf("relayed %q; want the error as the go-sdk decodes it, %s", s.queue, want)
	}
}

// TestRelayedAnswerInvalidUTF8: invalid UTF-8 in a relayed answer reaches
// the client as U+FFFD, as the go-sdk's decoder would have made it.
func TestRelayedAnswerInvalidUTF8(t *testing.T) {
	c := &tapConn{}
	s := &stdioCall{call: &RelayedCall{ID: json.RawMessage(`1`)}, wake: make(chan struct{}, 1), release: func() {}}
	c.register("taskgate-relay-1", s)
	if msg, err := c.decodeOne(json.RawMessage("{\"jsonrpc\":\"2.0\",\"id\":\"taskgate-relay-1\",\"result\":{\"text\":\"a\xffb\xc0\xafc\"}}")); msg != nil || err != nil {
		t.Fatal("the relayed answer was not taken")
	}
	if !bytes.Contains(s.queue, []byte("a\uFFFDb\uFFFD\uFFFDc")) {
		t.Errorf("relayed %q; want each invalid byte as U+FFFD, as the go-sdk decodes it", s.queue)
	}
}
