package mcpserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/sim/fixtures"
)

// defaultClient opens a session of the go-sdk's default client, which
// speaks 2026-07-28 where its server does, to the gateway at url.
func defaultClient(t *testing.T, url, key string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cs := dialGateway(t, url, key, "default-client", "", opts)
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("the default client negotiated %s with the gateway; want 2026-07-28", v)
	}
	return cs
}

// TestStatelessCallIsRelayedInSession: a 2026-07-28 client's pass-through
// call to an upstream that holds sessions (and so never speaks
// 2026-07-28) goes in the gateway's relay session, under the gateway's
// request ID and progress token and without the protocol's own _meta
// keys; the client gets its progress in order and the upstream's result
// marked complete and signed by the gateway, as the SDK path answers it.
func TestStatelessCallIsRelayedInSession(t *testing.T) {
	up, upURL := startSessionUpstream(t, sessionUpstreamOptions{})
	url, keys := plumbingGatewayKeys(t, testCtx(t), upURL, "  - name: plumbing", fixtures.ConfigOptions{}, "acme")
	var progress progressLog
	cs := defaultClient(t, url, keys[0], &mcp.ClientOptions{ProgressNotificationHandler: progress.add})

	res, err := cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: "plumbing.count", Arguments: map[string]any{"n": 3},
		Meta: mcp.Meta{"progressToken": "p-1", "trace": "t-1"}})
	if err != nil || fixtures.ResultText(res) != "counted" {
		t.Fatalf("count = %+v, %v", res, err)
	}
	if got := progress.await(t, 3); len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Errorf("progress received %v; want 1, 2, 3 in order", got)
	}
	if res.NeedsInput() {
		t.Error("the relayed result reads as input_required; want complete")
	}
	info, _ := res.Meta[mcp.MetaKeyServerInfo].(map[string]any)
	if info["name"] != "taskgate" {
		t.Errorf("the result's serverInfo is %v; want the gateway's, as its own server sets it", res.Meta[mcp.MetaKeyServerInfo])
	}
	calls := up.seen()
	if len(calls) != 1 || !relayedID(calls[0]) {
		t.Fatalf("upstream saw %v; want the one call, relayed", calls)
	}
	params, _ := calls[0]["params"].(map[string]any)
	meta, _ := params["_meta"].(map[string]any)
	if meta["trace"] != "t-1" || meta["progressToken"] == "p-1" {
		t.Errorf("upstream saw _meta %v; want trace and the gateway's progress token", meta)
	}
	for k := range meta {
		if strings.HasPrefix(k, "io.modelcontextprotocol/") {
			t.Errorf("upstream saw _meta key %s, which a 2025-11-25 session does not carry", k)
		}
	}
}

// TestStatelessRelayedCallIsCancelled: a 2026-07-28 client cancels by
// ending its request; the gateway cancels the relayed call upstream.
func TestStatelessRelayedCallIsCancelled(t *testing.T) {
	up, upURL := startSessionUpstream(t, sessionUpstreamOptions{})
	url, keys := plumbingGatewayKeys(t, testCtx(t), upURL, "  - name: plumbing", fixtures.ConfigOptions{UpstreamTimeout: 5 * time.Minute}, "acme")
	cs := defaultClient(t, url, keys[0], nil)
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "plumbing.block", Arguments: map[string]any{}})
		done <- err
	}()
	awaitSignal(t, up.started, "the block call never started upstream")
	if !relayedID(up.seen()[0]) {
		t.Fatalf("the block call reached the upstream as %v; want it relayed", up.seen()[0])
	}
	cancel()
	awaitSignal(t, up.cancelled, "the upstream's block call was not cancelled")
	awaitSignal(t, done, "the cancelled call did not return")
}
