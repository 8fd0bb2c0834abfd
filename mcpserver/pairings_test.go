package mcpserver_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/sim/fixtures"
)

// pairingServer is the upstream of the pairing tests: count sends
// progress, refuse answers a JSON-RPC error, fail a tool error, confirm
// asks the user (input_required, which the go-sdk turns into an
// elicitation for a 2025-11-25 session), confirm_long at length, block returns when cancelled
// and vanish only when the test ends, for its upstream to go away under
// it. started
// hears of every block and vanish call, cancelled of every block call
// cancelled.
func pairingServer(started, cancelled chan<- string, release <-chan struct{}) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "pairing"}, nil)
	addCountTool(s)
	s.AddTool(&mcp.Tool{Name: "refuse", Description: "Refuses its call.", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the suite name is unknown"}
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Fails as a tool."}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return nil, nil, errors.New("the build broke")
	})
	confirm := func(message string) mcp.ToolHandler {
		return func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if r, ok := req.Params.InputResponses["confirm"]; ok {
				er, _ := r.(*mcp.ElicitResult)
				if er == nil {
					return nil, fmt.Errorf("the answer is a %T", r)
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s:%v", er.Action, er.Content["sure"])}}}, nil
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{
				Message:         message,
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"sure": map[string]any{"type": "boolean"}}},
			}}}, nil
		}
	}
	s.AddTool(&mcp.Tool{Name: "confirm", Description: "Asks for confirmation.", InputSchema: map[string]any{"type": "object"}}, confirm("delete the branch?"))
	// A question longer than any one read of a relayed stream.
	s.AddTool(&mcp.Tool{Name: "confirm_long", Description: "Asks at length.", InputSchema: map[string]any{"type": "object"}},
		confirm(strings.Repeat("Consider what is on it. ", 2000)+"delete the branch?"))
	for _, name := range []string{"block", "vanish"} {
		s.AddTool(&mcp.Tool{Name: name, Description: "Waits.", InputSchema: map[string]any{"type": "object"}},
			func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				started <- name
				select {
				case <-ctx.Done():
					if name == "block" {
						cancelled <- name
					}
					return nil, ctx.Err()
				case <-release: // the test is over
					return nil, errors.New("never cancelled")
				}
			})
	}
	return s
}

// pairingUpstream is pairingServer over Streamable HTTP, in this process,
// or over stdio, in a child the gateway starts. It records each tools/call
// it receives: its tool, and whether it came on a fast path (the client's
// own bytes, or a relay's request IDs) or through the SDK path (the
// gateway's own numeric request IDs in its own sessions).
type pairingUpstream struct {
	// srv is the HTTP upstream; nil for stdio.
	srv                *httptest.Server
	started, cancelled chan string
	mu                 sync.Mutex
	calls              []pairingCall
	// record is the stdio child's record of what it did, a line each.
	record string
}

type pairingCall struct {
	tool string
	// fast: the call came on a fast path.
	fast bool
}

// relayedRequestID reports whether a request ID is one of a relay's.
func relayedRequestID(id json.RawMessage) bool {
	return strings.HasPrefix(string(id), `"taskgate-relay-`)
}

func startPairingUpstream(t *testing.T, stateless bool) *pairingUpstream {
	t.Helper()
	u := &pairingUpstream{started: make(chan string, 8), cancelled: make(chan string, 8)}
	release := make(chan struct{})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return pairingServer(u.started, u.cancelled, release) },
		&mcp.StreamableHTTPOptions{Stateless: stateless, PropagateRequestCancellation: true})
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					Name string `json:"name"`
					Meta struct {
						ClientInfo struct {
							Name string `json:"name"`
						} `json:"io.modelcontextprotocol/clientInfo"`
					} `json:"_meta"`
				} `json:"params"`
			}
			if json.Unmarshal(b, &msg) == nil && msg.Method == "tools/call" {
				// Forwarded bytes carry the client's own clientInfo; the
				// relay session's calls its request IDs.
				fast := relayedRequestID(msg.ID) || strings.HasPrefix(msg.Params.Meta.ClientInfo.Name, "pairing-client")
				u.mu.Lock()
				u.calls = append(u.calls, pairingCall{tool: msg.Params.Name, fast: fast})
				u.mu.Unlock()
			}
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(u.srv.Close)
	t.Cleanup(func() { close(release) }) // before Close: cleanups run last first
	return u
}

// stdioPairingEnv makes the test binary, started by a gateway as a stdio
// upstream, serve pairingServer instead of running tests, appending what
// it does to the file the variable names. vanish ends the child, as a
// provider process that dies mid-call.
const stdioPairingEnv = "TASKGATE_MCPSERVER_TEST_STDIO_PAIRING"

func init() {
	record := os.Getenv(stdioPairingEnv)
	if record == "" {
		return
	}
	f, err := os.OpenFile(record, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		os.Exit(1)
	}
	var mu sync.Mutex
	note := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = fmt.Fprintln(f, line)
	}
	started, cancelled := make(chan string), make(chan string)
	go func() {
		for {
			select {
			case name := <-started:
				note("started " + name)
				if name == "vanish" {
					os.Exit(3)
				}
			case name := <-cancelled:
				note("cancelled " + name)
			}
		}
	}()
	s := pairingServer(started, cancelled, make(chan struct{}))
	if err := s.Run(context.Background(), recordingTransport{Transport: &mcp.StdioTransport{}, note: note}); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// recordingTransport notes each tools/call it reads: "call TOOL fast" or
// "call TOOL sdk".
type recordingTransport struct {
	mcp.Transport
	note func(string)
}

func (t recordingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	return recordingConn{Connection: c, note: t.note}, err
}

type recordingConn struct {
	mcp.Connection
	note func(string)
}

func (c recordingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "tools/call" {
		var p struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(req.Params, &p)
		id, _ := json.Marshal(req.ID.Raw())
		path := "sdk"
		if relayedRequestID(id) {
			path = "fast"
		}
		c.note("call " + p.Name + " " + path)
	}
	return msg, err
}

// startStdioPairingUpstream has the gateway's child serve pairingServer.
func startStdioPairingUpstream(t *testing.T) *pairingUpstream {
	t.Helper()
	u := &pairingUpstream{record: filepath.Join(t.TempDir(), "record")}
	t.Setenv(stdioPairingEnv, u.record)
	return u
}

// lines returns the stdio child's record.
func (u *pairingUpstream) lines() []string {
	b, _ := os.ReadFile(u.record)
	return strings.Fields(strings.ReplaceAll(string(b), " ", "_"))
}

// seen returns the calls of tool the upstream received, and how many of
// them came on a fast path.
func (u *pairingUpstream) seen(tool string) (calls, fast int) {
	if u.srv == nil {
		for _, l := range u.lines() {
			if strings.HasPrefix(l, "call_"+tool+"_") {
				calls++
				if strings.HasSuffix(l, "_fast") {
					fast++
				}
			}
		}
		return calls, fast
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, c := range u.calls {
		if c.tool == tool {
			calls++
			if c.fast {
				fast++
			}
		}
	}
	return calls, fast
}

// await waits until the upstream has done what ("started", "cancelled")
// to tool, count times in all.
func (u *pairingUpstream) await(t *testing.T, what, tool string, count int) {
	t.Helper()
	if u.srv == nil {
		testwait.Until(t, testCtx(t), fmt.Sprintf("the upstream's %s %s", what, tool), func() (bool, error) {
			return slicesCount(u.lines(), what+"_"+tool) >= count, nil
		})
		return
	}
	ch := u.started
	if what == "cancelled" {
		ch = u.cancelled
	}
	awaitSignal(t, ch, fmt.Sprintf("the upstream's %s %s never came", what, tool))
}

func slicesCount(lines []string, line string) int {
	n := 0
	for _, l := range lines {
		if l == line {
			n++
		}
	}
	return n
}

// goAway takes the upstream away under the call it is serving: the HTTP
// server drops its connections; a stdio child has ended itself already.
func (u *pairingUpstream) goAway() {
	if u.srv != nil {
		u.srv.CloseClientConnections()
	}
}

// pairingClient connects a go-sdk client to the gateway at url: the
// default client (2026-07-28) unless version pins one, declaring
// elicitation (and answering yes) when elicit is set.
func pairingClient(t *testing.T, url, key, version string, elicit bool, progress *progressLog) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{ProgressNotificationHandler: progress.add}
	if elicit {
		opts.ElicitationHandler = func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if !strings.HasSuffix(req.Params.Message, "delete the branch?") {
				return nil, fmt.Errorf("asked %q", req.Params.Message)
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"sure": true}}, nil
		}
	}
	cs := dialGateway(t, url, key, "pairing-client", version, opts)
	// Listing the tools waits for the gateway's session with the upstream.
	if _, err := cs.ListTools(testCtx(t), nil); err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestPairingsFastPath runs every pairing of client era (the go-sdk
// default client, which speaks 2026-07-28, and a 2025-11-25 session),
// client declaring elicitation or not, and upstream (HTTP with sessions,
// stateless HTTP, stdio) through the gateway: results with their progress in order,
// the upstream's errors as they are, cancellation, a question the client
// answers, and an upstream that goes away mid-call, which the client hears
// as -32603 upstream_unavailable and which is not sent again. Every call
// must have reached the upstream on a fast path (the stdio child speaks
// 2026-07-28, as a go-sdk server does by default).
func TestPairingsFastPath(t *testing.T) {
	for _, upstreamKind := range []string{"sessions", "stateless", "stdio"} {
		for _, version := range []string{"", "2025-11-25"} {
			for _, elicit := range []bool{false, true} {
				name := fmt.Sprintf("%s upstream, client %s, elicitation %v", upstreamKind, cmp.Or(version, "default (2026-07-28)"), elicit)
				t.Run(name, func(t *testing.T) {
					if upstreamKind != "stdio" { // stdio's child reads its record from the environment
						t.Parallel()
					}
					runPairing(t, upstreamKind, version, elicit)
				})
			}
		}
	}
}

func runPairing(t *testing.T, kind, version string, elicit bool) {
	var up *pairingUpstream
	var upURL string
	opts := fixtures.ConfigOptions{UpstreamTimeout: time.Minute}
	if kind == "stdio" {
		up = startStdioPairingUpstream(t)
		opts.Command = []string{os.Args[0]}
	} else {
		up = startPairingUpstream(t, kind == "stateless")
		upURL = up.srv.URL + "/mcp"
	}
	url, keys := plumbingGatewayKeys(t, testCtx(t), upURL, "  - name: pairing", opts, "acme")
	var progress progressLog
	cs := pairingClient(t, url, keys[0], version, elicit, &progress)
	ctx := testCtx(t)

	t.Run("result and progress", func(t *testing.T) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "pairing.count", Arguments: map[string]any{"n": 4}, Meta: mcp.Meta{"progressToken": "p"}})
		if err != nil || fixtures.ResultText(res) != "counted" {
			t.Fatalf("count = %+v, %v", res, err)
		}
		if got := progress.await(t, 4); !slices.Equal(got, []float64{1, 2, 3, 4}) {
			t.Errorf("progress %v; want 1, 2, 3, 4 in order", got)
		}
	})
	t.Run("errors", func(t *testing.T) {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "pairing.refuse", Arguments: map[string]any{}})
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams || werr.Message != "the suite name is unknown" {
			t.Errorf("refuse answered %v; want the upstream's -32602 as it is", err)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "pairing.fail", Arguments: map[string]any{}})
		if err != nil || !res.IsError || !strings.Contains(fixtures.ResultText(res), "the build broke") {
			t.Errorf("fail = %+v, %v; want the tool's error result", res, err)
		}
	})
	t.Run("cancellation", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "pairing.block", Arguments: map[string]any{}})
			done <- err
		}()
		up.await(t, "started", "block", 1)
		cancel()
		up.await(t, "cancelled", "block", 1)
		awaitSignal(t, done, "the cancelled call did not return")
	})
	t.Run("question answered", func(t *testing.T) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "pairing.confirm", Arguments: map[string]any{}})
		want := "accept:true"
		if !elicit {
			// A client that cannot answer: the upstream's question is
			// refused, as the SDK path refuses it.
			if err == nil && fixtures.ResultText(res) == want {
				t.Fatalf("confirm = %+v; a client that declared no elicitation was asked", res)
			}
			return
		}
		if err != nil || fixtures.ResultText(res) != want {
			t.Fatalf("confirm = %+v, %v; want %s", res, err, want)
		}
	})
	t.Run("upstream goes away", func(t *testing.T) {
		done := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "pairing.vanish", Arguments: map[string]any{}})
			done <- err
		}()
		up.await(t, "started", "vanish", 1)
		up.goAway()
		var err error
		select {
		case err = <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("the call whose upstream went away did not return")
		}
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInternalError || !strings.Contains(string(werr.Data), ledger.ReasonUpstreamUnavailable) {
			t.Errorf("vanish answered %v; want -32603 %s", err, ledger.ReasonUpstreamUnavailable)
		}
		if n, _ := up.seen("vanish"); n != 1 {
			t.Errorf("the upstream received vanish %d times; want once, never re-sent", n)
		}
	})
	for _, tool := range []string{"count", "refuse", "fail", "confirm", "block", "vanish"} {
		calls, fast := up.seen(tool)
		if calls == 0 || fast != calls {
			t.Errorf("%d of %d %s calls reached the upstream on a fast path; want all", fast, calls, tool)
		}
	}
}

// TestBridgedQuestionBelongsToItsCaller: the requestState an
// input_required result bridged from a 2025-11-25 upstream's question
// names is the caller's alone: another tenant naming it starts a call of
// its own, and the caller, answering, gets its own call's result.
func TestBridgedQuestionBelongsToItsCaller(t *testing.T) {
	up := startPairingUpstream(t, false)
	url, keys := plumbingGatewayKeys(t, testCtx(t), up.srv.URL+"/mcp", "  - name: pairing", fixtures.ConfigOptions{UpstreamTimeout: time.Minute}, "acme", "globex")
	asks := map[string]any{mcp.MetaKeyClientCapabilities: map[string]any{"elicitation": map[string]any{}}}
	_, msg := postRaw(t, url, keys[0], "", "2026-07-28", "pairing.confirm", map[string]any{"arguments": map[string]any{}, "_meta": asks})
	res, _ := msg["result"].(map[string]any)
	state, _ := res["requestState"].(string)
	requests, _ := res["inputRequests"].(map[string]any)
	if res["resultType"] != "input_required" || state == "" || len(requests) != 1 {
		t.Fatalf("confirm answered %v; want input_required with one request and a requestState", msg)
	}
	var key string
	for k := range requests {
		key = k
	}
	answer := map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"sure": true}}}
	retry := func(k string) map[string]any {
		_, msg := postRaw(t, url, k, "", "2026-07-28", "pairing.confirm", map[string]any{
			"arguments": map[string]any{}, "_meta": map[string]any{mcp.MetaKeyClientCapabilities: map[string]any{"elicitation": map[string]any{}}},
			"requestState": state, "inputResponses": answer,
		})
		return msg
	}
	// globex's call is its own: the upstream asks it afresh.
	other, _ := retry(keys[1])["result"].(map[string]any)
	if other["resultType"] != "input_required" || other["requestState"] == state {
		t.Fatalf("globex naming acme's requestState got %v; want a question of its own", other)
	}
	mine, _ := retry(keys[0])["result"].(map[string]any)
	content, _ := mine["content"].([]any)
	if len(content) != 1 || content[0].(map[string]any)["text"] != "accept:true" {
		t.Fatalf("acme's answer got %v; want its call's result accept:true", mine)
	}
	if calls, _ := up.seen("confirm"); calls != 2 {
		t.Errorf("the upstream received %d confirm calls; want acme's, answered in place, and globex's", calls)
	}
}

// TestLongQuestionIsBridgedWhole: an upstream's question longer than a
// relayed stream's reads reaches a 2026-07-28 client whole, and the
// answer goes back into the waiting call.
func TestLongQuestionIsBridgedWhole(t *testing.T) {
	up := startPairingUpstream(t, false)
	url, keys := plumbingGatewayKeys(t, testCtx(t), up.srv.URL+"/mcp", "  - name: pairing", fixtures.ConfigOptions{UpstreamTimeout: time.Minute}, "acme")
	var progress progressLog
	cs := pairingClient(t, url, keys[0], "", true, &progress)
	res, err := cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: "pairing.confirm_long", Arguments: map[string]any{}})
	if err != nil || fixtures.ResultText(res) != "accept:true" {
		t.Fatalf("confirm_long = %+v, %v; want accept:true", res, err)
	}
	if calls, fast := up.seen("confirm_long"); calls != 1 || fast != 1 {
		t.Errorf("the upstream received %d confirm_long calls (%d relayed); want the one, relayed and answered in place", calls, fast)
	}
}
