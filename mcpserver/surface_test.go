package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/internal/syncbuf"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/sim/fixtures"
)

// surfaceUpstream is a go-sdk server with resources (text, binary, more
// than a page of them), a template, prompts (every content kind, and one
// that needs input in 2026-07-28), completion and subscriptions. Its texts
// name tag, so a test sees which upstream answered.
type surfaceUpstream struct {
	tag    string
	server *mcp.Server

	mu           sync.Mutex
	subscribed   map[string]int
	unsubscribed map[string]int
}

var blob = []byte{0, 1, 2, 0xfe, 0xff}

func newSurfaceUpstream(tag string, versions ...string) *surfaceUpstream {
	u := &surfaceUpstream{tag: tag, subscribed: map[string]int{}, unsubscribed: map[string]int{}}
	s := mcp.NewServer(&mcp.Implementation{Name: "surface-" + tag, Version: "1"}, &mcp.ServerOptions{
		SupportedProtocolVersions: versions,
		PageSize:                  2,
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			ref := req.Params.Ref
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{
				Values: []string{fmt.Sprintf("%s|%s|%s%s|%s", tag, ref.Type, ref.Name, ref.URI, req.Params.Argument.Value)},
				Total:  1,
			}}, nil
		},
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			u.mu.Lock()
			defer u.mu.Unlock()
			u.subscribed[req.Params.URI]++
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
			u.mu.Lock()
			defer u.mu.Unlock()
			u.unsubscribed[req.Params.URI]++
			return nil
		},
	})
	text := func(uri, body string) mcp.ResourceHandler {
		return func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: body}}}, nil
		}
	}
	s.AddResource(&mcp.Resource{URI: "test://shared", Name: "shared", MIMEType: "text/plain"}, text("test://shared", "shared from "+tag))
	s.AddResource(&mcp.Resource{URI: "test://" + tag + "/text", Name: "text", MIMEType: "text/plain"}, text("test://"+tag+"/text", "text from "+tag))
	s.AddResource(&mcp.Resource{URI: "test://" + tag + "/blob", Name: "blob", MIMEType: "application/octet-stream"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://" + tag + "/blob", MIMEType: "application/octet-stream", Blob: blob}}}, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://" + tag + "/items/{id}", Name: "item"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return text(req.Params.URI, "item "+strings.TrimPrefix(req.Params.URI, "test://"+tag+"/items/")+" from "+tag)(nil, req)
		})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "who", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Description: "greeting from " + tag, Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: "hello " + req.Params.Arguments["who"] + " from " + tag}},
				{Role: "user", Content: &mcp.ImageContent{MIMEType: "image/png", Data: blob}},
				{Role: "assistant", Content: &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "test://" + tag + "/blob", MIMEType: "application/octet-stream", Blob: blob}}},
			}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "confirm"}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		if len(req.Params.InputResponses) == 0 {
			return &mcp.GetPromptResult{InputRequests: mcp.InputRequestMap{"sure": &mcp.ElicitParams{
				Message: "sure?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}},
			}}, RequestState: "state-" + tag}, nil
		}
		answer, _ := json.Marshal(req.Params.InputResponses["sure"])
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
			{Role: "user", Content: &mcp.TextContent{Text: fmt.Sprintf("confirmed by %s with %s in %s", tag, answer, req.Params.RequestState)}},
		}}, nil
	})
	// Tools let a test make the upstream change, also over stdio.
	type uriArgs struct {
		URI string `json:"uri"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "touch", Description: "Announces that a resource was updated."}, func(ctx context.Context, _ *mcp.CallToolRequest, a uriArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "touched"}}}, nil, s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: a.URI})
	})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Adds a prompt and a resource named name."}, func(_ context.Context, _ *mcp.CallToolRequest, a struct {
		Name string `json:"name"`
	}) (*mcp.CallToolResult, any, error) {
		s.AddPrompt(&mcp.Prompt{Name: a.Name}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: a.Name + " from " + tag}}}}, nil
		})
		uri := "test://" + tag + "/added/" + a.Name
		s.AddResource(&mcp.Resource{URI: uri, Name: a.Name}, text(uri, a.Name+" from "+tag))
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "added"}}}, nil, nil
	})
	u.server = s
	return u
}

func (u *surfaceUpstream) counts(uri string) (sub, unsub int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.subscribed[uri], u.unsubscribed[uri]
}

// serve serves u over HTTP: stateless (2026-07-28 only) or with sessions.
func (u *surfaceUpstream) serve(t *testing.T, stateless bool) string {
	t.Helper()
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.server }, &mcp.StreamableHTTPOptions{Stateless: stateless}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// surfaceGateway starts a gateway with the given upstreams block and
// returns its MCP endpoint and an API key.
func surfaceGateway(t *testing.T, upstreams string) (url, key string) {
	t.Helper()
	return surfaceGatewayLogging(t, upstreams, nil)
}

// surfaceGatewayLogging is surfaceGateway logging to log.
func surfaceGatewayLogging(t *testing.T, upstreams string, log *slog.Logger) (url, key string) {
	t.Helper()
	db := "sqlite:" + filepath.Join(t.TempDir(), "taskgate.db")
	// The tests announce changes in a loop until they are seen (touch): a
	// busy machine must not run them past a tenant's call rate.
	y := fmt.Sprintf("listen: 127.0.0.1:0\npublic_url: http://127.0.0.1:1\ndatabase: %q\nlimits: {call_rate: 100000, call_burst: 100000}\nupstreams:\n%s", db, upstreams)
	cfg, err := config.Parse(strings.NewReader(y), "surface.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	url, keys := startDaemon(t, testCtx(t), cfg, log, "acme")
	return url, keys[0]
}

// dialSurface connects a client of protocol version to the gateway.
func dialSurface(t *testing.T, url, key, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	if opts == nil {
		opts = &mcp.ClientOptions{}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "surface-client", Version: "1"}, opts)
	cs, err := client.Connect(testCtx(t), &mcp.StreamableClientTransport{
		Endpoint: url, MaxRetries: -1, HTTPClient: &http.Client{Transport: fixtures.Bearer{Key: key}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// dialDirect connects a client straight to an upstream, to compare.
func dialDirect(t *testing.T, url, version string) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}}).
		Connect(testCtx(t), &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// allPages lists every page, checking that they come as pages.
func allPages[T any](t *testing.T, what string, list func(cursor string) ([]T, string, error)) (items []T, pages int) {
	t.Helper()
	for cursor := ""; ; {
		got, next, err := list(cursor)
		if err != nil {
			t.Fatalf("%s (cursor %q): %v", what, cursor, err)
		}
		items, pages = append(items, got...), pages+1
		if cursor = next; cursor == "" {
			return items, pages
		}
	}
}

func resourceURIs(t *testing.T, cs *mcp.ClientSession) ([]string, int) {
	t.Helper()
	rs, pages := allPages(t, "resources/list", func(c string) ([]*mcp.Resource, string, error) {
		res, err := cs.ListResources(testCtx(t), &mcp.ListResourcesParams{Cursor: c})
		if err != nil {
			return nil, "", err
		}
		return res.Resources, res.NextCursor, nil
	})
	var uris []string
	for _, r := range rs {
		uris = append(uris, r.URI)
	}
	slices.Sort(uris)
	return uris, pages
}

func promptNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	ps, _ := allPages(t, "prompts/list", func(c string) ([]*mcp.Prompt, string, error) {
		res, err := cs.ListPrompts(testCtx(t), &mcp.ListPromptsParams{Cursor: c})
		if err != nil {
			return nil, "", err
		}
		return res.Prompts, res.NextCursor, nil
	})
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The eras of upstream and client, every pairing.
var surfaceEras = []struct {
	name      string
	stateless bool // upstream: stateless 2026-07-28, else 2025-11-25 sessions
	versions  []string
	client    string
}{
	{"upstream-2026/client-2026", true, nil, "2026-07-28"},
	{"upstream-2026/client-2025", true, nil, "2025-11-25"},
	{"upstream-2025/client-2026", false, []string{"2025-11-25"}, "2026-07-28"},
	{"upstream-2025/client-2025", false, []string{"2025-11-25"}, "2025-11-25"},
}

// TestSurfacePassesThrough: with one upstream and prefix "", resources,
// templates, prompts and completion answer as the upstream answers them.
func TestSurfacePassesThrough(t *testing.T) {
	for _, era := range surfaceEras {
		t.Run(era.name, func(t *testing.T) {
			up := newSurfaceUpstream("one", era.versions...)
			upURL := up.serve(t, era.stateless)
			url, key := surfaceGateway(t, fmt.Sprintf("  - name: one\n    url: %s\n    prefix: \"\"\n", upURL))
			cs := dialSurface(t, url, key, era.client, nil)
			direct := dialDirect(t, upURL, era.client)
			ctx := testCtx(t)

			caps := cs.InitializeResult().Capabilities
			if caps.Resources == nil || !caps.Resources.Subscribe || !caps.Resources.ListChanged || caps.Prompts == nil || caps.Completions == nil {
				t.Errorf("capabilities = %s; want resources (subscribe, listChanged), prompts and completions", jsonOf(t, caps))
			}

			uris, pages := resourceURIs(t, cs)
			want, wantPages := resourceURIs(t, direct)
			if !reflect.DeepEqual(uris, want) || pages != wantPages || pages < 2 {
				t.Errorf("resources = %v in %d pages; want %v in %d pages as the upstream pages them", uris, pages, want, wantPages)
			}
			tmpls, err := cs.ListResourceTemplates(ctx, nil)
			if err != nil || len(tmpls.ResourceTemplates) != 1 || tmpls.ResourceTemplates[0].URITemplate != "test://one/items/{id}" {
				t.Errorf("resources/templates/list = %s, %v", jsonOf(t, tmpls), err)
			}

			for _, uri := range []string{"test://one/text", "test://one/blob", "test://one/items/42"} {
				got, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
				if err != nil {
					t.Fatalf("read %s: %v", uri, err)
				}
				exp, err := direct.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
				if err != nil {
					t.Fatal(err)
				}
				if jsonOf(t, got.Contents) != jsonOf(t, exp.Contents) {
					t.Errorf("read %s = %s; want %s", uri, jsonOf(t, got.Contents), jsonOf(t, exp.Contents))
				}
			}
			if got, _ := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://one/blob"}); got != nil && !slices.Equal(got.Contents[0].Blob, blob) {
				t.Errorf("blob = %v; want %v", got.Contents[0].Blob, blob)
			}

			_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://nowhere"})
			_, expErr := direct.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://nowhere"})
			var got, exp *jsonrpc.Error
			if !errors.As(err, &got) || !errors.As(expErr, &exp) || got.Code != exp.Code || string(got.Data) != string(exp.Data) {
				t.Errorf("unknown URI: %v; want the upstream's %v", err, expErr)
			}

			if names := promptNames(t, cs); !reflect.DeepEqual(names, []string{"confirm", "greet"}) {
				t.Errorf("prompts = %v", names)
			}
			p, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": "ada"}})
			if err != nil {
				t.Fatal(err)
			}
			expP, err := direct.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": "ada"}})
			if err != nil {
				t.Fatal(err)
			}
			if jsonOf(t, p.Messages) != jsonOf(t, expP.Messages) || p.Description != expP.Description || !strings.Contains(jsonOf(t, p.Messages), "hello ada from one") {
				t.Errorf("prompts/get = %s; want %s", jsonOf(t, p), jsonOf(t, expP))
			}
			_, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "nope"})
			_, expErr = direct.GetPrompt(ctx, &mcp.GetPromptParams{Name: "nope"})
			if !errors.As(err, &got) || !errors.As(expErr, &exp) || got.Code != exp.Code {
				t.Errorf("unknown prompt: %v; want the upstream's %v", err, expErr)
			}

			for _, ref := range []*mcp.CompleteReference{{Type: "ref/prompt", Name: "greet"}, {Type: "ref/resource", URI: "test://one/items/{id}"}} {
				res, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: ref, Argument: mcp.CompleteParamsArgument{Name: "who", Value: "a"}})
				if err != nil {
					t.Fatalf("complete %s: %v", ref.Type, err)
				}
				if want := fmt.Sprintf("one|%s|%s%s|a", ref.Type, ref.Name, ref.URI); !slices.Equal(res.Completion.Values, []string{want}) {
					t.Errorf("complete %s = %v; want [%s]", ref.Type, res.Completion.Values, want)
				}
			}
		})
	}
}

func readText(t *testing.T, cs *mcp.ClientSession, uri string) string {
	t.Helper()
	res, err := cs.ReadResource(testCtx(t), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	if len(res.Contents) != 1 {
		t.Fatalf("read %s = %s; want one content", uri, jsonOf(t, res))
	}
	return res.Contents[0].Text
}

func promptText(t *testing.T, cs *mcp.ClientSession, name string) string {
	t.Helper()
	res, err := cs.GetPrompt(testCtx(t), &mcp.GetPromptParams{Name: name, Arguments: map[string]string{"who": "ada"}})
	if err != nil {
		t.Fatalf("prompts/get %s: %v", name, err)
	}
	return res.Messages[0].Content.(*mcp.TextContent).Text
}

// TestSurfaceCollision: two upstreams without namespaces that list the same
// URI and prompts. The first in configuration order keeps each, the other's
// is withheld from the lists and never reached, and the clash is logged
// naming both; everything else of both passes through.
func TestSurfaceCollision(t *testing.T) {
	a, b := newSurfaceUpstream("a"), newSurfaceUpstream("b")
	// Un-namespaced, b's a.greet is a_second's greet in its namespace a.
	b.server.AddPrompt(&mcp.Prompt{Name: "a.greet"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "a.greet from b"}}}}, nil
	})
	var logs syncbuf.Buffer
	url, key := surfaceGatewayLogging(t, fmt.Sprintf("  - name: b_first\n    url: %s\n    prefix: \"\"\n  - name: a_second\n    url: %s\n    prefix: a\n",
		b.serve(t, false), a.serve(t, true)), slog.New(slog.NewTextHandler(&logs, nil)))
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		cs := dialSurface(t, url, key, version, nil)
		uris, _ := resourceURIs(t, cs)
		want := []string{"test://a/blob", "test://a/text", "test://b/blob", "test://b/text", "test://shared"}
		if !reflect.DeepEqual(uris, want) {
			t.Errorf("%s: resources = %v; want %v", version, uris, want)
		}
		if names := promptNames(t, cs); !reflect.DeepEqual(names, []string{"a.confirm", "a.greet", "confirm", "greet"}) {
			t.Errorf("%s: prompts = %v; want a.greet once", version, names)
		}
		for uri, want := range map[string]string{
			"test://shared": "shared from b", "test://a/text": "text from a", "test://b/text": "text from b",
			"test://a/items/7": "item 7 from a", "test://b/items/8": "item 8 from b",
		} {
			if got := readText(t, cs, uri); got != want {
				t.Errorf("%s: read %s = %q; want %q", version, uri, got, want)
			}
		}
		if got := promptText(t, cs, "a.greet"); got != "a.greet from b" {
			t.Errorf("%s: a.greet = %q; want b's", version, got)
		}
		res, err := cs.Complete(testCtx(t), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "test://a/items/{id}"}, Argument: mcp.CompleteParamsArgument{Name: "id", Value: "1"}})
		if err != nil || !slices.Equal(res.Completion.Values, []string{"a|ref/resource|test://a/items/{id}|1"}) {
			t.Errorf("%s: completing a's template = %v, %v", version, res, err)
		}
	}
	for _, item := range []string{"resource=test://shared", "prompt=a.greet"} {
		if line := logLine(logs.String(), item); !strings.Contains(line, "level=ERROR") || !strings.Contains(line, "kept_from=b_first") || !strings.Contains(line, "withheld_from=a_second") {
			t.Errorf("clash over %s logged as %q; want an error naming both upstreams", item, line)
		}
	}
}

func logLine(logs, item string) string {
	for line := range strings.Lines(logs) {
		if strings.Contains(line, " "+item+" ") {
			return line
		}
	}
	return ""
}

// TestSurfaceNamespaces: with prefixes, each upstream's prompts are listed
// under its namespace and get and complete reach it under their own names.
func TestSurfaceNamespaces(t *testing.T) {
	a, b := newSurfaceUpstream("a"), newSurfaceUpstream("b")
	url, key := surfaceGateway(t, fmt.Sprintf("  - name: a\n    url: %s\n  - name: b\n    url: %s\n", a.serve(t, true), b.serve(t, false)))
	cs := dialSurface(t, url, key, "2026-07-28", nil)
	if names := promptNames(t, cs); !reflect.DeepEqual(names, []string{"a.confirm", "a.greet", "b.confirm", "b.greet"}) {
		t.Errorf("prompts = %v", names)
	}
	if got := promptText(t, cs, "b.greet"); got != "hello ada from b" {
		t.Errorf("b.greet = %q", got)
	}
	res, err := cs.Complete(testCtx(t), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "b.greet"}, Argument: mcp.CompleteParamsArgument{Name: "who", Value: "x"}})
	if err != nil || !slices.Equal(res.Completion.Values, []string{"b|ref/prompt|greet|x"}) {
		t.Errorf("completing b.greet = %v, %v", res, err)
	}
	if _, err := cs.GetPrompt(testCtx(t), &mcp.GetPromptParams{Name: "greet"}); err == nil {
		t.Error("an un-namespaced prompt name was served")
	}
}

// updates records the notifications/resources/updated a client receives.
type updates struct {
	mu   sync.Mutex
	uris []string
}

func (u *updates) add(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.uris = append(u.uris, req.Params.URI)
}

func (u *updates) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Compact(slices.Sorted(slices.Values(u.uris)))
}

func (u *updates) count(uri string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, x := range u.uris {
		if x == uri {
			n++
		}
	}
	return n
}

func touch(t *testing.T, cs *mcp.ClientSession, uri string) {
	t.Helper()
	if res, err := cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: "touch", Arguments: map[string]any{"uri": uri}}); err != nil || res.IsError {
		t.Fatalf("touch %s = %v, %v", uri, res, err)
	}
}

// subscribe subscribes cs to uri. A 2026-07-28 subscription is a
// subscriptions/listen stream the go-sdk holds open until Unsubscribe, so
// it is started in the background.
func subscribe(t *testing.T, cs *mcp.ClientSession, version, uri string) {
	t.Helper()
	if version == "2025-11-25" {
		if err := cs.Subscribe(testCtx(t), &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatalf("subscribe %s: %v", uri, err)
		}
		return
	}
	go cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri})
}

// TestSurfaceSubscriptions: an upstream's resources/updated reaches the
// sessions subscribed to that URI and no other; the upstream is subscribed
// once for all of them and unsubscribed when the last one goes.
func TestSurfaceSubscriptions(t *testing.T) {
	for _, era := range surfaceEras {
		t.Run(era.name, func(t *testing.T) {
			up := newSurfaceUpstream("one", era.versions...)
			url, key := surfaceGateway(t, fmt.Sprintf("  - name: one\n    url: %s\n    prefix: \"\"\n", up.serve(t, era.stateless)))
			text, blob := "test://one/text", "test://one/blob"
			var seenA, seenB, seenC updates
			a := dialSurface(t, url, key, era.client, &mcp.ClientOptions{ResourceUpdatedHandler: seenA.add})
			b := dialSurface(t, url, key, era.client, &mcp.ClientOptions{ResourceUpdatedHandler: seenB.add})
			c := dialSurface(t, url, key, era.client, &mcp.ClientOptions{ResourceUpdatedHandler: seenC.add})
			subscribe(t, a, era.client, text)
			subscribe(t, b, era.client, blob)
			subscribe(t, c, era.client, text)
			ctx := testCtx(t)
			// Subscriptions of 2026-07-28 take effect in the background:
			// announce until they have.
			testwait.Until(t, ctx, "a and c told of "+text, func() (bool, error) {
				touch(t, a, text)
				return seenA.count(text) > 0 && seenC.count(text) > 0, fmt.Errorf("a saw %v, c saw %v", seenA.seen(), seenC.seen())
			})
			testwait.Until(t, ctx, "b told of "+blob, func() (bool, error) {
				touch(t, a, blob)
				return seenB.count(blob) > 0, fmt.Errorf("b saw %v", seenB.seen())
			})
			if got := seenB.seen(); !slices.Equal(got, []string{blob}) {
				t.Errorf("b, subscribed to %s only, was told of %v", blob, got)
			}
			if got := seenA.seen(); !slices.Equal(got, []string{text}) {
				t.Errorf("a, subscribed to %s only, was told of %v", text, got)
			}
			if sub, _ := up.counts(text); sub != 1 {
				t.Errorf("the upstream was subscribed to %s %d times for two sessions; want once", text, sub)
			}

			if err := a.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: text}); err != nil {
				t.Fatal(err)
			}
			before := seenC.count(text)
			testwait.Until(t, ctx, "c still told of "+text, func() (bool, error) {
				touch(t, b, text)
				return seenC.count(text) > before, nil
			})
			if _, unsub := up.counts(text); unsub != 0 {
				t.Errorf("the upstream was unsubscribed from %s while c still is subscribed", text)
			}
			// The last subscriber's session ends without unsubscribing.
			c.Close()
			testwait.Until(t, ctx, "the upstream unsubscribed from "+text, func() (bool, error) {
				_, unsub := up.counts(text)
				return unsub == 1, fmt.Errorf("unsubscribed %d times", unsub)
			})
		})
	}
}

// listChanges counts list_changed notifications a client receives.
type listChanges struct {
	mu                 sync.Mutex
	prompts, resources int
}

func (l *listChanges) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) {
			l.mu.Lock()
			l.prompts++
			l.mu.Unlock()
		},
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
			l.mu.Lock()
			l.resources++
			l.mu.Unlock()
		},
	}
}

func (l *listChanges) counts() (prompts, resources int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.prompts, l.resources
}

// TestSurfaceListChanged: an upstream that adds a prompt and a resource
// makes taskgate tell its clients that both lists changed, and list them.
func TestSurfaceListChanged(t *testing.T) {
	for _, era := range surfaceEras {
		t.Run(era.name, func(t *testing.T) {
			up := newSurfaceUpstream("one", era.versions...)
			url, key := surfaceGateway(t, fmt.Sprintf("  - name: one\n    url: %s\n    prefix: \"\"\n", up.serve(t, era.stateless)))
			var changes listChanges
			cs := dialSurface(t, url, key, era.client, changes.options())
			ctx := testCtx(t)
			n := 0
			// A 2026-07-28 client hears of changes once its listen stream
			// is open: add until it has heard.
			testwait.Until(t, ctx, "prompts and resources list_changed", func() (bool, error) {
				n++
				if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"name": fmt.Sprintf("new%d", n)}}); err != nil || res.IsError {
					return false, fmt.Errorf("add: %v, %v", res, err)
				}
				p, r := changes.counts()
				return p > 0 && r > 0, fmt.Errorf("%d prompts and %d resources notifications", p, r)
			})
			if names := promptNames(t, cs); !slices.Contains(names, "new1") {
				t.Errorf("prompts = %v; want new1 listed", names)
			}
			if got := promptText(t, cs, "new1"); got != "new1 from one" {
				t.Errorf("prompts/get new1 = %q", got)
			}
			if uris, _ := resourceURIs(t, cs); !slices.Contains(uris, "test://one/added/new1") {
				t.Errorf("resources = %v; want test://one/added/new1", uris)
			}
		})
	}
}

// TestSurfaceInputRequired: a 2026-07-28 upstream's input_required answer
// to prompts/get reaches a 2026-07-28 client as it is, and the retry with
// inputResponses and requestState reaches the upstream as it is; a
// 2025-11-25 client is asked by elicitation instead (the go-sdk's own
// handling of such a result) and gets the final result.
func TestSurfaceInputRequired(t *testing.T) {
	up := newSurfaceUpstream("one")
	url, key := surfaceGateway(t, fmt.Sprintf("  - name: one\n    url: %s\n    prefix: \"\"\n", up.serve(t, true)))
	ctx := testCtx(t)

	cs := dialSurface(t, url, key, "2026-07-28", &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "confirm"})
	if err != nil {
		t.Fatal(err)
	}
	ask, ok := res.InputRequests["sure"].(*mcp.ElicitParams)
	if !res.NeedsInput() || !ok || ask.Message != "sure?" || res.RequestState != "state-one" {
		t.Fatalf("prompts/get = %s; want the upstream's input_required result", jsonOf(t, res))
	}
	res, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "confirm", RequestState: res.RequestState,
		InputResponses: mcp.InputResponseMap{"sure": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Messages[0].Content.(*mcp.TextContent).Text; res.NeedsInput() || !strings.Contains(got, `"action":"accept"`) || !strings.HasSuffix(got, "in state-one") {
		t.Errorf("retried prompts/get = %s; want the upstream to have had the answer and the state", jsonOf(t, res))
	}

	legacy := dialSurface(t, url, key, "2025-11-25", &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}, nil
	}})
	res, err = legacy.GetPrompt(ctx, &mcp.GetPromptParams{Name: "confirm"})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Messages[0].Content.(*mcp.TextContent).Text; !strings.Contains(got, `"action":"accept"`) {
		t.Errorf("prompts/get for a 2025-11-25 client = %q; want it confirmed by elicitation", got)
	}
}

// TestSurfaceStdioUpstream: resources, prompts, completion, subscriptions
// and list changes of an upstream that taskgate runs as a stdio child.
func TestSurfaceStdioUpstream(t *testing.T) {
	cmdLine, _ := json.Marshal([]string{os.Args[0]})
	url, key := surfaceGateway(t, fmt.Sprintf("  - name: one\n    command: %s\n    env: {%s: surface}\n    prefix: \"\"\n", cmdLine, helperEnv))
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			var seen updates
			var changes listChanges
			opts := changes.options()
			opts.ResourceUpdatedHandler = seen.add
			cs := dialSurface(t, url, key, version, opts)
			ctx := testCtx(t)
			if uris, pages := resourceURIs(t, cs); !slices.Contains(uris, "test://stdio/text") || pages < 2 {
				t.Errorf("resources = %v in %d pages", uris, pages)
			}
			if got := readText(t, cs, "test://stdio/items/3"); got != "item 3 from stdio" {
				t.Errorf("read = %q", got)
			}
			if got := promptText(t, cs, "greet"); got != "hello ada from stdio" {
				t.Errorf("greet = %q", got)
			}
			res, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "greet"}, Argument: mcp.CompleteParamsArgument{Name: "who", Value: "x"}})
			if err != nil || !slices.Equal(res.Completion.Values, []string{"stdio|ref/prompt|greet|x"}) {
				t.Errorf("complete = %v, %v", res, err)
			}
			subscribe(t, cs, version, "test://stdio/text")
			testwait.Until(t, ctx, "told of the update", func() (bool, error) {
				touch(t, cs, "test://stdio/text")
				return seen.count("test://stdio/text") > 0, nil
			})
			name := "added" + strings.ReplaceAll(version, "-", "")
			if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"name": name}}); err != nil || res.IsError {
				t.Fatalf("add = %v, %v", res, err)
			}
			testwait.Until(t, ctx, "the added prompt listed", func() (bool, error) {
				return slices.Contains(promptNames(t, cs), name), nil
			})
		})
	}
}

// TestSurfaceCapabilities: clients are told of resources, prompts and
// completion when an upstream offers them or has not connected yet (and so
// may), not when every upstream offers tools only.
func TestSurfaceCapabilities(t *testing.T) {
	tools := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return plumbingServer("2025-11-25") }, nil))
	t.Cleanup(tools.Close)
	for _, tt := range []struct {
		name, upstreams string
		want            bool
	}{
		{"tools only", fmt.Sprintf("  - name: tools\n    url: %s\n", tools.URL), false},
		{"not connected yet", fmt.Sprintf("  - name: tools\n    url: %s\n  - name: later\n    url: http://127.0.0.1:1/mcp\n    required: false\n", tools.URL), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			url, key := surfaceGateway(t, tt.upstreams)
			for _, version := range []string{"2026-07-28", "2025-11-25"} {
				caps := dialSurface(t, url, key, version, nil).InitializeResult().Capabilities
				got := caps.Resources != nil && caps.Resources.Subscribe && caps.Prompts != nil && caps.Completions != nil
				if got != tt.want || caps.Tools == nil || (!tt.want && (caps.Resources != nil || caps.Prompts != nil || caps.Completions != nil)) {
					t.Errorf("%s: capabilities = %s; want resources, prompts and completions %v", version, jsonOf(t, caps), tt.want)
				}
			}
		})
	}
}

// TestSurfaceSlowUpstreamDoesNotHoldBackTheOthers: the prompts of one
// upstream are published (prompts/get reaches them) while another's
// prompts/list is unanswered, and the slow one's are published from that
// same listing once it answers, without listing it again.
func TestSurfaceSlowUpstreamDoesNotHoldBackTheOthers(t *testing.T) {
	ctx := testCtx(t)
	var lists atomic.Int32
	held := make(chan struct{})
	release := sync.OnceFunc(func() { close(held) })
	t.Cleanup(release) // before the upstream closes
	slow := newSurfaceUpstream("slow")
	slow.server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "prompts/list" {
				lists.Add(1)
				select {
				case <-held:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return next(ctx, method, req)
		}
	})
	fast := newSurfaceUpstream("fast")
	url, key := surfaceGateway(t, fmt.Sprintf("  - name: slow\n    url: %s\n    prefix: slow\n  - name: fast\n    url: %s\n    prefix: fast\n", slow.serve(t, false), fast.serve(t, false)))
	cs := dialSurface(t, url, key, "2026-07-28", nil)
	get := func(name string) error {
		_, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: map[string]string{"who": "x"}})
		return err
	}
	testwait.Until(t, ctx, "the fast upstream's prompts published", func() (bool, error) {
		err := get("fast.greet")
		return err == nil, err
	})
	if err := get("slow.greet"); err == nil {
		t.Fatal("the slow upstream's prompt is published before it answered")
	}
	if n := lists.Load(); n != 1 {
		t.Fatalf("the slow upstream's prompts were listed %d times before it answered, want once: its listing given up on, or a second started", n)
	}
	release()
	testwait.Until(t, ctx, "the slow upstream's prompts published", func() (bool, error) {
		err := get("slow.greet")
		return err == nil, err
	})
	if n := lists.Load(); n != 1 {
		t.Errorf("the slow upstream's prompts were listed %d times, want once: the late listing published", n)
	}
}
