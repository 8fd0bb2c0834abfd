package upstream

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRelayedBodyRestore: of the messages on a relayed call's stream, only
// the call's answer and its own progress pass, under the client's request
// ID and token, however the answer's members are ordered, and log messages
// the client's level admits, as they are.
func TestRelayedBodyRestore(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // "" when the message is dropped
		level    mcp.LoggingLevel
	}{
		{"answer as go-sdk spells it", `{"jsonrpc":"2.0","id":"taskgate-relay-3","result":{"content":[]}}`, `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`, ""},
		{"error answer", `{"jsonrpc":"2.0","id":"taskgate-relay-3","error":{"code":-32602,"message":"no"}}`, `{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"no"}}`, ""},
		{"answer with members reordered", `{"result":{"x":1}, "id": "taskgate-relay-3", "jsonrpc":"2.0"}`, `{"id":7,"jsonrpc":"2.0","result":{"x":1}}`, ""},
		{"another call's answer", `{"jsonrpc":"2.0","id":"taskgate-relay-4","result":{}}`, "", ""},
		{"own progress", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"taskgate-relay-3","progress":1}}`,
			`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1,"progressToken":"p"}}`, ""},
		{"another call's progress", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"taskgate-relay-4","progress":1}}`, "", ""},
		{"a log message, no level set", `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`, "", ""},
		{"a log message at the level", `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`,
			`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`, "info"},
		{"a log message above the level", `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"error","data":"x"}}`,
			`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"error","data":"x"}}`, "info"},
		{"a log message below the level", `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"debug","data":"x"}}`, "", "info"},
		{"not JSON", `{"jsonrpc":`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &relayedBody{
				u:    &Upstream{},
				call: &RelayedCall{ID: json.RawMessage(`7`), ProgressToken: json.RawMessage(`"p"`), LogLevel: tt.level},
				sent: relaySent{id: json.RawMessage(`"taskgate-relay-3"`), token: json.RawMessage(`"taskgate-relay-3"`)},
			}
			got := b.restore("", []byte(tt.in))
			if tt.want == "" {
				if got != nil {
					t.Fatalf("restore(%s) = %s; want it dropped", tt.in, got)
				}
				return
			}
			if got == nil || !sameJSON(t, got, []byte(tt.want)) {
				t.Fatalf("restore(%s) = %s; want %s", tt.in, got, tt.want)
			}
		})
	}
}

// TestRelayedAnswerForStatelessClient: for a 2026-07-28 client a relayed
// result gains resultType "complete" and the gateway's serverInfo where it
// has neither, whether spliced or decoded, and keeps what the upstream set.
func TestRelayedAnswerForStatelessClient(t *testing.T) {
	const info = `{"name":"taskgate","version":"dev"}`
	tests := []struct{ name, in, want string }{
		{"result", `{"jsonrpc":"2.0","id":"taskgate-relay-3","result":{"content":[]}}`,
			`{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":` + info + `},"content":[]}}`},
		{"empty result", `{"jsonrpc":"2.0","id":"taskgate-relay-3","result":{}}`,
			`{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":` + info + `}}}`},
		{"result with _meta", `{"jsonrpc":"2.0","id":"taskgate-relay-3","result":{"_meta":{"trace":"t"},"content":[]}}`,
			`{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","_meta":{"trace":"t","io.modelcontextprotocol/serverInfo":` + info + `},"content":[]}}`},
		{"the upstream's own serverInfo", `{"jsonrpc":"2.0","id":"taskgate-relay-3","result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up"}}}}`,
			`{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up"}}}}`},
		{"the words in content only", `{"jsonrpc":"2.0","id":"taskgate-relay-3","result":{"content":[{"type":"text","text":"\"resultType\""}]}}`,
			`{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":` + info + `},"content":[{"type":"text","text":"\"resultType\""}]}}`},
		{"members reordered", `{"result":{"x":1},"id":"taskgate-relay-3","jsonrpc":"2.0"}`,
			`{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":` + info + `},"x":1}}`},
		{"error", `{"jsonrpc":"2.0","id":"taskgate-relay-3","error":{"code":-32602,"message":"no"}}`,
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"no"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &relayedBody{
				u:    &Upstream{},
				call: &RelayedCall{ID: json.RawMessage(`7`), ServerInfo: json.RawMessage(info)},
				sent: relaySent{id: json.RawMessage(`"taskgate-relay-3"`)},
			}
			got := b.restore("", []byte(tt.in))
			if got == nil || !sameJSON(t, got, []byte(tt.want)) {
				t.Fatalf("restore(%s) = %s; want %s", tt.in, got, tt.want)
			}
		})
	}
}
