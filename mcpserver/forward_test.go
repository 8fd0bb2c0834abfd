package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/sim/fixtures"
)

// seenCall is one tools/call as an upstream received it.
type seenCall struct {
	header http.Header
	body   map[string]any
}

// clientName is the clientInfo name the call carried: the downstream
// client's when the gateway forwarded its bytes, the gateway's own when it
// called through the SDK.
func (c seenCall) clientName() string {
	params, _ := c.body["params"].(map[string]any)
	meta, _ := params["_meta"].(map[string]any)
	info, _ := meta[mcp.MetaKeyClientInfo].(map[string]any)
	name, _ := info["name"].(string)
	return name
}

// recordingUpstream serves the plumbing server over stateless 2026-07-28
// HTTP and keeps every tools/call it receives. refuse, when set, answers
// tools/call with that HTTP status instead.
type recordingUpstream struct {
	mu     sync.Mutex
	calls  []seenCall
	refuse int
	*blocker
}

// blocker serves the block tool, which returns only once its call is
// cancelled, and reports on started and cancelled each call that started,
// and each that was cancelled.
type blocker struct {
	started, cancelled chan struct{}
}

func newBlocker() *blocker {
	return &blocker{started: make(chan struct{}, 8), cancelled: make(chan struct{}, 8)}
}

func (b *blocker) addTo(s *mcp.Server) {
	s.AddTool(&mcp.Tool{Name: "block", Description: "Returns when cancelled.", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			b.started <- struct{}{}
			select {
			case <-ctx.Done():
				b.cancelled <- struct{}{}
				return nil, ctx.Err()
			case <-time.After(15 * time.Second): // never hold up the server's Close
				return nil, errors.New("block was never cancelled")
			}
		})
}

// awaitSignal fails the test with what unless ch receives within ten
// seconds.
func awaitSignal[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal(what)
	}
}

func (u *recordingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if r.Method == http.MethodPost && r.Header.Get("Mcp-Method") == "tools/call" {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		var msg map[string]any
		_ = json.Unmarshal(b, &msg)
		u.mu.Lock()
		u.calls = append(u.calls, seenCall{header: r.Header.Clone(), body: msg})
		refuse := u.refuse
		u.mu.Unlock()
		if refuse != 0 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="upstream", error="invalid_token"`)
			http.Error(w, "upstream credential rejected", refuse)
			return
		}
	}
	next.ServeHTTP(w, r)
}

func (u *recordingUpstream) seen() []seenCall {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seenCall(nil), u.calls...)
}

// forwardingGateway starts a 2026-07-28 upstream (forwardingUpstream) and
// a gateway in front of it.
func forwardingGateway(t *testing.T, refuse int) (rec *recordingUpstream, url, key string, up *httptest.Server) {
	t.Helper()
	rec, up = forwardingUpstream(t, refuse)
	url, key = plumbingGateway(t, testCtx(t), up.URL, "  - name: plumbing")
	return rec, url, key, up
}

// forwardingUpstream starts a 2026-07-28 upstream whose tools are the
// plumbing server's plus region, which sends its argument as the
// Mcp-Param-Region header too, and block, which returns only once its call
// is cancelled and then reports that on rec.cancelled.
func forwardingUpstream(t *testing.T, refuse int) (rec *recordingUpstream, up *httptest.Server) {
	t.Helper()
	rec = &recordingUpstream{refuse: refuse, blocker: newBlocker()}
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		s := plumbingServer()
		s.AddTool(&mcp.Tool{Name: "region", Description: "Echoes its region.", InputSchema: map[string]any{
			"type":       "object",
			"properties": map[string]any{"region": map[string]any{"type": "string", "x-mcp-header": "Region"}},
		}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
		})
		rec.addTo(s)
		return s
	}, &mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
	up = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rec.ServeHTTP(w, r, sdk) }))
	t.Cleanup(up.Close)
	return rec, up
}

// postRaw sends a 2026-07-28 tools/call of tool with params as bytes and
// returns the HTTP response and its JSON-RPC message.
func postRaw(t *testing.T, url, key, host, version, tool string, params map[string]any) (*http.Response, map[string]any) {
	t.Helper()
	params["name"] = tool
	meta, _ := params["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		params["_meta"] = meta
	}
	meta[mcp.MetaKeyProtocolVersion] = version
	meta[mcp.MetaKeyClientInfo] = map[string]any{"name": "raw", "version": "0"}
	if _, ok := meta[mcp.MetaKeyClientCapabilities]; !ok {
		meta[mcp.MetaKeyClientCapabilities] = map[string]any{}
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params})
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range map[string]string{
		"Authorization": "Bearer " + key, "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": version, "Mcp-Method": "tools/call", "Mcp-Name": tool,
	} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var msg map[string]any
	_ = json.Unmarshal(lastMessage(resp, data), &msg)
	return resp, msg
}

// lastMessage returns the JSON-RPC message of a response body: the body
// itself, or the data of the last event of an event stream.
func lastMessage(resp *http.Response, body []byte) []byte {
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return body
	}
	var last []byte
	for line := range bytes.Lines(body) {
		if v, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("data:")); ok {
			last = bytes.TrimSpace(v)
		}
	}
	return last
}

// TestForwardedCallCarriesNoGatewayKeys: the forwarded bytes lose what the
// SDK path drops too — params.idempotencyKey, which would let two tenants
// meet at the upstream under taskgate's one credential, and the tasks
// extension however it is spelt.
func TestForwardedCallCarriesNoGatewayKeys(t *testing.T) {
	rec, url, key, _ := forwardingGateway(t, 0)
	params := map[string]any{
		"arguments":      map[string]any{},
		"idempotencyKey": "shared-key",
		"_meta": map[string]any{mcp.MetaKeyClientCapabilities: map[string]any{
			"Extensions": map[string]any{"IO.ModelContextProtocol/Tasks": map[string]any{}},
		}},
	}
	resp, msg := postRaw(t, url, key, "", "2026-07-28", "plumbing.meta", params)
	if resp.StatusCode != http.StatusOK || msg["result"] == nil {
		t.Fatalf("tools/call = %d %v", resp.StatusCode, msg)
	}
	seen := rec.seen()
	if len(seen) != 1 || seen[0].clientName() != "raw" {
		t.Fatalf("upstream saw %d calls (client %q); want the one call, forwarded as bytes", len(seen), seen[0].clientName())
	}
	forwarded, _ := json.Marshal(seen[0].body)
	for _, never := range []string{"idempotencyKey", "shared-key", "modelcontextprotocol/tasks"} {
		if bytes.Contains(bytes.ToLower(forwarded), bytes.ToLower([]byte(never))) {
			t.Errorf("the upstream received %s; it must not contain %s", forwarded, never)
		}
	}
}

// TestHeaderArgumentsTakeTheSDKPath: a tool whose arguments also travel in
// Mcp-Param-* headers is called through the SDK, which builds them.
func TestHeaderArgumentsTakeTheSDKPath(t *testing.T) {
	rec, url, key, _ := forwardingGateway(t, 0)
	client := mcp.NewClient(&mcp.Implementation{Name: "header-client"}, nil)
	cs, err := client.Connect(testCtx(t), &mcp.StreamableClientTransport{
		Endpoint: url, MaxRetries: -1, HTTPClient: &http.Client{Transport: fixtures.Bearer{Key: key}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.ListTools(testCtx(t), nil); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: "plumbing.region", Arguments: map[string]any{"region": "eu-west"}})
	if err != nil || res.IsError {
		t.Fatalf("region = %+v, %v", res, err)
	}
	seen := rec.seen()
	if len(seen) != 1 || seen[0].header.Get("Mcp-Param-Region") != "eu-west" {
		t.Fatalf("upstream saw %d calls, the last with Mcp-Param-Region %q; want one with eu-west", len(seen), seen[len(seen)-1].header.Get("Mcp-Param-Region"))
	}
}

// TestUpstreamRefusalIsNotTheClients: an upstream's 401 concerns taskgate's
// credential; the client hears -32603 upstream_unavailable, not a
// challenge for its own.
func TestUpstreamRefusalIsNotTheClients(t *testing.T) {
	_, url, key, _ := forwardingGateway(t, http.StatusUnauthorized)
	resp, msg := postRaw(t, url, key, "", "2026-07-28", "plumbing.meta", map[string]any{"arguments": map[string]any{}})
	e, _ := msg["error"].(map[string]any)
	data, _ := e["data"].(map[string]any)
	if resp.StatusCode != http.StatusOK || e == nil || e["code"] != float64(-32603) || data["reason"] != "upstream_unavailable" {
		t.Fatalf("tools/call with the upstream refusing = %d %v; want 200 with -32603 upstream_unavailable", resp.StatusCode, msg)
	}
	if h := resp.Header.Get("WWW-Authenticate"); h != "" {
		t.Errorf("the upstream's challenge %q reached the client", h)
	}
}

// TestForwardingKeepsTheSDKsGuards: a rebound Host and an unknown protocol
// version are left to the SDK's handler, never forwarded.
func TestForwardingKeepsTheSDKsGuards(t *testing.T) {
	rec, url, key, _ := forwardingGateway(t, 0)
	resp, _ := postRaw(t, url, key, "evil.example:80", "2026-07-28", "plumbing.meta", map[string]any{"arguments": map[string]any{}})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a call under Host evil.example answered %d; want 403 as the SDK answers a DNS rebinding", resp.StatusCode)
	}
	postRaw(t, url, key, "", "9999-01-01", "plumbing.meta", map[string]any{"arguments": map[string]any{}})
	for _, c := range rec.seen() {
		if c.clientName() == "raw" {
			t.Errorf("the upstream received the client's own bytes (%v); want nothing forwarded", c.body)
		}
	}
}

// TestUnreachableUpstreamSaysNoAddress: when the upstream cannot be
// reached, the client hears -32603 naming the upstream, not its address or
// the dialer's error, which may carry credentials and internal hosts.
func TestUnreachableUpstreamSaysNoAddress(t *testing.T) {
	_, url, key, up := forwardingGateway(t, 0)
	addr := strings.TrimPrefix(up.URL, "http://")
	up.CloseClientConnections()
	up.Close()
	for range 3 { // the forwarded path first, then the SDK path once the upstream is known to be down
		resp, msg := postRaw(t, url, key, "", "2026-07-28", "plumbing.meta", map[string]any{"arguments": map[string]any{}})
		e, _ := msg["error"].(map[string]any)
		text, _ := json.Marshal(msg)
		if e == nil || e["code"] != float64(-32603) {
			t.Fatalf("tools/call with the upstream gone = %d %s; want -32603", resp.StatusCode, text)
		}
		for _, never := range []string{addr, "refused", "dial", "connect"} {
			if strings.Contains(string(text), never) {
				t.Errorf("the answer %s contains %q", text, never)
			}
		}
	}
}
