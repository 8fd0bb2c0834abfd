package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/sim/fixtures"
)

// askingServer is an upstream whose tools log and ask their client:
// chatty interleaves n progress notifications with log messages at
// debug, info and warning; sample asks for a completion and the roots;
// ask_enum elicits with the enum schemas of SEP-1330.
func askingServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "asking"}, nil)
	type chattyArgs struct {
		N int `json:"n"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "chatty", Description: "Progress and log messages."}, func(ctx context.Context, req *mcp.CallToolRequest, a chattyArgs) (*mcp.CallToolResult, any, error) {
		tok := req.Params.GetProgressToken()
		for i := 1; i <= a.N; i++ {
			if tok != nil {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i)}); err != nil {
					return nil, nil, err
				}
			}
			if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: chattyLevel(i), Data: fmt.Sprintf("message %d", i)}); err != nil {
				return nil, nil, err
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "chatted"}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "sample", Description: "Asks for a completion and the roots."}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		var out []string
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "2+2?"}}}, MaxTokens: 10,
		})
		if err != nil {
			out = append(out, "sampling failed: "+err.Error())
		} else if tc, ok := res.Content.(*mcp.TextContent); ok {
			out = append(out, "model "+res.Model+" said "+tc.Text)
		}
		roots, err := req.Session.ListRoots(ctx, nil)
		if err != nil {
			out = append(out, "roots failed: "+err.Error())
		} else {
			var uris []string
			for _, r := range roots.Roots {
				uris = append(uris, r.URI)
			}
			out = append(out, "roots ["+strings.Join(uris, " ")+"]")
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(out, "; ")}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "ask_enum", Description: "Elicits with enum schemas."}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "pick", RequestedSchema: enumSchema()})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action}}}, nil, nil
	})
	return s
}

func chattyLevel(i int) mcp.LoggingLevel {
	return []mcp.LoggingLevel{"debug", "info", "warning"}[i%3]
}

// enumSchema has every enum form of SEP-1330, titled multi-select with
// typed items included (as the conformance suite sends it), and a default
// (SEP-1034).
func enumSchema() map[string]any {
	titled := []any{
		map[string]any{"const": "value1", "title": "First Option"},
		map[string]any{"const": "value2", "title": "Second Option"},
	}
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"untitledSingle": map[string]any{"type": "string", "enum": []any{"option1", "option2"}},
			"titledSingle":   map[string]any{"type": "string", "oneOf": titled},
			"legacyEnum":     map[string]any{"type": "string", "enum": []any{"opt1", "opt2"}, "enumNames": []any{"Option One", "Option Two"}},
			"untitledMulti":  map[string]any{"type": "array", "minItems": 1.0, "items": map[string]any{"type": "string", "enum": []any{"option1", "option2"}}},
			"titledMulti":    map[string]any{"type": "array", "minItems": 1.0, "items": map[string]any{"type": "string", "anyOf": titled}},
			"withDefault":    map[string]any{"type": "string", "enum": []any{"a", "b"}, "default": "a"},
		},
	}
}

// startAskingUpstream serves askingServer over HTTP: with sessions
// (protocol 2025-11-25) or stateless (2026-07-28).
func startAskingUpstream(t *testing.T, stateless bool) string {
	t.Helper()
	s := askingServer()
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: stateless}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// wireTap records the progress and log notifications a client reads, in
// the order they arrive on the wire (the go-sdk's handlers run later, and
// not necessarily in that order).
type wireTap struct {
	mu     sync.Mutex
	events []string
}

func (w *wireTap) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.events
	w.events = nil
	return out
}

type tappedTransport struct {
	mcp.Transport
	tap *wireTap
}

func (t tappedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return tappedConn{Connection: c, tap: t.tap}, nil
}

type tappedConn struct {
	mcp.Connection
	tap *wireTap
}

func (c tappedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && err == nil && !req.IsCall() {
		var p struct {
			Progress float64 `json:"progress"`
			Level    string  `json:"level"`
			Data     any     `json:"data"`
		}
		_ = json.Unmarshal(req.Params, &p)
		c.tap.mu.Lock()
		switch req.Method {
		case "notifications/progress":
			c.tap.events = append(c.tap.events, fmt.Sprintf("progress %v", p.Progress))
		case "notifications/message":
			c.tap.events = append(c.tap.events, fmt.Sprintf("%s %v", p.Level, p.Data))
		}
		c.tap.mu.Unlock()
	}
	return msg, err
}

// askingClient connects to the gateway at url in protocol version, with
// opts, tapping what it reads.
func askingClient(t *testing.T, url, key, version string, opts *mcp.ClientOptions, roots ...string) (*mcp.ClientSession, *wireTap) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "asking-client", Version: "1"}, opts)
	for _, r := range roots {
		client.AddRoots(&mcp.Root{URI: r})
	}
	tap := &wireTap{}
	cs, err := client.Connect(testCtx(t), tappedTransport{tap: tap, Transport: &mcp.StreamableClientTransport{
		Endpoint: url, MaxRetries: -1, HTTPClient: &http.Client{Transport: fixtures.Bearer{Key: key}},
	}}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if _, err := cs.ListTools(testCtx(t), nil); err != nil {
		t.Fatal(err)
	}
	return cs, tap
}

func declines(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	return &mcp.ElicitResult{Action: "decline"}, nil
}

// TestUpstreamLogMessagesReachTheClient: an upstream's log messages during
// a pass-through call reach the client that made it, at the level that
// client asked for, in wire order with the call's progress, on every path
// a call takes: the byte relays, both eras, for clients that can be asked
// and those that cannot.
func TestUpstreamLogMessagesReachTheClient(t *testing.T) {
	const n = 6
	// At info, messages 3 and 6 (debug) are left out.
	atInfo := []string{"progress 1", "info message 1", "progress 2", "warning message 2", "progress 3",
		"progress 4", "info message 4", "progress 5", "warning message 5", "progress 6"}
	noLogs := []string{"progress 1", "progress 2", "progress 3", "progress 4", "progress 5", "progress 6"}
	tests := []struct {
		name      string
		stateless bool // the upstream speaks 2026-07-28
		version   string
		opts      *mcp.ClientOptions
		level     mcp.LoggingLevel // set by logging/setLevel, or per request from 2026-07-28
		want      []string
	}{
		{"2025-11-25 client, relay session", false, "2025-11-25", nil, "info", atInfo},
		{"2025-11-25 client, relay session, no level set", false, "2025-11-25", nil, "", noLogs},
		{"2025-11-25 client that elicits, its relay session", false, "2025-11-25", &mcp.ClientOptions{ElicitationHandler: declines}, "info", atInfo},
		{"2025-11-25 client that elicits, no level set", false, "2025-11-25", &mcp.ClientOptions{ElicitationHandler: declines}, "", noLogs},
		{"2025-11-25 client, 2026-07-28 upstream", true, "2025-11-25", nil, "info", atInfo},
		{"2026-07-28 client, forwarded", true, "2026-07-28", nil, "info", atInfo},
		{"2026-07-28 client, forwarded, no level", true, "2026-07-28", nil, "", noLogs},
		{"2026-07-28 client, 2025-11-25 upstream", false, "2026-07-28", nil, "info", atInfo},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			url, keys := plumbingGatewayKeys(t, ctx, startAskingUpstream(t, tt.stateless), "  - name: asking", fixtures.ConfigOptions{}, "acme")
			cs, tap := askingClient(t, url, keys[0], tt.version, tt.opts)
			meta := mcp.Meta{"progressToken": "p-1"}
			if tt.level != "" {
				if tt.version == "2026-07-28" {
					meta[mcp.MetaKeyLogLevel] = string(tt.level)
				} else if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: tt.level}); err != nil {
					t.Fatal(err)
				}
			}
			for run := range 2 {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "asking.chatty", Arguments: map[string]any{"n": n}, Meta: meta})
				if err != nil || fixtures.ResultText(res) != "chatted" {
					t.Fatalf("run %d: chatty = %+v, %v", run, res, err)
				}
				if got := tap.take(); !slices.Equal(got, tt.want) {
					t.Errorf("run %d: the client read, before the result:\n%q\nwant\n%q", run, got, tt.want)
				}
			}
		})
	}
}

// TestSamplingAndRootsReachTheClient: an upstream's sampling/createMessage
// and roots/list during a pass-through call are answered by the client
// that made it when it declared sampling; a client that did not is
// refused with method not found, and the call still ends.
func TestSamplingAndRootsReachTheClient(t *testing.T) {
	var asked []string
	var mu sync.Mutex
	sampler := &mcp.ClientOptions{CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		mu.Lock()
		defer mu.Unlock()
		if tc, ok := req.Params.Messages[0].Content.(*mcp.TextContent); ok {
			asked = append(asked, tc.Text)
		}
		return &mcp.CreateMessageResult{Model: "m1", Role: "assistant", Content: &mcp.TextContent{Text: "4"}}, nil
	}}
	tests := []struct {
		name  string
		opts  *mcp.ClientOptions
		want  string // the result's text, or a part of it when partial
		exact bool
	}{
		{"client that samples", sampler, "model m1 said 4; roots [file:///work/a file:///work/b]", true},
		{"client that elicits only", &mcp.ClientOptions{ElicitationHandler: declines}, "sampling failed: calling \"sampling/createMessage\": method not found", false},
		{"client that cannot be asked", nil, "sampling failed: calling \"sampling/createMessage\": method not found", false},
	}
	ctx := testCtx(t)
	url, keys := plumbingGatewayKeys(t, ctx, startAskingUpstream(t, false), "  - name: asking", fixtures.ConfigOptions{}, "acme")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs, _ := askingClient(t, url, keys[0], "2025-11-25", tt.opts, "file:///work/a", "file:///work/b")
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "asking.sample", Arguments: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			got := fixtures.ResultText(res)
			if (tt.exact && got != tt.want) || !strings.Contains(got, tt.want) {
				t.Errorf("sample = %q, want %q", got, tt.want)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"2+2?"}; !slices.Equal(asked, want) {
		t.Errorf("the sampling client was asked %q, want %q", asked, want)
	}
}

// TestEnumElicitationReachesTheClient: an elicitation's requested schema,
// with every enum form of SEP-1330 and a default, reaches the client as
// the upstream sent it.
func TestEnumElicitationReachesTheClient(t *testing.T) {
	ctx := testCtx(t)
	url, keys := plumbingGatewayKeys(t, ctx, startAskingUpstream(t, false), "  - name: asking", fixtures.ConfigOptions{}, "acme")
	var schema any
	// The go-sdk client checks an elicitation's schema before its handler
	// sees it, and refuses titled multi-select items that name their type;
	// this client reads the request first, as a client without that check
	// would. It declines: the upstream's go-sdk Elicit would refuse an
	// accepted answer for the same reason.
	client := mcp.NewClient(&mcp.Implementation{Name: "enum-client", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: declines})
	client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if er, ok := req.(*mcp.ElicitRequest); ok && method == "elicitation/create" {
				schema = er.Params.RequestedSchema
				return &mcp.ElicitResult{Action: "decline"}, nil
			}
			return next(ctx, method, req)
		}
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: url, MaxRetries: -1, HTTPClient: &http.Client{Transport: fixtures.Bearer{Key: keys[0]}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "asking.ask_enum", Arguments: map[string]any{}})
	if err != nil || fixtures.ResultText(res) != "decline" {
		t.Fatalf("ask_enum = %+v, %v", res, err)
	}
	var got, want any
	b, _ := json.Marshal(schema)
	_ = json.Unmarshal(b, &got)
	b, _ = json.Marshal(enumSchema())
	_ = json.Unmarshal(b, &want)
	if !reflect.DeepEqual(got, want) {
		gb, _ := json.Marshal(got)
		t.Errorf("the client was asked with schema\n%s\nwant\n%s", gb, b)
	}
}
