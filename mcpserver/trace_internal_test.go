package mcpserver

import (
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestErrorTypes(t *testing.T) {
	tests := []struct {
		name        string
		res         mcp.Result
		err         error
		span, class string
	}{
		{"success", &mcp.CallToolResult{}, nil, "", ""},
		{"a tool's error", &mcp.CallToolResult{IsError: true}, nil, "tool_error", "tool_error"},
		{"the gateway's refusal", nil, rpcError(jsonrpc.CodeInvalidParams, "no", map[string]any{"reason": "operation_archived"}), "operation_archived", "-32602"},
		{"an upstream's sentence for a reason", nil, rpcError(-32000, "no", map[string]any{"reason": "Ask Bob at bob@example.com"}), "-32000", "-32000"},
		{"an upstream's own code", nil, &jsonrpc.Error{Code: 4711, Message: "no"}, "4711", "_OTHER"},
		{"a transport failure", nil, errors.New("dial tcp: refused"), "_OTHER", "_OTHER"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errorType(tt.res, tt.err); got != tt.span {
				t.Errorf("errorType = %q, want %q", got, tt.span)
			}
			if got := errorClass(tt.res, tt.err); got != tt.class {
				t.Errorf("errorClass = %q, want %q", got, tt.class)
			}
		})
	}
}

func TestMethodLabelTakesNoClientValues(t *testing.T) {
	for m, want := range map[string]string{"tools/call": "tools/call", "tasks/get": "tasks/get", "tools/call2": "other", "x/" + string(make([]byte, 100)): "other"} {
		if got := methodLabel(m); got != want {
			t.Errorf("methodLabel(%q) = %q, want %q", m, got, want)
		}
	}
}
