package mcpserver

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/provider"
)

// TestListedSchemaHidesTheKeyArgument: the contract's key argument leaves
// the listed input schema, from its properties and from required, and
// operation_id takes its place; a contract whose key argument is
// operation_id itself keeps taskgate's operation_id.
func TestListedSchemaHidesTheKeyArgument(t *testing.T) {
	upstreamSchema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"suite":           map[string]any{"type": "string"},
			"idempotency_key": map[string]any{"type": "string", "description": "reuse the same value when retrying"},
		},
		"required": []any{"suite", "idempotency_key"},
	}
	for _, tt := range []struct {
		key      string
		wantProp []string
		wantReq  []string
	}{
		{"idempotency_key", []string{"operation_id", "suite"}, []string{"suite"}},
		{"operation_id", []string{"idempotency_key", "operation_id", "suite"}, []string{"suite", "idempotency_key"}},
		{"", []string{"idempotency_key", "operation_id", "suite"}, []string{"suite", "idempotency_key"}},
	} {
		policy := &config.Tool{Contract: config.Contract{Key: config.KeyPassing{Argument: tt.key}}}
		r := &route{upstream: "hosted_test", tool: "run_suite", policy: policy, contract: provider.New("hosted_test", "run_suite", policy)}
		out, err := (&Gateway{}).downstreamTool("hosted_test.run_suite", &mcp.Tool{Name: "run_suite", InputSchema: upstreamSchema}, r)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(out.InputSchema)
		var schema struct {
			Properties map[string]any `json:"properties"`
			Required   []string       `json:"required"`
		}
		_ = json.Unmarshal(b, &schema)
		var props []string
		for name := range schema.Properties {
			props = append(props, name)
		}
		slices.Sort(props)
		if !slices.Equal(props, tt.wantProp) || !slices.Equal(schema.Required, tt.wantReq) {
			t.Errorf("key argument %q: listed properties %v, required %v; want %v, %v", tt.key, props, schema.Required, tt.wantProp, tt.wantReq)
		}
	}
	// The upstream's own schema is left as it was.
	if req, props := upstreamSchema["required"].([]any), upstreamSchema["properties"].(map[string]any); len(req) != 2 || len(props) != 2 {
		t.Errorf("the upstream's schema was changed: properties %v, required %v", props, req)
	}
}
