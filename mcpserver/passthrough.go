package mcpserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/upstream"
)

// passThrough forwards a non-consequential call to its upstream with its
// _meta, progress and elicitation. Consequential calls never reach it: the
// task layer hands them to the host first.
func (g *Gateway) passThrough(r *route) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r == nil || r.consequential() {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "a consequential tool reached the pass-through path"}
		}
		up, ok := g.pool.Get(r.upstream)
		if !ok {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("upstream %s is not configured", r.upstream)}
		}
		p := req.Params
		params := &mcp.CallToolParams{
			Name: r.tool, Arguments: p.Arguments, Meta: forwardableMeta(p.Meta),
			InputResponses: p.InputResponses, RequestState: p.RequestState,
		}
		opts := &upstream.CallOptions{}
		if tok := p.GetProgressToken(); tok != nil && req.Session != nil {
			ss := req.Session
			opts.Progress = func(n *mcp.ProgressNotificationParams) {
				if err := ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: tok, Progress: n.Progress, Total: n.Total, Message: n.Message,
				}); err != nil {
					g.log.Debug("forward progress", "tool", p.Name, "err", err)
				}
			}
		}
		if req.Session != nil {
			ss := req.Session
			opts.Elicit = func(ectx context.Context, ep *mcp.ElicitParams) (*mcp.ElicitResult, error) {
				return ss.Elicit(ectx, ep)
			}
		}
		return up.CallTool(ctx, params, opts)
	}
}

// forwardableMeta drops the protocol's own keys (the SDK sets its own) and
// taskgate's, and passes the rest through.
func forwardableMeta(m mcp.Meta) mcp.Meta {
	if len(m) == 0 {
		return nil
	}
	out := mcp.Meta{}
	for k, v := range m {
		if strings.HasPrefix(k, "io.modelcontextprotocol/") || strings.HasPrefix(k, "dev.taskgate/") || k == "progressToken" {
			continue
		}
		out[k] = v
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
