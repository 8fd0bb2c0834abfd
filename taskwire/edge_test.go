package taskwire

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/testwait"
)

// TestHTTPMcpNameReadsTheExactKey: the router reads params.taskId exactly
// as the SDK does, so another spelling cannot make it check one task while
// the SDK serves another, and a body that spells a member twice is refused.
func TestHTTPMcpNameReadsTheExactKey(t *testing.T) {
	f := startHTTP(t)
	cs := f.connect(t, "alice", "", true)
	task := startTask(t, cs, "slow", nil, nil)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"` +
		ExtensionID + `":{}}},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"0"}}`
	for _, tt := range []struct {
		name, mcpName, body string
	}{
		{"decoy in another case", "decoy", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"` + task.ID + `","TASKID":"decoy",` + meta + `}}`},
		{"decoy in the same case", "decoy", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"` + task.ID + `","taskId":"decoy",` + meta + `}}`},
		{"method spelt twice", task.ID, `{"jsonrpc":"2.0","id":7,"method":"tasks/get","Method":"tools/call","params":{"taskId":"` + task.ID + `",` + meta + `}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, msg := f.rawPost(t, "alice", modernHeaders(methodTasksGet, tt.mcpName), tt.body)
			errObj, _ := msg["error"].(map[string]any)
			if status != http.StatusBadRequest || errObj == nil {
				t.Fatalf("HTTP %d %v; want 400 and a JSON-RPC error", status, msg)
			}
			if res, _ := msg["result"].(map[string]any); res != nil {
				t.Fatalf("the task was served: %v", msg)
			}
		})
	}
}

// TestInternalErrorsSayNoInternals: a Host failure is logged, and the client
// hears -32603 with a sentence that names nothing inside the server.
func TestInternalErrorsSayNoInternals(t *testing.T) {
	f := startHTTP(t)
	ctx := testContext(t)
	for _, version := range []string{"", protocolLegacy} {
		cs := f.connect(t, "alice", version, true)
		_, err := cs.CallTool(ctx, callParams("broken", nil))
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInternalError || strings.Contains(werr.Message, "password") || strings.Contains(werr.Message, "10.0.0.5") {
			t.Errorf("protocol %q: tools/call of a failing host = %v; want -32603 without the host's error text", version, err)
		}
		_, err = GetTask(ctx, cs, "broken")
		if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInternalError || strings.Contains(werr.Message, "password") {
			t.Errorf("protocol %q: tasks/get of a failing host = %v; want -32603 without the host's error text", version, err)
		}
	}
}

// TestTaskRequiredNamesTheClientNeeded: a client older than 2025-11-25 has
// no tasks; it is told it needs a client with tasks, not to send one. A
// 2025-11-25 client gets the specification's -32601.
func TestTaskRequiredNamesTheClientNeeded(t *testing.T) {
	f := startHTTP(t)
	ctx := testContext(t)
	for _, tt := range []struct {
		version string
		code    int64
		want    string
	}{
		{"2025-06-18", jsonrpc.CodeInvalidRequest, "cannot receive tasks"},
		{protocolLegacy, jsonrpc.CodeMethodNotFound, ""},
	} {
		cs := f.connect(t, "alice", tt.version, false)
		_, err := cs.CallTool(ctx, callParams("needs_task", nil))
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != tt.code || !strings.Contains(werr.Message, tt.want) ||
			strings.Contains(werr.Message, "must be called as a task") {
			t.Errorf("protocol %s: %v; want %d saying %q", tt.version, err, tt.code, tt.want)
		}
	}
}

// endless serves a response of contentType that never ends a line, up to
// 64 MiB, and counts what it managed to write.
func endless(t *testing.T, contentType string, written *atomic.Int64) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		chunk := []byte(strings.Repeat("a", 64<<10))
		if contentType == "text/event-stream" {
			if _, err := io.WriteString(w, "data: "); err != nil {
				return
			}
		}
		for written.Load() < 64<<20 {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestClientShimBoundsWhatItReads: a response body or a server-sent event
// larger than the limit is an error once the limit is passed; the shim does
// not read the rest into memory first.
func TestClientShimBoundsWhatItReads(t *testing.T) {
	for _, contentType := range []string{"application/json", "text/event-stream"} {
		t.Run(contentType, func(t *testing.T) {
			var written atomic.Int64
			url := endless(t, contentType, &written)
			client := &http.Client{Transport: WrapRoundTripper(nil)}
			req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Do(req)
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			if err == nil || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("reading an unbounded %s body: %v; want an error once %d bytes are passed", contentType, err, mcp.DefaultMaxEventSize)
			}
			if n := written.Load(); n >= 48<<20 {
				t.Errorf("the server wrote %d MiB before the client gave up; want little more than the %d MiB limit", n>>20, mcp.DefaultMaxEventSize>>20)
			}
		})
	}
}

// TestKeepAlivePingsOnlyListeningSessions: a session's keepalive ping can
// reach its client only over a standalone stream. A live session without
// one is not closed for pings it could never answer; a session whose
// client holds a stream open but stopped answering is closed.
func TestKeepAlivePingsOnlyListeningSessions(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "keepalive-test", Version: "v0"}, &mcp.ServerOptions{
		// A ping has half the interval to be answered; three misses in a
		// row close a session, so a live client on a loaded machine is not
		// taken for a silent one.
		KeepAlive: 200 * time.Millisecond, KeepAliveFailureThreshold: 3,
	})
	server.AddTool(&mcp.Tool{Name: "plain", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	if err := Install(server, newTestHost(), nil); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewHTTPHandler(server, &HTTPOptions{Streamable: mcp.StreamableHTTPOptions{Logger: testLogger(t)}}))
	t.Cleanup(srv.Close)
	ctx := testContext(t)
	// Added after NewHTTPHandler's, this middleware runs first: it counts,
	// per session, the keepalive pings the client answered and those
	// refused for want of a stream.
	type pingCount struct{ answered, refused int }
	var (
		pingMu sync.Mutex
		pings  = map[string]pingCount{}
	)
	server.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil && method == "ping" {
				pingMu.Lock()
				n := pings[ss.ID()]
				if err == nil {
					n.answered++
				} else {
					n.refused++
				}
				pings[ss.ID()] = n
				pingMu.Unlock()
			}
			return res, err
		}
	})
	pinged := func(cs *mcp.ClientSession) pingCount {
		pingMu.Lock()
		defer pingMu.Unlock()
		return pings[cs.ID()]
	}

	connect := func(noStream bool) *mcp.ClientSession {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "keepalive-client"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1, DisableStandaloneSSE: noStream},
			&mcp.ClientSessionOptions{ProtocolVersion: protocolLegacy})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	withoutStream, withStream := connect(true), connect(false)

	// A silent client: it opens a session and a standalone stream, and
	// never answers what arrives on it.
	post := func(session, body string) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", protocolLegacy)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	resp := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"silent","version":"0"}}}`)
	silent := resp.Header.Get("Mcp-Session-Id")
	if silent == "" {
		t.Fatalf("initialize answered %d without a session", resp.StatusCode)
	}
	post(silent, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	get, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	get.Header.Set("Accept", "text/event-stream")
	get.Header.Set("Mcp-Session-Id", silent)
	get.Header.Set("Mcp-Protocol-Version", protocolLegacy)
	stream, err := http.DefaultClient.Do(get)
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("standalone stream: %v %v", stream, err)
	}
	defer stream.Body.Close()

	testwait.Until(t, ctx, "keepalive to close the silent client's session", func() (bool, error) {
		return post(silent, `{"jsonrpc":"2.0","id":2,"method":"ping"}`).StatusCode == http.StatusNotFound, nil
	})
	// The live sessions see keepalive at work: the one without a stream
	// has had its ping refused, and the one with a stream then answers
	// three more, time enough for a session closed over the refusal to be
	// gone.
	testwait.Until(t, ctx, "a keepalive ping to the session without a stream", func() (bool, error) {
		return pinged(withoutStream).refused > 0, nil
	})
	answered := pinged(withStream).answered
	testwait.Until(t, ctx, "three more keepalive pings answered on the session with a stream", func() (bool, error) {
		return pinged(withStream).answered >= answered+3, nil
	})
	for name, cs := range map[string]*mcp.ClientSession{"without a stream": withoutStream, "with a stream": withStream} {
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "plain", Arguments: map[string]any{}}); err != nil || res.IsError {
			t.Errorf("session %s after keepalive pings: %+v, %v; want it alive", name, res, err)
		}
	}
}
