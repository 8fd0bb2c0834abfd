package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/daemon"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger/dburl"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/taskwire"
)

// plumbingServer is an upstream whose tools exercise pass-through: count
// sends progress, ask elicits (2025-11-25 only), meta echoes its _meta.
func plumbingServer(versions ...string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "plumbing"}, &mcp.ServerOptions{SupportedProtocolVersions: versions})
	addCountTool(s)
	mcp.AddTool(s, &mcp.Tool{Name: "ask", Description: "Asks the user."}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "favourite colour?", RequestedSchema: map[string]any{
			"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}},
		}})
		if err != nil {
			return nil, nil, err
		}
		answer, _ := res.Content["answer"].(string)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action + ":" + answer}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "meta", Description: "Echoes _meta."}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		b, _ := json.Marshal(req.Params.Meta)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
	})
	return s
}

// addCountTool gives s the tool count, which sends n progress
// notifications when asked for progress and answers "counted".
func addCountTool(s *mcp.Server) {
	type countArgs struct {
		N int `json:"n"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "count", Description: "Sends n progress notifications."}, func(ctx context.Context, req *mcp.CallToolRequest, a countArgs) (*mcp.CallToolResult, any, error) {
		if tok := req.Params.GetProgressToken(); tok != nil {
			for i := 1; i <= a.N; i++ {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: float64(a.N)}); err != nil {
					return nil, nil, err
				}
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "counted"}}}, nil, nil
	})
}

// plumbingGateway starts a gateway on a fresh ledger in front of the
// upstream at upstreamURL, configured as the harness configures hosted_test
// but with entry as the upstream's first line, and returns the gateway's
// MCP endpoint and an API key of tenant acme.
func plumbingGateway(t *testing.T, ctx context.Context, upstreamURL, entry string) (url, key string) {
	t.Helper()
	url, keys := plumbingGatewayKeys(t, ctx, upstreamURL, entry, fixtures.ConfigOptions{}, "acme")
	return url, keys[0]
}

// plumbingGatewayKeys is plumbingGateway with the harness options opts and
// an API key for each tenant.
func plumbingGatewayKeys(t *testing.T, ctx context.Context, upstreamURL, entry string, opts fixtures.ConfigOptions, tenants ...string) (url string, keys []string) {
	t.Helper()
	db := "sqlite:" + filepath.Join(t.TempDir(), "taskgate.db")
	y := fixtures.ConfigYAML(upstreamURL, "127.0.0.1:0", db, opts)
	y = strings.Replace(y, "  - name: hosted_test", entry, 1)
	cfg, err := config.Parse(strings.NewReader(y), "plumbing.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	return startDaemon(t, ctx, cfg, nil, tenants...)
}

// dialGateway connects a go-sdk client named name, with opts, to the
// gateway at url as key's holder, pinning protocol version unless it is
// empty (the go-sdk's default, 2026-07-28 where the server speaks it). The
// session is closed when the test ends.
func dialGateway(t *testing.T, url, key, name, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	var sopts *mcp.ClientSessionOptions
	if version != "" {
		sopts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, opts).Connect(testCtx(t), &mcp.StreamableClientTransport{
		Endpoint: url, MaxRetries: -1, HTTPClient: &http.Client{Transport: fixtures.Bearer{Key: key}},
	}, sopts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// startDaemon starts a gateway of cfg, logging to log (nil: nowhere), and
// returns its MCP endpoint and an API key for each tenant.
func startDaemon(t *testing.T, ctx context.Context, cfg *config.Config, log *slog.Logger, tenants ...string) (url string, keys []string) {
	t.Helper()
	return startDaemonWith(t, ctx, &daemon.Options{Config: cfg, Logger: log}, tenants...)
}

// startDaemonWith is startDaemon with all of the daemon's options.
func startDaemonWith(t *testing.T, ctx context.Context, opts *daemon.Options, tenants ...string) (url string, keys []string) {
	t.Helper()
	cfg := opts.Config
	d, err := daemon.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(context.Background()) })
	store, err := dburl.Open(ctx, cfg.Database, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	for _, tenant := range tenants {
		key, _, err := authn.NewAPIKey(ctx, store, tenant, "test")
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
	}
	return d.URL + "/mcp", keys
}

// progressLog keeps the progress notifications a client receives.
type progressLog struct {
	mu   sync.Mutex
	seen []float64
}

func (p *progressLog) add(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, req.Params.Progress)
}

// await waits for n notifications and returns those received by then.
func (p *progressLog) await(t *testing.T, n int) []float64 {
	t.Helper()
	var got []float64
	testwait.Until(t, testCtx(t), fmt.Sprintf("%d progress notifications", n), func() (bool, error) {
		p.mu.Lock()
		got = slices.Clone(p.seen)
		p.mu.Unlock()
		return len(got) >= n, fmt.Errorf("received %v", got)
	})
	return got
}

func TestPassThroughPlumbing(t *testing.T) {
	ctx := testCtx(t)
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return plumbingServer("2025-11-25") }, nil))
	t.Cleanup(up.Close)
	url, key := plumbingGateway(t, ctx, up.URL, "  - name: plumbing\n    prefix: \"\"")

	var progress progressLog
	client := mcp.NewClient(&mcp.Implementation{Name: "plumbing-client"}, &mcp.ClientOptions{
		ProgressNotificationHandler: progress.add,
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "green"}}, nil
		},
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: url, MaxRetries: -1, HTTPClient: &http.Client{Transport: fixtures.Bearer{Key: key}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	// The empty prefix lists the upstream's tools under their own names.
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 3 {
		t.Fatalf("tools = %v, %v", tools, err)
	}

	p := &mcp.CallToolParams{Name: "count", Arguments: map[string]any{"n": 5}}
	p.SetProgressToken("tok-1")
	if res, err := cs.CallTool(ctx, p); err != nil || res.IsError {
		t.Fatalf("count = %+v, %v", res, err)
	}
	if got := progress.await(t, 5); len(got) != 5 || got[0] != 1 || got[4] != 5 {
		t.Errorf("progress seen downstream = %v, want 1..5 in order", got)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{}})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "accept:green" {
		t.Fatalf("ask = %+v, %v; want the downstream user's answer", res, err)
	}

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "meta", Arguments: map[string]any{}, Meta: mcp.Meta{"com.example/trace-id": "trace-abc"}})
	if err != nil || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `"com.example/trace-id":"trace-abc"`) {
		t.Fatalf("meta = %+v, %v; want the client's _meta forwarded", res, err)
	}
}

// TestForwardedPassThrough: a 2026-07-28 client's pass-through call to a
// 2026-07-28 upstream is relayed as bytes; it must still carry progress in
// order and the client's _meta, never the gateway's reserved keys or the
// tasks extension.
func TestForwardedPassThrough(t *testing.T) {
	ctx := testCtx(t)
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return plumbingServer() }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(up.Close)
	url, key := plumbingGateway(t, ctx, up.URL, "  - name: plumbing")
	var progress progressLog
	client := mcp.NewClient(&mcp.Implementation{Name: "forward-client"}, &mcp.ClientOptions{
		Capabilities:                taskwire.ClientCapabilitiesWithTasks(nil),
		ProgressNotificationHandler: progress.add,
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: url, MaxRetries: -1, HTTPClient: &http.Client{Transport: fixtures.Bearer{Key: key}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v < "2026-07-28" {
		t.Fatalf("negotiated %s, want 2026-07-28", v)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "plumbing.meta", Arguments: map[string]any{},
		Meta: mcp.Meta{"com.example/trace-id": "trace-abc", "dev.taskgate/operation-id": "not-for-upstream"}})
	if err != nil || res.IsError {
		t.Fatalf("meta = %+v, %v", res, err)
	}
	seen := res.Content[0].(*mcp.TextContent).Text
	for _, want := range []string{`"com.example/trace-id":"trace-abc"`, `"name":"forward-client"`} {
		if !strings.Contains(seen, want) {
			t.Errorf("upstream saw _meta %s; want it to contain %s (the client's own, relayed)", seen, want)
		}
	}
	for _, never := range []string{"dev.taskgate/", taskwire.ExtensionID} {
		if strings.Contains(seen, never) {
			t.Errorf("upstream saw _meta %s; it must not contain %s", seen, never)
		}
	}

	p := &mcp.CallToolParams{Name: "plumbing.count", Arguments: map[string]any{"n": 5}}
	p.SetProgressToken("tok-2026")
	if res, err := cs.CallTool(ctx, p); err != nil || res.IsError {
		t.Fatalf("count = %+v, %v", res, err)
	}
	if got := progress.await(t, 5); len(got) != 5 || got[0] != 1 || got[4] != 5 {
		t.Errorf("progress seen downstream = %v, want 1..5 in order", got)
	}
}

// TestPassThroughWithoutElicitationSharesTheSession: a pass-through call
// from a client that cannot be asked anything does not claim an upstream
// session of its own (or, over stdio, the upstream to itself) for an
// elicitation it could never answer.
func TestPassThroughWithoutElicitationSharesTheSession(t *testing.T) {
	ctx := testCtx(t)
	var mu sync.Mutex
	initializes := 0
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return plumbingServer("2025-11-25") }, nil)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			if bytes.Contains(b, []byte(`"method":"initialize"`)) {
				mu.Lock()
				initializes++
				mu.Unlock()
			}
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	url, key := plumbingGateway(t, ctx, up.URL, "  - name: plumbing")
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return initializes
	}
	before := count()
	for _, tt := range []struct {
		name    string
		version string
	}{{"2026-07-28", ""}, {"2025-11-25 without elicitation", "2025-11-25"}} {
		client := mcp.NewClient(&mcp.Implementation{Name: "no-elicitation"}, nil)
		var opts *mcp.ClientSessionOptions
		if tt.version != "" {
			opts = &mcp.ClientSessionOptions{ProtocolVersion: tt.version}
		}
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
			Endpoint: url, MaxRetries: -1, HTTPClient: &http.Client{Transport: fixtures.Bearer{Key: key}},
		}, opts)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "plumbing.meta", Arguments: map[string]any{}}); err != nil || res.IsError {
				t.Fatalf("%s: meta = %+v, %v", tt.name, res, err)
			}
		}
		cs.Close()
	}
	// The one session allowed is the gateway's relay session, opened by
	// the first relayed 2025-11-25 call and shared by every one after it.
	if n := count() - before; n > 1 {
		t.Errorf("six pass-through calls from clients without elicitation opened %d upstream sessions; want at most the one relay session", n)
	}
}

// taskOfferingHost lets a 2025-11-25 upstream list its tools with
// execution.taskSupport "optional"; every call passes to the tool.
type taskOfferingHost struct{}

func (taskOfferingHost) TaskSupport(string) taskwire.TaskSupport { return taskwire.TaskOptional }
func (taskOfferingHost) CallTool(context.Context, *taskwire.ToolCall) (*taskwire.Outcome, error) {
	return &taskwire.Outcome{Pass: true}, nil
}
func (taskOfferingHost) GetTask(context.Context, *taskwire.Caller, string) (*taskwire.Task, error) {
	return nil, taskwire.ErrTaskNotFound
}
func (taskOfferingHost) CancelTask(context.Context, *taskwire.Caller, string) (*taskwire.Task, error) {
	return nil, taskwire.ErrTaskNotFound
}
func (taskOfferingHost) UpdateTask(context.Context, *taskwire.Caller, string, map[string]json.RawMessage) error {
	return taskwire.ErrTaskNotFound
}
func (taskOfferingHost) ListTasks(context.Context, *taskwire.Caller, string) ([]*taskwire.Task, string, error) {
	return nil, "", nil
}
func (taskOfferingHost) WaitTask(context.Context, *taskwire.Caller, string) (*taskwire.Task, error) {
	return nil, taskwire.ErrTaskNotFound
}

// TestListedToolsCarryNoReservedMeta: what taskgate's client side notes in
// an upstream tool's _meta (a 2025-11-25 tool's execution) stays inside.
func TestListedToolsCarryNoReservedMeta(t *testing.T) {
	ctx := testCtx(t)
	server := plumbingServer("2025-11-25")
	if err := taskwire.Install(server, taskOfferingHost{}, nil); err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(taskwire.NewHTTPHandler(server, nil))
	t.Cleanup(up.Close)
	url, key := plumbingGateway(t, ctx, up.URL, "  - name: plumbing")
	for _, era := range []fixtures.Era{fixtures.EraExtension, fixtures.EraLegacy} {
		cs, err := fixtures.Dial(ctx, url, key, era, nil)
		if err != nil {
			t.Fatal(err)
		}
		tools, err := cs.ListTools(ctx, nil)
		cs.Close()
		if err != nil || len(tools.Tools) == 0 {
			t.Fatalf("%s: tools = %v, %v", era, tools, err)
		}
		for _, tool := range tools.Tools {
			for k := range tool.Meta {
				if strings.HasPrefix(k, "dev.taskgate/") {
					t.Errorf("%s: tool %s lists _meta[%q]; taskgate's reserved keys must not leave it", era, tool.Name, k)
				}
			}
		}
	}
}
