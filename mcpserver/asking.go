package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/taskwire"
	"github.com/taskgate/taskgate/upstream"
)

// askingOptions fills in what a pass-through call needs to relay its
// upstream's log messages and questions to its client (req's): log
// messages go through the session's Log, which applies the level the client
// set (logging/setLevel, or a 2026-07-28 request's own _meta logLevel);
// elicitation and sampling are relayed when the client declared them, and
// then roots/list too. Only such a call passes them: it gets an upstream
// session to itself (HTTP) or holds a stdio upstream alone, which every
// other call would pay for.
func (g *Gateway) askingOptions(ctx context.Context, req *mcp.CallToolRequest, opts *upstream.CallOptions) {
	ss := req.Session
	if ss == nil {
		return
	}
	log := func(p *mcp.LoggingMessageParams) {
		if err := ss.Log(ctx, p); err != nil {
			g.log.Debug("forward an upstream log message", "err", err)
		}
	}
	if req.ProtocolVersion() >= "2026-07-28" {
		// The client asks per request; a request that does not wants none.
		if level, _ := req.Params.Meta[mcp.MetaKeyLogLevel].(string); level != "" {
			opts.Log, opts.LogLevel = log, mcp.LoggingLevel(level)
		}
		return
	}
	opts.Log = log
	caps := taskwire.SessionClientCapabilities(req)
	if caps == nil || (caps.Elicitation == nil && caps.Sampling == nil) {
		return
	}
	opts.Capabilities = &mcp.ClientCapabilities{Elicitation: caps.Elicitation, Sampling: caps.Sampling, RootsV2: caps.RootsV2}
	if caps.Elicitation != nil {
		opts.Elicit = func(actx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			ctx, done := onCallStream(ctx, actx)
			defer done()
			return elicitAsSent(ctx, ss, p)
		}
		opts.ElicitationComplete = func(_ context.Context, p *mcp.ElicitationCompleteParams) {
			if err := ss.NotifyElicitationComplete(ctx, p); err != nil {
				g.log.Debug("forward the end of an elicitation", "err", err)
			}
		}
	}
	if caps.Sampling != nil {
		opts.CreateMessage = func(actx context.Context, p *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageWithToolsResult, error) {
			ctx, done := onCallStream(ctx, actx)
			defer done()
			return ss.CreateMessageWithTools(ctx, p)
		}
	}
	if caps.RootsV2 != nil {
		opts.ListRoots = func(actx context.Context, p *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
			ctx, done := onCallStream(ctx, actx)
			defer done()
			return ss.ListRoots(ctx, p)
		}
	}
}

// onCallStream is the context to ask a call's client in: the call's, so
// that the go-sdk sends the request on the call's response stream, ended
// also when the upstream's request (asked) ends.
func onCallStream(call, asked context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(call)
	stop := context.AfterFunc(asked, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// requestedSchemaKey carries an elicitation's requested schema past the
// go-sdk's validation of it, to restoreRequestedSchema.
type requestedSchemaKey struct{}

// elicitAsSent relays an upstream's elicitation with its requested schema
// as the upstream sent it. The go-sdk's ServerSession.Elicit checks the
// schema against its own narrower reading of the protocol (it refuses
// titled multi-select enums whose items name their type) and would fail
// the answer; the schema is the upstream's to check, so it travels beside
// the call, and the answer comes back unchecked.
func elicitAsSent(ctx context.Context, ss *mcp.ServerSession, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	if p.RequestedSchema == nil {
		return ss.Elicit(ctx, p)
	}
	q := *p
	q.RequestedSchema = nil
	return ss.Elicit(context.WithValue(ctx, requestedSchemaKey{}, p.RequestedSchema), &q)
}

// restoreRequestedSchema is a sending middleware: it puts the schema
// elicitAsSent set aside back into the elicitation/create it sends.
func restoreRequestedSchema(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		// The go-sdk sends its requests typed by the Params interface.
		schema := ctx.Value(requestedSchemaKey{})
		if r, ok := req.(*mcp.ServerRequest[mcp.Params]); ok && schema != nil && method == "elicitation/create" {
			if p, ok := r.Params.(*mcp.ElicitParams); ok && p != nil {
				q := *p
				q.RequestedSchema = schema
				r.Params = &q
			}
		}
		return next(ctx, method, req)
	}
}
