package mcpserver_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/daemon"
	"github.com/taskgate/taskgate/internal/syncbuf"
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
	up, listing, release := heldUpstream(t)

	cfg := plumbingConfig(t, up.URL, "sqlite:"+filepath.Join(t.TempDir(), "taskgate.db"))
	url, keys := startDaemonWith(t, ctx, &daemon.Options{Config: cfg, ServeAtOnce: true}, "acme")
	t.Cleanup(release) // before the gateway stops
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

	release()
	waitReady(t, ctx, base)
	cs := dialGateway(t, url, keys[0], "first-caller", "", nil)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "count", Arguments: map[string]any{"n": 0}})
	if err != nil {
		t.Fatalf("the first call after /readyz said 200: %v", err)
	}
	if res.IsError {
		t.Fatalf("the first call after /readyz said 200 failed: %v", res.Content)
	}
}

// heldUpstream serves the plumbing server with every tools/list held:
// listing closes when the first arrives, and release lets them all go (it
// is also called before the server closes).
func heldUpstream(t *testing.T) (up *httptest.Server, listing <-chan struct{}, release func()) {
	t.Helper()
	seen, held := make(chan struct{}), make(chan struct{})
	noted := sync.OnceFunc(func() { close(seen) })
	s := plumbingServer("2025-11-25")
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				noted()
				select {
				case <-held:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return next(ctx, method, req)
		}
	})
	release = sync.OnceFunc(func() { close(held) })
	up = httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(up.Close)
	t.Cleanup(release) // before the server closes
	return up, seen, release
}

// plumbingConfig is the harness configuration with the upstream at
// upstreamURL, named plumbing and without a prefix, on the ledger db.
func plumbingConfig(t *testing.T, upstreamURL, db string) *config.Config {
	t.Helper()
	y := strings.Replace(fixtures.ConfigYAML(upstreamURL, "127.0.0.1:0", db, fixtures.ConfigOptions{}), "  - name: hosted_test", "  - name: plumbing\n    prefix: \"\"", 1)
	cfg, err := config.Parse(strings.NewReader(y), "plumbing.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
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
// which does not know tools/list (it declares no tools, and answers
// method-not-found) does not keep the gateway unready: it offers no tools.
func TestReadyWithAnUpstreamThatOffersNoTools(t *testing.T) {
	ctx := testCtx(t)
	s := mcp.NewServer(&mcp.Implementation{Name: "prompts-only"}, nil)
	s.AddPrompt(&mcp.Prompt{Name: "greet"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello"}}}}, nil
	})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: tools/list"}
			}
			return next(ctx, method, req)
		}
	})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(up.Close)
	url, _ := plumbingGateway(t, ctx, up.URL, "  - name: prompts\n    prefix: \"\"")
	waitReady(t, ctx, strings.TrimSuffix(url, "/mcp"))
}

// TestToolsAddedAfterConnectAreListed holds that an upstream which offered
// no tools when it connected has the tools it adds later listed, once it
// says its list changed.
func TestToolsAddedAfterConnectAreListed(t *testing.T) {
	ctx := testCtx(t)
	s := mcp.NewServer(&mcp.Implementation{Name: "later"}, nil)
	s.AddPrompt(&mcp.Prompt{Name: "greet"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(up.Close)
	url, key := plumbingGateway(t, ctx, up.URL, "  - name: later\n    prefix: \"\"")
	waitReady(t, ctx, strings.TrimSuffix(url, "/mcp"))

	addCountTool(s)
	cs := dialGateway(t, url, key, "caller", "", nil)
	waitListed(t, ctx, cs, "count")
}

// waitListed waits until cs is listed the tool name.
func waitListed(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string) {
	t.Helper()
	testwait.Until(t, ctx, "the gateway lists "+name, func() (bool, error) {
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			return false, err
		}
		for _, tool := range res.Tools {
			if tool.Name == name {
				return true, nil
			}
		}
		return false, fmt.Errorf("listed %d tools, none of them %s", len(res.Tools), name)
	})
}

func waitReady(t *testing.T, ctx context.Context, base string) {
	t.Helper()
	testwait.Until(t, ctx, "/readyz answers 200", func() (bool, error) {
		code, body := getReadyz(t, ctx, base)
		return code == http.StatusOK, &readyzAnswer{code, body}
	})
}

// TestNotReadyWhileAReplacedUpstreamIsListed holds that an upstream a
// reload replaces (its URL changed) is not ready until its own tools are
// published: the tools listed from the one it replaced say nothing of it.
func TestNotReadyWhileAReplacedUpstreamIsListed(t *testing.T) {
	ctx := testCtx(t)
	before := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return plumbingServer("2025-11-25") }, nil))
	t.Cleanup(before.Close)
	after, listing, release := heldUpstream(t)

	db := "sqlite:" + filepath.Join(t.TempDir(), "taskgate.db")
	d, err := daemon.Start(ctx, &daemon.Options{Config: plumbingConfig(t, before.URL, db)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(context.Background()) })
	t.Cleanup(release) // before the gateway stops
	waitReady(t, ctx, d.URL)

	if _, err := d.Reload(ctx, plumbingConfig(t, after.URL, db)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-listing:
	case <-ctx.Done():
		t.Fatal("the gateway never listed the replaced upstream's tools")
	}
	if code, body := getReadyz(t, ctx, d.URL); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz while the replaced upstream's tools are being listed = %d %s; want 503", code, body)
	}
	release()
	waitReady(t, ctx, d.URL)
}

// TestAFailingListingIsWarnedOnce holds that a connected upstream whose
// tools/list fails keeps /readyz at 503 and is logged as a warning once,
// not at every sync, and that /readyz answers 200 once a listing succeeds.
// The reason is the upstream's own text, hostile here: terminal escapes, a
// bidi override and a forged log line stay inert in the log.
func TestAFailingListingIsWarnedOnce(t *testing.T) {
	const hostileReason = "the tool index is rebuilding\x1b[2J\x1b]0;pwned\x07 bidi-\u202eexe.txt\nlevel=ERROR msg=forged"
	ctx := testCtx(t)
	var lists atomic.Int32
	var healthy atomic.Bool
	s := plumbingServer("2025-11-25")
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" && !healthy.Load() {
				lists.Add(1)
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: hostileReason}
			}
			return next(ctx, method, req)
		}
	})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(up.Close)
	cfg := plumbingConfig(t, up.URL, "sqlite:"+filepath.Join(t.TempDir(), "taskgate.db"))
	var logs syncbuf.Buffer
	url, _ := startDaemonWith(t, ctx, &daemon.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logs, nil)), ToolSync: 20 * time.Millisecond, ServeAtOnce: true}, "acme")
	base := strings.TrimSuffix(url, "/mcp")

	testwait.Until(t, ctx, "three failed listings", func() (bool, error) {
		return lists.Load() >= 3, fmt.Errorf("%d so far", lists.Load())
	})
	// /readyz is unauthenticated: it says which check failed, never why.
	if code, body := getReadyz(t, ctx, base); code != http.StatusServiceUnavailable || strings.Contains(body, "rebuilding") {
		t.Errorf("/readyz while the upstream's listing fails = %d %s; want 503 without the upstream's reason", code, body)
	}
	const warning = "its tools could not be listed"
	if n := strings.Count(logs.String(), warning); n != 1 {
		t.Errorf("the failing listing was warned of %d times over %d syncs, want once:\n%s", n, lists.Load(), logs.String())
	}
	if !strings.Contains(logs.String(), "the tool index is rebuilding") {
		t.Errorf("the warning does not give the upstream's reason:\n%s", logs.String())
	}
	for _, raw := range []string{"\x1b", "\x07", "\u202e", "\nlevel=ERROR msg=forged"} {
		if strings.Contains(logs.String(), raw) {
			t.Errorf("the log holds the upstream's %q as it is:\n%q", raw, logs.String())
		}
	}

	healthy.Store(true)
	waitReady(t, ctx, base)
	testwait.Until(t, ctx, "the recovery logged", func() (bool, error) {
		return strings.Contains(logs.String(), "tools are listed again"), nil
	})
}

// TestASlowFailingListingIsWarnedOnce holds that a connected upstream
// whose tools/list fails only after the sync stopped waiting for it is
// warned of once, with its reason, not only logged as still running. The
// reason is hostile: its escapes and forged log line stay inert.
func TestASlowFailingListingIsWarnedOnce(t *testing.T) {
	const hostileReason = "the index is broken\x1b[2J\x1b]0;pwned\x07 bidi-\u202eexe.txt\nlevel=ERROR msg=forged"
	ctx := testCtx(t)
	var lists atomic.Int32
	s := plumbingServer("2025-11-25")
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				lists.Add(1)
				// Past the sync's patience (toolListPatience, 2 s).
				select {
				case <-time.After(2500 * time.Millisecond):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: hostileReason}
			}
			return next(ctx, method, req)
		}
	})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(up.Close)
	y := strings.Replace(fixtures.ConfigYAML(up.URL, "127.0.0.1:0", "sqlite:"+filepath.Join(t.TempDir(), "taskgate.db"), fixtures.ConfigOptions{UpstreamTimeout: 30 * time.Second}), "  - name: hosted_test", "  - name: plumbing\n    prefix: \"\"", 1)
	cfg, err := config.Parse(strings.NewReader(y), "plumbing.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	startDaemonWith(t, ctx, &daemon.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logs, nil)), ToolSync: 20 * time.Millisecond, ServeAtOnce: true}, "acme")

	testwait.Until(t, ctx, "four slow listings", func() (bool, error) {
		return lists.Load() >= 4, fmt.Errorf("%d so far", lists.Load())
	})
	var warned int
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "the index is broken") {
			warned++
		}
	}
	if warned != 1 {
		t.Errorf("the slowly failing listing was warned of %d times with its reason over %d listings, want once:\n%s", warned, lists.Load(), logs.String())
	}
	for _, raw := range []string{"\x1b", "\x07", "\u202e", "\nlevel=ERROR msg=forged"} {
		if strings.Contains(logs.String(), raw) {
			t.Errorf("the log holds the upstream's %q as it is:\n%q", raw, logs.String())
		}
	}
}

// TestASlowUpstreamDoesNotHoldBackTheOthers holds that the tools of one
// upstream are published, and /readyz answers 200, while another
// upstream's tools/list is still unanswered: here one that is not required
// and never answers until the test ends. The held listing must still be in
// flight when the gateway is ready (not given up on after its timeout).
func TestASlowUpstreamDoesNotHoldBackTheOthers(t *testing.T) {
	ctx := testCtx(t)
	fast := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return plumbingServer("2025-11-25") }, nil))
	t.Cleanup(fast.Close)

	seen, held := make(chan struct{}), make(chan struct{})
	noted := sync.OnceFunc(func() { close(seen) })
	var ended atomic.Bool
	s := plumbingServer("2025-11-25")
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				noted()
				defer ended.Store(true)
				select {
				case <-held:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return next(ctx, method, req)
		}
	})
	slow := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(slow.Close)
	release := sync.OnceFunc(func() { close(held) })
	t.Cleanup(release) // before the server closes

	y := strings.Replace(fixtures.ConfigYAML(fast.URL, "127.0.0.1:0", "sqlite:"+filepath.Join(t.TempDir(), "taskgate.db"), fixtures.ConfigOptions{}), "  - name: hosted_test", "  - name: plumbing\n    prefix: \"\"", 1)
	y = strings.Replace(y, "upstreams:\n", "upstreams:\n  - name: slow\n    url: "+slow.URL+"\n    prefix: slow\n    required: false\n", 1)
	cfg, err := config.Parse(strings.NewReader(y), "slow.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	url, keys := startDaemonWith(t, ctx, &daemon.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logs, nil)), ServeAtOnce: true}, "acme")
	base := strings.TrimSuffix(url, "/mcp")

	select {
	case <-seen:
	case <-ctx.Done():
		t.Fatal("the gateway never listed the slow upstream's tools")
	}
	waitReady(t, ctx, base)
	if ended.Load() {
		t.Fatal("/readyz said 200 only once the slow upstream's tools/list had ended: the slow upstream held back the fast one")
	}
	cs := dialGateway(t, url, keys[0], "caller", "", nil)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "count", Arguments: map[string]any{"n": 0}})
	if err != nil || res.IsError {
		t.Fatalf("a call to the fast upstream's tool while the slow one lists: %v %v", err, res)
	}
	if ended.Load() {
		t.Fatal("the slow upstream's tools/list ended before the test released it")
	}

	// A listing that is merely slow is said to be so, not warned of as
	// one that failed.
	testwait.Until(t, ctx, "the slow listing logged", func() (bool, error) {
		return strings.Contains(logs.String(), "tools/list is still running"), nil
	})

	// Once the slow upstream answers, its tools are published too, without
	// waiting for the next periodic sync.
	release()
	waitListed(t, ctx, cs, "slow.count")
	if strings.Contains(logs.String(), "could not be listed") {
		t.Errorf("a slow listing was warned of as a failed one:\n%s", logs.String())
	}
}
