package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/sim/fixtures"
)

// legacySession opens a 2025-11-25 session to the gateway at url as the
// client name, declaring elicitation when elicit is set.
func legacySession(t *testing.T, url, key, name string, elicit bool, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	if opts == nil {
		opts = &mcp.ClientOptions{}
	}
	if elicit {
		opts.ElicitationHandler = func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		}
	}
	cs := dialGateway(t, url, key, name, "2025-11-25", opts)
	if _, err := cs.ListTools(testCtx(t), nil); err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestLegacyPassThroughIsRelayed: a 2025-11-25 session's pass-through call
// reaches a 2026-07-28 upstream as the client's own request, with the
// session's client information, its _meta less taskgate's keys, and its
// progress; the result is the upstream's.
func TestLegacyPassThroughIsRelayed(t *testing.T) {
	rec, up := forwardingUpstream(t, 0)
	url, keys := plumbingGatewayKeys(t, testCtx(t), up.URL, "  - name: plumbing", fixtures.ConfigOptions{}, "acme")
	var progress progressLog
	cs := legacySession(t, url, keys[0], "legacy-client", false, &mcp.ClientOptions{ProgressNotificationHandler: progress.add})

	res, err := cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: "plumbing.meta", Arguments: map[string]any{},
		Meta: mcp.Meta{"trace": "t-1", "dev.taskgate/operationId": "op-1"}})
	if err != nil || res.IsError {
		t.Fatalf("meta = %+v, %v", res, err)
	}
	echoed := fixtures.ResultText(res)
	if !strings.Contains(echoed, `"trace":"t-1"`) || strings.Contains(echoed, "dev.taskgate") {
		t.Errorf("the upstream saw _meta %s; want trace and no dev.taskgate keys", echoed)
	}
	seen := rec.seen()
	if len(seen) != 1 || seen[0].clientName() != "legacy-client" {
		t.Fatalf("upstream saw %d calls (client %q); want the one call, relayed as the client's", len(seen), seen[len(seen)-1].clientName())
	}
	if v := seen[0].header.Get("Mcp-Protocol-Version"); v != "2026-07-28" {
		t.Errorf("the relayed call carried Mcp-Protocol-Version %q; want 2026-07-28", v)
	}

	res, err = cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: "plumbing.count", Arguments: map[string]any{"n": 3},
		Meta: mcp.Meta{"progressToken": "p-1"}})
	if err != nil || fixtures.ResultText(res) != "counted" {
		t.Fatalf("count = %+v, %v", res, err)
	}
	if got := progress.await(t, 3); len(got) != 3 || got[2] != 3 {
		t.Errorf("progress received %v; want 1, 2, 3", got)
	}
	if n := len(rec.seen()); n != 2 {
		t.Errorf("upstream saw %d calls; want 2", n)
	}
}

// TestAskingClientIsForwardedWithItsCapabilities: a client that can be
// asked questions (elicitation or sampling), calling a stateless upstream,
// has its call forwarded as its own, declaring what it declared, so that
// the upstream may ask it (with input_required, which the gateway bridges).
func TestAskingClientIsForwardedWithItsCapabilities(t *testing.T) {
	sampling := &mcp.ClientOptions{CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		return nil, fmt.Errorf("not asked")
	}}
	for _, tt := range []struct {
		name     string
		elicit   bool
		opts     *mcp.ClientOptions
		declared string
	}{{"elicitation", true, nil, "elicitation"}, {"sampling", false, sampling, "sampling"}} {
		t.Run(tt.name, func(t *testing.T) {
			rec, up := forwardingUpstream(t, 0)
			url, keys := plumbingGatewayKeys(t, testCtx(t), up.URL, "  - name: plumbing", fixtures.ConfigOptions{}, "acme")
			cs := legacySession(t, url, keys[0], "asking-client", tt.elicit, tt.opts)
			if res, err := cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: "plumbing.meta", Arguments: map[string]any{}}); err != nil || res.IsError {
				t.Fatalf("meta = %+v, %v", res, err)
			}
			seen := rec.seen()
			if len(seen) != 1 || seen[0].clientName() != "asking-client" {
				t.Fatalf("upstream saw %d calls (client %q); want the one call, forwarded as the client's", len(seen), seen[len(seen)-1].clientName())
			}
			params, _ := seen[0].body["params"].(map[string]any)
			meta, _ := params["_meta"].(map[string]any)
			caps, _ := meta[mcp.MetaKeyClientCapabilities].(map[string]any)
			if caps[tt.declared] == nil {
				t.Errorf("the forwarded call declared %v; want %s", caps, tt.declared)
			}
		})
	}
}

// postSession sends one JSON-RPC message in session sid as key and
// returns the response status and body.
func postSession(ctx context.Context, t *testing.T, url, key, sid string, msg map[string]any) (int, string) {
	t.Helper()
	body, _ := json.Marshal(msg)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"Authorization": "Bearer " + key, "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2025-11-25", "Mcp-Session-Id": sid,
	} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, ""
		}
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestLegacyRelayKeepsSessionGuards: a session ID sent by another tenant,
// or one the gateway never issued, gets the SDK handler's answer (403,
// 404), as does a request with a null ID, and nothing reaches the upstream.
func TestLegacyRelayKeepsSessionGuards(t *testing.T) {
	rec, up := forwardingUpstream(t, 0)
	url, keys := plumbingGatewayKeys(t, testCtx(t), up.URL, "  - name: plumbing", fixtures.ConfigOptions{}, "acme", "globex")
	cs := legacySession(t, url, keys[0], "legacy-client", false, nil)
	call := map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": map[string]any{"name": "plumbing.meta", "arguments": map[string]any{}}}

	if status, body := postSession(testCtx(t), t, url, keys[1], cs.ID(), call); status != http.StatusForbidden {
		t.Errorf("another tenant's call in the session = %d %s; want 403", status, body)
	}
	if status, body := postSession(testCtx(t), t, url, keys[0], "no-such-session", call); status != http.StatusNotFound {
		t.Errorf("a call in an unknown session = %d %s; want 404", status, body)
	}
	// A request ID the SDK would refuse is left to it.
	nullID := map[string]any{"jsonrpc": "2.0", "id": nil, "method": "tools/call", "params": map[string]any{"name": "plumbing.meta", "arguments": map[string]any{}}}
	postSession(testCtx(t), t, url, keys[0], cs.ID(), nullID)
	if n := len(rec.seen()); n != 0 {
		t.Errorf("upstream saw %d calls; want none", n)
	}
	// The control: the owner's own call in the session is relayed.
	if status, body := postSession(testCtx(t), t, url, keys[0], cs.ID(), call); status != http.StatusOK || !strings.Contains(body, `"result"`) {
		t.Fatalf("the owner's call = %d %s; want a result", status, body)
	}
	if seen := rec.seen(); len(seen) != 1 || seen[0].clientName() != "legacy-client" {
		t.Errorf("upstream saw %d calls; want the owner's, relayed", len(seen))
	}
}

// TestLegacyRelayedCallIsCancelled: the client's notifications/cancelled
// for a relayed call ends the upstream's work, as it ends a handler on the
// SDK path.
func TestLegacyRelayedCallIsCancelled(t *testing.T) {
	rec, up := forwardingUpstream(t, 0)
	// The upstream's timeout outlasts the test: only the cancellation can
	// end the call.
	url, keys := plumbingGatewayKeys(t, testCtx(t), up.URL, "  - name: plumbing", fixtures.ConfigOptions{UpstreamTimeout: 5 * time.Minute}, "acme")
	cs := legacySession(t, url, keys[0], "legacy-client", false, nil)

	done := make(chan string, 1)
	go func() {
		_, body := postSession(testCtx(t), t, url, keys[0], cs.ID(), map[string]any{"jsonrpc": "2.0", "id": "call-9", "method": "tools/call",
			"params": map[string]any{"name": "plumbing.block", "arguments": map[string]any{}}})
		done <- body
	}()
	awaitSignal(t, rec.started, "the block call never started upstream")
	if seen := rec.seen(); seen[0].clientName() != "legacy-client" {
		t.Fatalf("the block call was made by %q; want it relayed", seen[0].clientName())
	}
	postSession(testCtx(t), t, url, keys[0], cs.ID(), map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled",
		"params": map[string]any{"requestId": "call-9", "reason": "changed my mind"}})
	awaitSignal(t, rec.cancelled, "the upstream's block call was not cancelled")
	awaitSignal(t, done, "the cancelled call's request did not end")
}

// sessionUpstream serves the plumbing server, block, hop and stray over
// go-sdk's session handler (2025-11-25 sessions only), recording the
// tools/call bodies it receives and the relay sessions opened. expireNext,
// once set, answers the next request in a session with 404, as an upstream
// that forgot the session does.
type sessionUpstream struct {
	mu         sync.Mutex
	calls      []map[string]any
	relayInits int
	expireNext bool
	// relaySession is the session ID of the relayed calls; pings counts
	// the keepalive pings each session's client answered.
	relaySession string
	pings        map[string]int
	*blocker
}

// relayPings is how many keepalive pings the relay session answered.
func (u *sessionUpstream) relayPings() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.pings[u.relaySession]
}

// countPings is sending middleware that counts each session's answered
// keepalive pings.
func (u *sessionUpstream) countPings(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil && method == "ping" && err == nil {
			u.mu.Lock()
			u.pings[ss.ID()]++
			u.mu.Unlock()
		}
		return res, err
	}
}

func (u *sessionUpstream) seen() []map[string]any {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.calls)
}

func (u *sessionUpstream) relaySessions() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.relayInits
}

// sessionUpstreamOptions shape the upstream's session handler.
type sessionUpstreamOptions struct {
	keepAlive    time.Duration // pings each session's client this often
	eventStore   bool          // streams can be resumed (hop needs it)
	jsonResponse bool          // requests are answered with one JSON body
}

func startSessionUpstream(t *testing.T, o sessionUpstreamOptions) (*sessionUpstream, string) {
	t.Helper()
	u := &sessionUpstream{blocker: newBlocker(), pings: map[string]int{}}
	opts := &mcp.StreamableHTTPOptions{JSONResponse: o.jsonResponse}
	if o.eventStore {
		opts.EventStore = mcp.NewMemoryEventStore(nil)
	}
	server := func() *mcp.Server {
		s := plumbingServer()
		if o.keepAlive > 0 {
			s = mcp.NewServer(&mcp.Implementation{Name: "plumbing"}, &mcp.ServerOptions{KeepAlive: o.keepAlive, KeepAliveFailureThreshold: 2})
			mcp.AddTool(s, &mcp.Tool{Name: "meta", Description: "Echoes _meta."}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
				b, _ := json.Marshal(req.Params.Meta)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
			})
			s.AddSendingMiddleware(u.countPings)
		}
		u.addTo(s)
		s.AddTool(&mcp.Tool{Name: "hop", Description: "Closes its stream between two progress notifications.", InputSchema: map[string]any{"type": "object"}},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				tok := req.Params.GetProgressToken()
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2})
				if req.Extra != nil && req.Extra.CloseSSEStream != nil {
					req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{})
				}
				// A provider still at work after it closed the stream:
				// the rest reaches the client only if the gateway resumes.
				time.Sleep(100 * time.Millisecond)
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 2, Total: 2})
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hopped"}}}, nil
			})
		s.AddTool(&mcp.Tool{Name: "stray", Description: "Sends progress for another token.", InputSchema: map[string]any{"type": "object"}},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: "someone-else", Progress: 99})
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "strayed"}}}, nil
			})
		return s
	}
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server() }, opts)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			var msg map[string]any
			_ = json.Unmarshal(b, &msg)
			u.mu.Lock()
			expire := u.expireNext && r.Header.Get("Mcp-Session-Id") != ""
			if expire {
				u.expireNext = false
			}
			if msg["method"] == "tools/call" && !expire {
				u.calls = append(u.calls, msg)
				if relayedID(msg) {
					u.relaySession = r.Header.Get("Mcp-Session-Id")
				}
			}
			if msg["method"] == "initialize" && msg["id"] == "taskgate-relay-init" {
				u.relayInits++
			}
			u.mu.Unlock()
			if expire {
				http.Error(w, "session not found", http.StatusNotFound)
				return
			}
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return u, srv.URL
}

// relayedID reports whether an upstream tools/call came in the gateway's
// relay session, under its own request ID.
func relayedID(call map[string]any) bool {
	id, _ := call["id"].(string)
	return strings.HasPrefix(id, "taskgate-relay-")
}

// TestLegacyCallsShareTheRelaySession: pass-through calls of 2025-11-25
// sessions reach a session-holding upstream in the gateway's relay
// session, under the gateway's request IDs and progress tokens, so that
// two clients using the same ID and token at once each get their own
// answer and progress back under their own.
func TestLegacyCallsShareTheRelaySession(t *testing.T) {
	up, upURL := startSessionUpstream(t, sessionUpstreamOptions{})
	url, keys := plumbingGatewayKeys(t, testCtx(t), upURL, "  - name: plumbing", fixtures.ConfigOptions{}, "acme", "globex")
	var progress [2]progressLog
	sessions := []*mcp.ClientSession{
		legacySession(t, url, keys[0], "client-a", false, &mcp.ClientOptions{ProgressNotificationHandler: progress[0].add}),
		legacySession(t, url, keys[1], "client-b", false, &mcp.ClientOptions{ProgressNotificationHandler: progress[1].add}),
	}
	var wg sync.WaitGroup
	for i, cs := range sessions {
		wg.Go(func() {
			res, err := cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: "plumbing.count", Arguments: map[string]any{"n": 2 + i},
				Meta: mcp.Meta{"progressToken": "same-token"}})
			if err != nil || fixtures.ResultText(res) != "counted" {
				t.Errorf("client %d: count = %+v, %v", i, res, err)
			}
		})
	}
	wg.Wait()
	for i := range sessions {
		if got := progress[i].await(t, 2+i); len(got) != 2+i {
			t.Errorf("client %d received progress %v; want %d notifications, its own", i, got, 2+i)
		}
	}
	calls := up.seen()
	if len(calls) != 2 || !relayedID(calls[0]) || !relayedID(calls[1]) || calls[0]["id"] == calls[1]["id"] {
		t.Fatalf("upstream saw %v; want two calls under distinct relay IDs", calls)
	}
	for _, c := range calls {
		params, _ := c["params"].(map[string]any)
		meta, _ := params["_meta"].(map[string]any)
		if meta["progressToken"] == "same-token" {
			t.Errorf("upstream saw the client's progress token %v; want the gateway's own", meta["progressToken"])
		}
	}

	// An upstream that forgot the relay session gets a new one; the call
	// is not lost.
	up.mu.Lock()
	up.expireNext = true
	up.mu.Unlock()
	res, err := sessions[0].CallTool(testCtx(t), &mcp.CallToolParams{Name: "plumbing.meta", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("meta after the upstream forgot the relay session = %+v, %v", res, err)
	}
	if calls := up.seen(); len(calls) != 3 || !relayedID(calls[2]) {
		t.Errorf("upstream saw %d calls; want the third relayed in a new session", len(calls))
	}
}

// TestLegacyCallInRelaySessionIsCancelled: the client's
// notifications/cancelled reaches the upstream under the relay session's
// request ID and ends the call there.
func TestLegacyCallInRelaySessionIsCancelled(t *testing.T) {
	up, upURL := startSessionUpstream(t, sessionUpstreamOptions{})
	url, keys := plumbingGatewayKeys(t, testCtx(t), upURL, "  - name: plumbing", fixtures.ConfigOptions{UpstreamTimeout: 5 * time.Minute}, "acme")
	cs := legacySession(t, url, keys[0], "legacy-client", false, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		postSession(testCtx(t), t, url, keys[0], cs.ID(), map[string]any{"jsonrpc": "2.0", "id": 41, "method": "tools/call",
			"params": map[string]any{"name": "plumbing.block", "arguments": map[string]any{}}})
	}()
	awaitSignal(t, up.started, "the block call never started upstream")
	if !relayedID(up.seen()[0]) {
		t.Fatalf("the block call reached the upstream as %v; want it relayed", up.seen()[0])
	}
	postSession(testCtx(t), t, url, keys[0], cs.ID(), map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled",
		"params": map[string]any{"requestId": 41}})
	awaitSignal(t, up.cancelled, "the upstream's block call was not cancelled")
	awaitSignal(t, done, "the cancelled call's request did not end")
}

// TestRelaySessionAnswersPings: the relay session holds its standalone
// stream open and answers the upstream's pings there, so an upstream that
// closes sessions whose client stops answering keeps it.
func TestRelaySessionAnswersPings(t *testing.T) {
	// Two pings unanswered in a row close a session; after each call the
	// relay session answers four. The interval leaves a loaded machine
	// time to answer each ping before the next is due.
	up, upURL := startSessionUpstream(t, sessionUpstreamOptions{keepAlive: time.Second})
	url, keys := plumbingGatewayKeys(t, testCtx(t), upURL, "  - name: plumbing", fixtures.ConfigOptions{}, "acme")
	cs := legacySession(t, url, keys[0], "legacy-client", false, nil)
	for i := range 2 {
		if res, err := cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: "plumbing.meta", Arguments: map[string]any{}}); err != nil || res.IsError {
			t.Fatalf("call %d: meta = %+v, %v", i, res, err)
		}
		answered := up.relayPings()
		testwait.Until(t, testCtx(t), fmt.Sprintf("the relay session to answer four pings after call %d", i), func() (bool, error) {
			return up.relayPings() >= answered+4, nil
		})
	}
	if calls := up.seen(); len(calls) != 2 || !relayedID(calls[0]) || !relayedID(calls[1]) {
		t.Fatalf("upstream saw %v; want two relayed calls", calls)
	}
	if n := up.relaySessions(); n != 1 {
		t.Errorf("the gateway opened %d relay sessions; want one that lived through the pings", n)
	}
}

// TestRelayResumesAClosedStream: when the upstream closes a relayed call's
// stream before the answer (SEP-1699), the gateway resumes it from its last
// event, and the client gets all its progress and the answer.
func TestRelayResumesAClosedStream(t *testing.T) {
	up, upURL := startSessionUpstream(t, sessionUpstreamOptions{eventStore: true})
	url, keys := plumbingGatewayKeys(t, testCtx(t), upURL, "  - name: plumbing", fixtures.ConfigOptions{}, "acme")
	var progress progressLog
	cs := legacySession(t, url, keys[0], "legacy-client", false, &mcp.ClientOptions{ProgressNotificationHandler: progress.add})
	res, err := cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: "plumbing.hop", Arguments: map[string]any{}, Meta: mcp.Meta{"progressToken": "p"}})
	if err != nil || fixtures.ResultText(res) != "hopped" {
		t.Fatalf("hop = %+v, %v", res, err)
	}
	if got := progress.await(t, 2); len(got) != 2 {
		t.Errorf("progress received %v; want 1 and 2", got)
	}
	if calls := up.seen(); len(calls) != 1 || !relayedID(calls[0]) {
		t.Errorf("upstream saw %v; want the one call, relayed", calls)
	}
}

// TestRelayPassesOnlyTheCallsOwnMessages: the relay session is shared, so
// a message on a call's stream that is not its answer or its own progress
// never reaches its client.
func TestRelayPassesOnlyTheCallsOwnMessages(t *testing.T) {
	up, upURL := startSessionUpstream(t, sessionUpstreamOptions{})
	url, keys := plumbingGatewayKeys(t, testCtx(t), upURL, "  - name: plumbing", fixtures.ConfigOptions{}, "acme")
	var progress progressLog
	cs := legacySession(t, url, keys[0], "legacy-client", false, &mcp.ClientOptions{ProgressNotificationHandler: progress.add})
	res, err := cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: "plumbing.stray", Arguments: map[string]any{}, Meta: mcp.Meta{"progressToken": "mine"}})
	if err != nil || fixtures.ResultText(res) != "strayed" {
		t.Fatalf("stray = %+v, %v", res, err)
	}
	if calls := up.seen(); len(calls) != 1 || !relayedID(calls[0]) {
		t.Fatalf("upstream saw %v; want the one call, relayed", calls)
	}
	// Proving that nothing arrives takes a bound: had the stray
	// notification been passed on, 100ms is ample for it to reach the
	// client after the answer it preceded.
	time.Sleep(100 * time.Millisecond)
	if got := progress.await(t, 0); len(got) != 0 {
		t.Errorf("the client received progress %v meant for another token", got)
	}
}

// TestJSONAnsweringUpstreamKeepsProgress: an upstream that answers with
// one JSON body sends progress on its session's own stream, where a relayed
// call's client cannot be reached; a call that asks for progress takes the
// SDK path, whose session with the upstream holds that stream, and one
// that does not is relayed.
func TestJSONAnsweringUpstreamKeepsProgress(t *testing.T) {
	up, upURL := startSessionUpstream(t, sessionUpstreamOptions{jsonResponse: true})
	url, keys := plumbingGatewayKeys(t, testCtx(t), upURL, "  - name: plumbing", fixtures.ConfigOptions{}, "acme")
	cs := legacySession(t, url, keys[0], "legacy-client", false, nil)
	if res, err := cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: "plumbing.meta", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Fatalf("meta = %+v, %v", res, err)
	}
	res, err := cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: "plumbing.count", Arguments: map[string]any{"n": 2}, Meta: mcp.Meta{"progressToken": "p"}})
	if err != nil || fixtures.ResultText(res) != "counted" {
		t.Fatalf("count = %+v, %v", res, err)
	}
	calls := up.seen()
	if len(calls) != 2 || !relayedID(calls[0]) || relayedID(calls[1]) {
		t.Errorf("upstream saw %v; want meta relayed and count through the SDK", calls)
	}
}

// TestQuestionsAreRelayedToTheirClient: a 2025-11-25 client that can be
// asked has its pass-through calls relayed too, in a relay session that
// declares what it declared; the upstream's elicitation on a call's stream
// reaches that call's client under the gateway's request ID, and the
// client's answer goes back to the upstream under the upstream's. Two
// clients asked at once each answer their own question.
func TestQuestionsAreRelayedToTheirClient(t *testing.T) {
	up, upURL := startSessionUpstream(t, sessionUpstreamOptions{})
	url, keys := plumbingGatewayKeys(t, testCtx(t), upURL, "  - name: plumbing", fixtures.ConfigOptions{}, "acme", "globex")
	colours := []string{"blue", "green"}
	var asked [2]atomic.Int32
	sessions := make([]*mcp.ClientSession, 2)
	for i := range sessions {
		opts := &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if req.Params.Message != "favourite colour?" {
				return nil, fmt.Errorf("asked %q", req.Params.Message)
			}
			asked[i].Add(1)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": colours[i]}}, nil
		}}
		client := mcp.NewClient(&mcp.Implementation{Name: fmt.Sprintf("asked-%d", i), Version: "1"}, opts)
		cs, err := client.Connect(testCtx(t), &mcp.StreamableClientTransport{
			Endpoint: url, MaxRetries: -1, HTTPClient: &http.Client{Transport: fixtures.Bearer{Key: keys[i]}},
		}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		sessions[i] = cs
	}
	var wg sync.WaitGroup
	for i, cs := range sessions {
		wg.Go(func() {
			res, err := cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: "plumbing.ask", Arguments: map[string]any{}})
			if want := "accept:" + colours[i]; err != nil || fixtures.ResultText(res) != want {
				t.Errorf("client %d: ask = %+v, %v; want %s", i, res, err, want)
			}
		})
	}
	wg.Wait()
	calls := up.seen()
	if len(calls) != 2 || !relayedID(calls[0]) || !relayedID(calls[1]) {
		t.Fatalf("upstream saw %v; want both calls relayed", calls)
	}
	for i := range asked {
		if n := asked[i].Load(); n != 1 {
			t.Errorf("client %d was asked %d times; want once", i, n)
		}
	}
}
