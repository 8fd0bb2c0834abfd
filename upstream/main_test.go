package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/sim/providersim"

	"github.com/taskgate/taskgate/internal/syncbuf"
)

// serverEnv makes the test binary serve MCP over its stdin and stdout
// instead of running tests: "providersim", "tiny", "tiny-legacy",
// "recorded" or "recorded-legacy"; or,
// with "crash", exit at once as a server that crashes on start.
const serverEnv = "TASKGATE_UPSTREAM_TEST_SERVER"

const (
	protocolLegacy = "2025-11-25"
	simJob         = 50 * time.Millisecond
	// crashExitCode is the exit status of the "crash" server.
	crashExitCode = 3
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(serverEnv); mode != "" {
		if err := serveStdio(mode); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func serveStdio(mode string) error {
	ctx := context.Background()
	switch mode {
	case "providersim":
		sim := providersim.New(&providersim.Options{JobDuration: simJob})
		defer sim.Close()
		fmt.Fprintln(os.Stderr, "hosted_test simulator serving on stdio")
		return sim.ServeStdio(ctx, os.Stdin, os.Stdout)
	case "tiny", "tiny-legacy":
		return newTinyServer(mode == "tiny-legacy").Run(ctx, &mcp.StdioTransport{})
	case "recorded", "recorded-legacy":
		return serveRecorded(ctx, mode == "recorded-legacy")
	case "crash":
		fmt.Fprintln(os.Stderr, "crashing on start")
		os.Exit(crashExitCode)
		return nil
	default:
		return fmt.Errorf("unknown %s %q", serverEnv, mode)
	}
}

// newTinyServer is a small go-sdk server whose tools exercise the per-call
// plumbing: count sends progress, ask elicits, meta echoes _meta,
// need_input answers input_required (2026-07-28), and the tools of
// addAskingTools log, sample, list roots and elicit enums. legacyOnly restricts it to
// protocol 2025-11-25, where a server may send elicitation/create.
func newTinyServer(legacyOnly bool) *mcp.Server {
	var opts mcp.ServerOptions
	if legacyOnly {
		opts.SupportedProtocolVersions = []string{protocolLegacy}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "tiny", Version: "1.0.0"}, &opts)
	mcp.AddTool(s, &mcp.Tool{Name: "count", Description: "Sends n progress notifications labelled label, then returns label."}, count)
	mcp.AddTool(s, &mcp.Tool{Name: "ask", Description: "Asks the client a question about label and returns the answer."}, ask)
	mcp.AddTool(s, &mcp.Tool{Name: "meta", Description: "Returns the _meta it was called with."}, echoMeta)
	s.AddTool(&mcp.Tool{Name: "need_input", Description: "Needs a confirmation first.", InputSchema: map[string]any{"type": "object"}}, needInput)
	addAskingTools(s)
	s.AddReceivingMiddleware(rogueTasks)
	return s
}

// rogueTaskResult is a 2025-11-25 task reply.
type rogueTaskResult struct {
	mcp.ResultBase
	Task map[string]any `json:"task"`
}

// rogueTasks answers every call of the unlisted tool "rogue" with a task,
// asked for or not.
func rogueTasks(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && method == "tools/call" && p.Name == "rogue" {
			now := time.Now().UTC().Format(time.RFC3339)
			return &rogueTaskResult{Task: map[string]any{"taskId": "rogue-1", "status": "working", "createdAt": now, "lastUpdatedAt": now}}, nil
		}
		return next(ctx, method, req)
	}
}

type countArgs struct {
	N     int    `json:"n"`
	Label string `json:"label"`
}

func count(ctx context.Context, req *mcp.CallToolRequest, args countArgs) (*mcp.CallToolResult, any, error) {
	if token := req.Params.GetProgressToken(); token != nil {
		for i := 1; i <= args.N; i++ {
			err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token, Progress: float64(i), Total: float64(args.N), Message: args.Label,
			})
			if err != nil {
				return nil, nil, err
			}
		}
	}
	return textResult(args.Label), nil, nil
}

type askArgs struct {
	Label string `json:"label"`
}

func answerSchema() map[string]any {
	return map[string]any{
		"type":       "object",
		"properties": map[string]any{"answer": map[string]any{"type": "string"}},
	}
}

func ask(ctx context.Context, req *mcp.CallToolRequest, args askArgs) (*mcp.CallToolResult, any, error) {
	res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "question for " + args.Label, RequestedSchema: answerSchema()})
	if err != nil {
		return nil, nil, err
	}
	answer, _ := res.Content["answer"].(string)
	return textResult(res.Action + ":" + answer), nil, nil
}

func echoMeta(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
	b, err := json.Marshal(req.Params.Meta)
	if err != nil {
		return nil, nil, err
	}
	return textResult(string(b)), nil, nil
}

func needInput(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if len(req.Params.InputResponses) == 0 {
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: "confirm?", RequestedSchema: answerSchema()}},
			RequestState:  "state-1",
		}, nil
	}
	return textResult("answered"), nil
}

func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// text returns a result's first text content.
func text(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			return tc.Text
		}
	}
	return ""
}

// serveTiny serves a tiny server over HTTP: stateful (protocol 2025-11-25)
// or stateless (2026-07-28).
func serveTiny(t *testing.T, stateless bool) (*mcp.Server, string) {
	t.Helper()
	s := newTinyServer(false)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: stateless})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return s, srv.URL
}

// testCtx bounds one test's calls.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// startPool starts a pool of one upstream with short backoffs (unless opts
// sets them) and closes it when the test ends.
func startPool(t *testing.T, cfg *config.Upstream, opts *Options) (*Pool, *Upstream) {
	t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.RestartBackoff == 0 {
		o.RestartBackoff = 20 * time.Millisecond
	}
	if o.MaxRestartBackoff == 0 {
		o.MaxRestartBackoff = 200 * time.Millisecond
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 20 * time.Second
	}
	p := NewPool([]*config.Upstream{cfg}, &o)
	p.Start(context.Background())
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close() = %v, want nil", err)
		}
	})
	u, ok := p.Get(cfg.Name)
	if !ok {
		t.Fatalf("Get(%q) found nothing", cfg.Name)
	}
	return p, u
}

// stdioConfig runs the test binary as a stdio server in the given mode.
func stdioConfig(name, mode string) *config.Upstream {
	return &config.Upstream{Name: name, Command: []string{os.Args[0]}, Env: map[string]string{serverEnv: mode}}
}

// waitReady waits until u answers a ping.
func waitReady(ctx context.Context, t *testing.T, u *Upstream) {
	t.Helper()
	testwait.Until(t, ctx, "upstream "+u.Name()+" to be ready", func() (bool, error) {
		err := u.Ready(ctx)
		return err == nil, err
	})
}

// processGone reports whether pid has exited and been waited for.
func processGone(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return true
	}
	return errors.Is(p.Signal(syscall.Signal(0)), os.ErrProcessDone)
}

// kill kills a process with SIGKILL.
func kill(t *testing.T, pid int) {
	t.Helper()
	p, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(); err != nil {
		t.Fatalf("killing the stdio child %d: %v", pid, err)
	}
}

// observed records what Options.Observe was told.
type observed struct {
	mu      sync.Mutex
	methods []string
}

func (o *observed) observe(upstream, method string, _ time.Duration, _ error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.methods = append(o.methods, upstream+" "+method)
}

func (o *observed) count(entry string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, m := range o.methods {
		if m == entry {
			n++
		}
	}
	return n
}

// logBuffer collects log output safely across goroutines.
type logBuffer struct{ syncbuf.Buffer }

func (b *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// toolNames lists tool names, sorted.
func toolNames(tools []*mcp.Tool) []string {
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// structured decodes a result's structuredContent.
func structured[T any](t *testing.T, res *mcp.CallToolResult) T {
	t.Helper()
	var v T
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return v
}
