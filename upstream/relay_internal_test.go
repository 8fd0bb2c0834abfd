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
			var g, w any
			if json.Unmarshal(got, &g) != nil || json.Unmarshal([]byte(tt.want), &w) != nil {
				t.Fatalf("restore(%s) = %s; want %s", tt.in, got, tt.want)
			}
			gj, _ := json.Marshal(g)
			wj, _ := json.Marshal(w)
			if string(gj) != string(wj) {
				t.Fatalf("restore(%s) = %s; want %s", tt.in, got, tt.want)
			}
		})
	}
}
