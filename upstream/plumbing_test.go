package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/internal/testwait"
)

// tinyUpstream configures an upstream serving the tiny server.
type tinyUpstream struct {
	name         string
	wantProtocol string
	config       func(t *testing.T) *config.Upstream
}

var (
	tinyHTTPLegacy = tinyUpstream{"http 2025-11-25", protocolLegacy, func(t *testing.T) *config.Upstream {
		_, url := serveTiny(t, false)
		return &config.Upstream{Name: "tiny", URL: url}
	}}
	tinyHTTPModern = tinyUpstream{"http 2026-07-28", protocolExtension, func(t *testing.T) *config.Upstream {
		_, url := serveTiny(t, true)
		return &config.Upstream{Name: "tiny", URL: url}
	}}
	tinyStdioLegacy = tinyUpstream{"stdio 2025-11-25", protocolLegacy, func(*testing.T) *config.Upstream {
		return stdioConfig("tiny", "tiny-legacy")
	}}
	tinyStdioModern = tinyUpstream{"stdio 2026-07-28", protocolExtension, func(*testing.T) *config.Upstream {
		return stdioConfig("tiny", "tiny")
	}}
)

// startTiny starts a pool for the tiny upstream and checks its protocol.
func startTiny(t *testing.T, tu tinyUpstream, opts *Options) (context.Context, *Upstream) {
	t.Helper()
	_, u := startPool(t, tu.config(t), opts)
	ctx := testCtx(t)
	waitReady(ctx, t, u)
	u.mu.Lock()
	got := u.conn.protocol
	u.mu.Unlock()
	if got != tu.wantProtocol {
		t.Fatalf("negotiated protocol %s, want %s", got, tu.wantProtocol)
	}
	return ctx, u
}

func TestProgressArrivesInOrderBeforeTheResult(t *testing.T) {
	const n, runs = 25, 5
	for _, tu := range []tinyUpstream{tinyHTTPLegacy, tinyHTTPModern, tinyStdioLegacy, tinyStdioModern} {
		t.Run(tu.name, func(t *testing.T) {
			ctx, u := startTiny(t, tu, nil)
			for run := range runs {
				// Two concurrent calls on one session: each must get its own
				// notifications only.
				var wg sync.WaitGroup
				for _, label := range []string{"A", "B"} {
					wg.Go(func() {
						var got []*mcp.ProgressNotificationParams
						params := &mcp.CallToolParams{Name: "count", Arguments: countArgs{N: n, Label: label}}
						params.SetProgressToken("agent-" + label)
						res, err := u.CallTool(ctx, params, &CallOptions{
							Progress: func(p *mcp.ProgressNotificationParams) { got = append(got, p) },
						})
						if err != nil {
							t.Errorf("run %d, call %s: %v", run, label, err)
							return
						}
						if text(res) != label {
							t.Errorf("run %d, call %s returned %q", run, label, text(res))
						}
						if len(got) != n {
							t.Errorf("run %d, call %s: %d progress notifications before the result, want %d", run, label, len(got), n)
						}
						for i, p := range got {
							if p.Progress != float64(i+1) || p.Message != label || p.ProgressToken != "agent-"+label {
								t.Errorf("run %d, call %s: notification %d = {progress %v, message %q, token %v}, want {%d, %q, agent-%s}",
									run, label, i, p.Progress, p.Message, p.ProgressToken, i+1, label, label)
								break
							}
						}
						if tok := params.GetProgressToken(); tok != "agent-"+label {
							t.Errorf("run %d, call %s: the caller's params now carry token %v", run, label, tok)
						}
					})
				}
				wg.Wait()
			}
			u.progress.mu.Lock()
			left := len(u.progress.sinks)
			u.progress.mu.Unlock()
			if left != 0 {
				t.Errorf("%d progress routes left after every call returned, want 0", left)
			}
		})
	}
}

func TestElicitationGoesToTheCallThatCausedIt(t *testing.T) {
	tests := []struct {
		upstream tinyUpstream
		// together: both eliciting calls wait for each other's request,
		// which proves they are routed apart while both are pending. Over
		// stdio such calls take turns, so they cannot.
		together bool
	}{
		{tinyHTTPLegacy, true},
		{tinyStdioLegacy, false},
	}
	for _, tt := range tests {
		t.Run(tt.upstream.name, func(t *testing.T) {
			ctx, u := startTiny(t, tt.upstream, nil)
			for run := range 3 {
				var arrived sync.WaitGroup
				arrived.Add(2)
				both := make(chan struct{})
				go func() { arrived.Wait(); close(both) }()

				var wg sync.WaitGroup
				for _, label := range []string{"A", "B"} {
					wg.Go(func() {
						var (
							mu    sync.Mutex
							asked []string
							once  sync.Once
						)
						elicit := func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
							mu.Lock()
							asked = append(asked, p.Message)
							mu.Unlock()
							if tt.together {
								once.Do(arrived.Done)
								select {
								case <-both:
								case <-ctx.Done():
									return nil, ctx.Err()
								}
							}
							return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "answer-" + label}}, nil
						}
						res, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: askArgs{Label: label}}, &CallOptions{Elicit: elicit})
						if err != nil {
							t.Errorf("run %d, call %s: %v", run, label, err)
							return
						}
						if got, want := text(res), "accept:answer-"+label; got != want {
							t.Errorf("run %d, call %s = %q, want %q", run, label, got, want)
						}
						mu.Lock()
						defer mu.Unlock()
						if want := []string{"question for " + label}; !slices.Equal(asked, want) {
							t.Errorf("run %d, call %s was asked %q, want %q", run, label, asked, want)
						}
					})
				}
				wg.Go(func() {
					res, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: askArgs{Label: "C"}}, nil)
					if err != nil {
						t.Errorf("run %d, call C: %v", run, err)
						return
					}
					if got, want := text(res), "decline:"; got != want {
						t.Errorf("run %d, call C without Elicit = %q, want %q", run, got, want)
					}
				})
				wg.Wait()
			}
			u.mu.Lock()
			routes := len(u.routes)
			u.mu.Unlock()
			if routes != 1 {
				t.Errorf("%d sessions route elicitation after the calls, want 1 (the shared one)", routes)
			}
		})
	}
}

func TestProtocolMetaKeysAreStripped(t *testing.T) {
	for _, tu := range []tinyUpstream{tinyHTTPLegacy, tinyHTTPModern} {
		t.Run(tu.name, func(t *testing.T) {
			ctx, u := startTiny(t, tu, nil)
			meta := mcp.Meta{
				"io.modelcontextprotocol/protocolVersion": "1999-01-01",
				"io.modelcontextprotocol/bogus":           true,
				"com.example/trace-id":                    "trace-1",
				"progressToken":                           "stale",
			}
			sent := maps.Clone(meta)
			res, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "meta", Meta: meta}, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(text(res)), &got); err != nil {
				t.Fatalf("meta tool returned %q: %v", text(res), err)
			}
			if got["com.example/trace-id"] != "trace-1" {
				t.Errorf("upstream saw _meta %v, want com.example/trace-id passed through", got)
			}
			for _, k := range []string{"io.modelcontextprotocol/bogus", "progressToken"} {
				if _, ok := got[k]; ok {
					t.Errorf("upstream saw _meta[%q]; want it stripped", k)
				}
			}
			if v := got["io.modelcontextprotocol/protocolVersion"]; v == "1999-01-01" {
				t.Errorf("upstream saw the caller's protocolVersion %v, want the session's", v)
			}
			if !maps.Equal(meta, sent) {
				t.Errorf("CallTool changed the caller's _meta to %v", meta)
			}
		})
	}
}

func TestInputRequiredIsReturnedAsIs(t *testing.T) {
	ctx, u := startTiny(t, tinyHTTPModern, nil)
	res, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "need_input"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.NeedsInput() || res.RequestState != "state-1" || res.InputRequests["confirm"] == nil {
		t.Errorf("need_input = %q (needs input %v, state %q, requests %v), want the input_required result as the upstream sent it",
			text(res), res.NeedsInput(), res.RequestState, res.InputRequests)
	}
}

func TestUnrequestedTaskIsAnError(t *testing.T) {
	ctx, u := startTiny(t, tinyHTTPLegacy, nil)
	_, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "rogue"}, nil)
	var ute *UnrequestedTaskError
	if !errors.As(err, &ute) || ute.Task.ID != "rogue-1" || ute.Upstream != "tiny" || ute.Tool != "rogue" {
		t.Errorf("plain call answered with a task = %v, want an UnrequestedTaskError for rogue-1", err)
	}
}

func TestToolsAreListedAgainAfterListChanged(t *testing.T) {
	s, url := serveTiny(t, false)
	var obs observed
	_, u := startPool(t, &config.Upstream{Name: "tiny", URL: url}, &Options{Observe: obs.observe})
	ctx := testCtx(t)
	waitReady(ctx, t, u)
	for range 2 {
		tools, err := u.Tools(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := toolNames(tools), []string{"ask", "ask_enum", "ask_url", "caps", "chatty", "count", "meta", "need_input", "sample"}; !slices.Equal(got, want) {
			t.Errorf("Tools() = %v, want %v", got, want)
		}
	}
	if got := obs.count("tiny tools/list"); got != 1 {
		t.Errorf("tools/list sent %d times for two Tools calls, want 1", got)
	}
	s.AddTool(&mcp.Tool{Name: "late", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return textResult("late"), nil
	})
	testwait.Until(t, ctx, "the new tool to be listed", func() (bool, error) {
		tools, err := u.Tools(ctx)
		return slices.Contains(toolNames(tools), "late"), err
	})
}
