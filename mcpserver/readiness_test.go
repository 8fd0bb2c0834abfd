package mcpserver_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/daemon"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/sim/fixtures"
)

// TestReadyOnlyOnceTheToolsArePublished holds that /readyz answers 200 only
// when a required upstream's tools can be called: a load balancer sends
// clients as soon as it does. The upstream's first tools/list is held back;
// while it is, the upstream is connected and answers pings, and /readyz
// must still say it is unavailable. The first call after /readyz says 200
// must find its tool.
func TestReadyOnlyOnceTheToolsArePublished(t *testing.T) {
	ctx := testCtx(t)
	listing := make(chan struct{})
	noteListing := sync.OnceFunc(func() { close(listing) })
	release := make(chan struct{})
	releaseLists := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseLists)
	s := plumbingServer("2025-11-25")
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				noteListing()
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return next(ctx, method, req)
		}
	})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(up.Close)

	db := "sqlite:" + filepath.Join(t.TempDir(), "taskgate.db")
	y := strings.Replace(fixtures.ConfigYAML(up.URL, "127.0.0.1:0", db, fixtures.ConfigOptions{}), "  - name: hosted_test", "  - name: plumbing\n    prefix: \"\"", 1)
	cfg, err := config.Parse(strings.NewReader(y), "plumbing.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	url, keys := startDaemonWith(t, ctx, &daemon.Options{Config: cfg, ServeAtOnce: true}, "acme")
	t.Cleanup(releaseLists) // before the gateway stops
	base := strings.TrimSuffix(url, "/mcp")

	select {
	case <-listing:
	case <-ctx.Done():
		t.Fatal("the gateway never listed the upstream's tools")
	}
	code, body := getReadyz(t, ctx, base)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"upstream plumbing":"unavailable"`) {
		t.Errorf("/readyz while the upstream's tools are being listed = %d %s; want 503 naming the upstream unavailable", code, body)
	}

	releaseLists()
	testwait.Until(t, ctx, "/readyz answers 200", func() (bool, error) {
		code, body := getReadyz(t, ctx, base)
		return code == http.StatusOK, &readyzAnswer{code, body}
	})
	cs := dialGateway(t, url, keys[0], "first-caller", "", nil)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "count", Arguments: map[string]any{"n": 0}})
	if err != nil {
		t.Fatalf("the first call after /readyz said 200: %v", err)
	}
	if res.IsError {
		t.Fatalf("the first call after /readyz said 200 failed: %v", res.Content)
	}
}

type readyzAnswer struct {
	code int
	body string
}

func (a *readyzAnswer) Error() string { return http.StatusText(a.code) + ": " + a.body }

func getReadyz(t *testing.T, ctx context.Context, base string) (int, string) {
	t.Helper()
	code, body, err := fixtures.Readiness(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	return code, body
}

// TestReadyWithAnUpstreamThatOffersNoTools holds that a required upstream
// which declares no tools capability (only prompts, say) does not keep the
// gateway unready: it offers no tools, and it is never asked for them.
func TestReadyWithAnUpstreamThatOffersNoTools(t *testing.T) {
	ctx := testCtx(t)
	var asked atomic.Int32
	s := mcp.NewServer(&mcp.Implementation{Name: "prompts-only"}, nil)
	s.AddPrompt(&mcp.Prompt{Name: "greet"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello"}}}}, nil
	})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				asked.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(up.Close)
	url, _ := plumbingGateway(t, ctx, up.URL, "  - name: prompts\n    prefix: \"\"")
	base := strings.TrimSuffix(url, "/mcp")
	testwait.Until(t, ctx, "/readyz answers 200", func() (bool, error) {
		code, body := getReadyz(t, ctx, base)
		return code == http.StatusOK, &readyzAnswer{code, body}
	})
	if n := asked.Load(); n != 0 {
		t.Errorf("the upstream was sent tools/list %d times; it declares no tools", n)
	}
}
