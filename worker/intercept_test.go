package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// rpcRequest is the part of a JSON-RPC request the interceptors read.
type rpcRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name   string `json:"name"`
		TaskID string `json:"taskId"`
	} `json:"params"`
}

// readRPC reads a POST's JSON-RPC request and puts the body back for the
// next handler; ok is false for anything else.
func readRPC(r *http.Request) (req rpcRequest, body []byte, ok bool) {
	if r.Method != http.MethodPost {
		return req, nil, false
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return req, nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return req, body, json.Unmarshal(body, &req) == nil
}

// answerRPCError answers a JSON-RPC request with an error, as a server
// does over Streamable HTTP.
func answerRPCError(w http.ResponseWriter, id json.RawMessage, code int64, msg string) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
}

// serve runs h over HTTP on loopback for the test; it returns the MCP URL.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.URL + "/mcp"
}

// callGate holds every tools/call of one tool before it reaches the
// provider, until the test opens the gate: the gateway has sent, and
// neither it nor the provider knows more yet.
type callGate struct {
	next    http.Handler
	tool    string
	arrived chan struct{}
	open    chan struct{}
	once    sync.Once
	opened  sync.Once
}

func newCallGate(next http.Handler, tool string) *callGate {
	return &callGate{next: next, tool: tool, arrived: make(chan struct{}), open: make(chan struct{})}
}

func (g *callGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if req, _, ok := readRPC(r); ok && req.Method == "tools/call" && req.Params.Name == g.tool {
		g.once.Do(func() { close(g.arrived) })
		select {
		case <-g.open:
		case <-r.Context().Done():
			return
		}
	}
	g.next.ServeHTTP(w, r)
}

// await waits until a call reached the gate.
func (g *callGate) await(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-g.arrived:
	case <-ctx.Done():
		t.Fatalf("no %s call reached the provider", g.tool)
	}
}

// release lets held and later calls through.
func (g *callGate) release() { g.opened.Do(func() { close(g.open) }) }

// legacyOnly makes a server that speaks both protocol eras look like one
// that predates 2026-07-28: it does not know server/discover, so clients
// fall back to initialize and negotiate 2025-11-25.
func legacyOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if req, _, ok := readRPC(r); ok && req.Method == "server/discover" {
			answerRPCError(w, req.ID, -32601, "Method not found")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// forgetTasks makes the upstream answer every tasks/get as a server does
// for a task it no longer knows (expired, or lost in a restart).
func forgetTasks(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if req, _, ok := readRPC(r); ok && req.Method == "tasks/get" {
			answerRPCError(w, req.ID, -32602, "Failed to retrieve task: Task not found")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// failCalls answers the first n tools/call requests of tool with an
// internal error, as a provider does during an outage.
type failCalls struct {
	next http.Handler
	tool string
	mu   sync.Mutex
	left int
}

func (f *failCalls) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if req, _, ok := readRPC(r); ok && req.Method == "tools/call" && req.Params.Name == f.tool {
		f.mu.Lock()
		fail := f.left > 0
		f.left--
		f.mu.Unlock()
		if fail {
			answerRPCError(w, req.ID, -32603, "the provider's job service is unavailable")
			return
		}
	}
	f.next.ServeHTTP(w, r)
}

// cutBlock removes the YAML block that starts at the line `from` up to (not
// including) the line `to`.
func cutBlock(t *testing.T, y, from, to string) string {
	t.Helper()
	start := strings.Index(y, from)
	end := strings.Index(y, to)
	if start < 0 || end < start {
		t.Fatalf("configuration has no block %q before %q", from, to)
	}
	return y[:start] + y[end:]
}

// withoutLookup removes the provider contract's lookup; without one, the
// tool's retry policy is no_automatic_resend.
func withoutLookup(t *testing.T, y string) string {
	y = cutBlock(t, y, "          lookup:\n", "          fetch:\n")
	return replaceOnce(t, y, "retry_policy: lookup_then_attach", "retry_policy: no_automatic_resend")
}

// withoutFetch removes the provider contract's fetch.
func withoutFetch(t *testing.T, y string) string {
	return cutBlock(t, y, "          fetch:\n", "          charges:\n")
}

func replaceOnce(t *testing.T, y, old, new string) string {
	t.Helper()
	i := strings.Index(y, old)
	if i < 0 {
		t.Fatalf("configuration has no %q", old)
	}
	return y[:i] + new + y[i+len(old):]
}

// declareTasks makes every tools/call of tool declare the 2026-07-28 tasks
// extension, whatever the client sent: the server may then answer a plain
// call with a task, which the client never asked for.
func declareTasks(next http.Handler, tool string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if req, body, ok := readRPC(r); ok && req.Method == "tools/call" && req.Params.Name == tool {
			var msg map[string]any
			if json.Unmarshal(body, &msg) == nil {
				params, _ := msg["params"].(map[string]any)
				meta, _ := params["_meta"].(map[string]any)
				if meta == nil {
					meta = map[string]any{}
					params["_meta"] = meta
				}
				caps, _ := meta["io.modelcontextprotocol/clientCapabilities"].(map[string]any)
				if caps == nil {
					caps = map[string]any{}
					meta["io.modelcontextprotocol/clientCapabilities"] = caps
				}
				exts, _ := caps["extensions"].(map[string]any)
				if exts == nil {
					exts = map[string]any{}
					caps["extensions"] = exts
				}
				exts["io.modelcontextprotocol/tasks"] = map[string]any{}
				if b, err := json.Marshal(msg); err == nil {
					r.Body = io.NopCloser(bytes.NewReader(b))
					r.ContentLength = int64(len(b))
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}
