package mcpserver_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/daemon"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/upstream"
)

// TestSDKPathOnlyRelaysNothing: with the SDK-path test switch on, a
// pass-through call of either era still answers as it should, but reaches
// the upstream from the gateway's own client instead of as the downstream
// client's relayed request. With the switch off, the same calls are
// relayed: the control that shows the upstream can tell the two apart.
func TestSDKPathOnlyRelaysNothing(t *testing.T) {
	for _, tt := range []struct {
		name        string
		sdkPathOnly bool
		version     string // the client's protocol version; "" for the SDK's latest, 2026-07-28
		wantClient  string // who the upstream sees calling
	}{
		{"fast path, 2026-07-28", false, "", "switch-client"},
		{"fast path, 2025-11-25 session", false, "2025-11-25", "switch-client"},
		{"SDK path only, 2026-07-28", true, "", upstream.DefaultClientName},
		{"SDK path only, 2025-11-25 session", true, "2025-11-25", upstream.DefaultClientName},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec, up := forwardingUpstream(t, 0)
			url, key := switchGateway(t, up.URL, tt.sdkPathOnly)
			cs := dialGateway(t, url, key, "switch-client", tt.version, nil)
			if _, err := cs.ListTools(testCtx(t), nil); err != nil {
				t.Fatal(err)
			}
			res, err := cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: "plumbing.meta", Arguments: map[string]any{},
				Meta: mcp.Meta{"trace": "t-1", "dev.taskgate/operationId": "op-1"}})
			if err != nil || res.IsError {
				t.Fatalf("meta = %+v, %v", res, err)
			}
			if echoed := fixtures.ResultText(res); !strings.Contains(echoed, `"trace":"t-1"`) || strings.Contains(echoed, "dev.taskgate") {
				t.Errorf("the upstream saw _meta %s; want trace and no dev.taskgate keys", echoed)
			}
			seen := rec.seen()
			if len(seen) != 1 {
				t.Fatalf("upstream saw %d calls; want 1", len(seen))
			}
			if got := seen[0].clientName(); got != tt.wantClient {
				t.Errorf("upstream saw the call from client %q; want %q", got, tt.wantClient)
			}
		})
	}
}

// switchGateway starts a gateway in front of the plumbing upstream at
// upstreamURL, with the SDK-path test switch as given, and returns its MCP
// endpoint and an API key of tenant acme.
func switchGateway(t *testing.T, upstreamURL string, sdkPathOnly bool) (url, key string) {
	t.Helper()
	ctx := testCtx(t)
	db := "sqlite:" + filepath.Join(t.TempDir(), "taskgate.db")
	y := strings.Replace(fixtures.ConfigYAML(upstreamURL, "127.0.0.1:0", db, fixtures.ConfigOptions{}), "  - name: hosted_test", "  - name: plumbing", 1)
	cfg, err := config.Parse(strings.NewReader(y), "plumbing.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := daemon.Start(ctx, &daemon.Options{Config: cfg, SDKPathOnly: sdkPathOnly})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(context.Background()) })
	key, _, err = authn.NewAPIKey(ctx, d.Store, "acme", "test")
	if err != nil {
		t.Fatal(err)
	}
	return d.URL + "/mcp", key
}

// TestBothPathsDeclareTheClientsCapabilities: a 2026-07-28 client's call
// reaches a 2026-07-28 upstream declaring the client's own capabilities
// (sampling only, here) on either path, never the gateway's, so that the
// upstream asks only what the client can answer.
func TestBothPathsDeclareTheClientsCapabilities(t *testing.T) {
	for _, sdkPathOnly := range []bool{false, true} {
		t.Run(map[bool]string{false: "fast path", true: "SDK path"}[sdkPathOnly], func(t *testing.T) {
			rec, up := forwardingUpstream(t, 0)
			url, key := switchGateway(t, up.URL, sdkPathOnly)
			cs := dialGateway(t, url, key, "sampling-client", "", &mcp.ClientOptions{
				CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) { return nil, nil },
			})
			if res, err := cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: "plumbing.meta", Arguments: map[string]any{}}); err != nil || res.IsError {
				t.Fatalf("meta = %+v, %v", res, err)
			}
			seen := rec.seen()
			if len(seen) != 1 {
				t.Fatalf("upstream saw %d calls; want 1", len(seen))
			}
			params, _ := seen[0].body["params"].(map[string]any)
			meta, _ := params["_meta"].(map[string]any)
			caps, _ := meta[mcp.MetaKeyClientCapabilities].(map[string]any)
			if caps["sampling"] == nil || caps["elicitation"] != nil {
				t.Errorf("the call declared %v; want the client's sampling and no elicitation", caps)
			}
		})
	}
}
