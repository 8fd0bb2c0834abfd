package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/internal/daemon"
	"github.com/taskgate/taskgate/internal/dburl"
	"github.com/taskgate/taskgate/internal/sim/fixtures"
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
	ctx := testCtx(t)
	db := "sqlite:" + filepath.Join(t.TempDir(), "taskgate.db")
	y := fmt.Sprintf("listen: 127.0.0.1:0\npublic_url: http://127.0.0.1:1\ndatabase: %q\nupstreams:\n%s", db, upstreams)
	cfg, err := config.Parse(strings.NewReader(y), "surface.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := daemon.Start(ctx, &daemon.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(context.Background()) })
	store, err := dburl.Open(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	key, _, err = authn.NewAPIKey(ctx, store, "acme", "test")
	if err != nil {
		t.Fatal(err)
	}
	return d.URL + "/mcp", key
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
	stateless bool   // upstream: stateless 2026-07-28, else 2025-11-25 sessions
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
