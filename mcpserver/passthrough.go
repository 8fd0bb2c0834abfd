package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/upstream"
)

// passThrough forwards a non-consequential call to its upstream with its
// _meta, progress, log messages and questions (askingOptions). Consequential calls never reach it: the
// task layer hands them to the host first.
func (g *Gateway) passThrough(r *route) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r == nil || r.consequential() {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "a consequential tool reached the pass-through path"}
		}
		up, err := g.upstreamFor(ctx, r.upstream, req.Params.Name)
		if err != nil {
			return nil, err
		}
		p := req.Params
		params := &mcp.CallToolParams{
			Name: r.tool, Arguments: p.Arguments, Meta: forwardableMeta(p.Meta),
			InputResponses: p.InputResponses, RequestState: p.RequestState,
		}
		opts := &upstream.CallOptions{}
		if req.ProtocolVersion() >= "2026-07-28" {
			// The upstream asks only what the client can answer, as on
			// the byte relays.
			opts.ClientCapabilities, _ = clientCapabilitiesOf(p.Meta)
		}
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
		g.askingOptions(ctx, req, opts)
		res, err := up.CallTool(ctx, params, opts)
		if err != nil {
			return nil, g.upstreamError(ctx, r, err)
		}
		return res, nil
	}
}

// upstreamError is what the client of a pass-through call hears when the
// upstream call failed: the upstream's own JSON-RPC error as it is, and
// otherwise -32603 naming the upstream but no detail, which may name hosts,
// commands or credentials and goes to the log instead.
func (g *Gateway) upstreamError(ctx context.Context, r *route, err error) error {
	var werr *jsonrpc.Error
	if errors.As(err, &werr) {
		return werr
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	g.log.Warn("a pass-through call failed", "upstream", r.upstream, "tool", r.tool, "err", err)
	e := &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("upstream %s did not answer; try again shortly", r.upstream)}
	e.Data, _ = json.Marshal(map[string]string{"reason": ledger.ReasonUpstreamUnavailable})
	return e
}

// clientCapabilitiesOf returns the client capabilities a 2026-07-28
// request's _meta declares, without the tasks extension.
func clientCapabilitiesOf(m mcp.Meta) (json.RawMessage, bool) {
	v, ok := m[mcp.MetaKeyClientCapabilities]
	if !ok {
		return nil, false
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	return withoutTasksExtension(raw)
}

// forwardableMeta drops the protocol's own keys (the SDK sets its own) and
// taskgate's, and passes the rest through.
func forwardableMeta(m mcp.Meta) mcp.Meta {
	if len(m) == 0 {
		return nil
	}
	out := mcp.Meta{}
	for k, v := range m {
		if lower := strings.ToLower(k); strings.HasPrefix(lower, "io.modelcontextprotocol/") || strings.HasPrefix(lower, "dev.taskgate/") || k == "progressToken" {
			continue
		}
		out[k] = v
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
