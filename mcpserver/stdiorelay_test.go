package mcpserver_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/sim/fixtures"
)

// stdioPlumbingEnv makes the test binary, started by a gateway as a stdio
// upstream, serve the plumbing server with a tool "token" instead of
// running tests: in protocol 2025-11-25 only, or (any other value) in
// every protocol the go-sdk speaks. The gateway runs in the test process,
// so its child inherits the variable from t.Setenv.
const stdioPlumbingEnv = "TASKGATE_MCPSERVER_TEST_STDIO_PLUMBING"

func init() {
	mode := os.Getenv(stdioPlumbingEnv)
	if mode == "" {
		return
	}
	var versions []string
	if mode == "2025-11-25" {
		versions = []string{mode}
	}
	s := plumbingServer(versions...)
	mcp.AddTool(s, &mcp.Tool{Name: "token", Description: "Reports progress once and returns the progress token it was called with."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			tok := req.Params.GetProgressToken()
			if tok != nil {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1}); err != nil {
					return nil, nil, err
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(tok)}}}, nil, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// TestStdioPassThroughIsRelayed: a pass-through call to a stdio upstream,
// from a client of either era, is relayed as bytes on the child's
// connection (the child sees the gateway's relay token, not the SDK
// path's), and the client gets its progress in order and the child's
// result, marked complete and signed by the gateway for a 2026-07-28
// client, as the SDK path answers.
func TestStdioPassThroughIsRelayed(t *testing.T) {
	for _, upstreamEra := range []string{"2025-11-25", "2026-07-28"} {
		t.Run("stdio "+upstreamEra, func(t *testing.T) {
			t.Setenv(stdioPlumbingEnv, upstreamEra)
			url, keys := plumbingGatewayKeys(t, testCtx(t), "", "  - name: plumbing", fixtures.ConfigOptions{Command: []string{os.Args[0]}}, "acme")
			for _, client := range []struct {
				name    string
				connect func(opts *mcp.ClientOptions) *mcp.ClientSession
			}{
				{"2025-11-25 client", func(opts *mcp.ClientOptions) *mcp.ClientSession {
					return legacySession(t, url, keys[0], "legacy-client", false, opts)
				}},
				{"2026-07-28 client", func(opts *mcp.ClientOptions) *mcp.ClientSession { return defaultClient(t, url, keys[0], opts) }},
			} {
				t.Run(client.name, func(t *testing.T) {
					ctx := testCtx(t)
					var progress progressLog
					cs := client.connect(&mcp.ClientOptions{ProgressNotificationHandler: progress.add})
					testwait.Until(t, ctx, "the stdio upstream's tools to be listed", func() (bool, error) {
						tools, err := cs.ListTools(ctx, nil)
						if err != nil {
							return false, err
						}
						return slices.ContainsFunc(tools.Tools, func(tool *mcp.Tool) bool { return tool.Name == "plumbing.token" }), nil
					})
					token := &mcp.CallToolParams{Name: "plumbing.token", Arguments: map[string]any{}}
					token.SetProgressToken("p-1")
					res, err := cs.CallTool(ctx, token)
					if err != nil || res.IsError {
						t.Fatalf("token = %+v, %v", res, err)
					}
					if got := fixtures.ResultText(res); !strings.HasPrefix(got, "taskgate-relay-") {
						t.Errorf("the child was called with progress token %q; want the relay's", got)
					}
					count := &mcp.CallToolParams{Name: "plumbing.count", Arguments: map[string]any{"n": 3}}
					count.SetProgressToken("p-2")
					res, err = cs.CallTool(ctx, count)
					if err != nil || fixtures.ResultText(res) != "counted" {
						t.Fatalf("count = %+v, %v", res, err)
					}
					if got := progress.await(t, 4); !slices.Equal(got, []float64{1, 1, 2, 3}) {
						t.Errorf("progress received %v; want 1, then 1, 2, 3 in order", got)
					}
					if cs.InitializeResult().ProtocolVersion >= "2026-07-28" {
						info, _ := res.Meta[mcp.MetaKeyServerInfo].(map[string]any)
						if res.NeedsInput() || info == nil {
							t.Errorf("a 2026-07-28 client's result %+v; want it complete, with a serverInfo", res)
						}
					}
				})
			}
		})
	}
}

// TestStdioQuestionsOfAnOlderChildReachTheClient: a 2025-11-25 stdio
// child asks with requests that name no call, so a call whose client can
// answer them holds the child's session alone (the SDK path), and the
// client answers the child's question.
func TestStdioQuestionsOfAnOlderChildReachTheClient(t *testing.T) {
	t.Setenv(stdioPlumbingEnv, "2025-11-25")
	url, keys := plumbingGatewayKeys(t, testCtx(t), "", "  - name: plumbing", fixtures.ConfigOptions{Command: []string{os.Args[0]}}, "acme")
	cs := legacySession(t, url, keys[0], "asked-client", false, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "blue"}}, nil
		},
	})
	res, err := cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: "plumbing.ask", Arguments: map[string]any{}})
	if err != nil || fixtures.ResultText(res) != "accept:blue" {
		t.Fatalf("ask = %+v, %v; want accept:blue", res, err)
	}
}
