package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/telemetry"
	"github.com/taskgate/taskgate/upstream"
)

// observeRequests times every request the SDK's handler serves
// (mcp.server.operation.duration) and, with tracing on, makes its server
// span, in the trace its caller named in _meta or in a traceparent header.
// Nothing of the request but its method, its tool's name, its session and
// its protocol version goes into the span.
func (g *Gateway) observeRequests(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		start := time.Now()
		if !g.tracing.On() {
			res, err := next(ctx, method, req)
			g.metrics.observeServer(method, g.listedTool(toolOf(req)), errorClass(res, err), time.Since(start))
			return res, err
		}
		r := telemetry.Request{Method: method, Transport: telemetry.TransportPipe, Target: toolOf(req)}
		var meta map[string]any
		if p := req.GetParams(); p != nil && !reflect.ValueOf(p).IsNil() {
			meta = p.GetMeta()
		}
		var header map[string][]string
		if extra := req.GetExtra(); extra != nil && extra.Header != nil {
			header, r.Transport = extra.Header, telemetry.TransportTCP
		}
		if s := req.GetSession(); s != nil {
			r.SessionID = s.ID()
		}
		if v, ok := req.(interface{ ProtocolVersion() string }); ok {
			r.ProtocolVersion = v.ProtocolVersion()
		}
		ctx = g.tracing.Extract(ctx, telemetry.AnyMeta(meta), header)
		ctx, span := g.tracing.StartServer(ctx, r)
		defer span.End()
		res, err := next(ctx, method, req)
		errType := errorType(res, err)
		if errType != "" {
			var code int64
			if rpcErr := (*jsonrpc.Error)(nil); errors.As(err, &rpcErr) {
				code = rpcErr.Code
			}
			telemetry.Fail(span, errType, code)
		}
		g.metrics.observeServer(method, g.listedTool(r.Target), errorClass(res, err), time.Since(start))
		return res, err
	}
}

// traceRelay starts the spans of a pass-through call relayed as bytes by
// path p: the server span of the client's request, in the trace its _meta
// or traceparent header names, and within it the client span of the
// upstream request, whose context replaces the client's in the relayed
// _meta. The function it returns ends both; a path that could not serve
// the call after all leaves a span that says so.
func (g *Gateway) traceRelay(q *pathRequest, p passThroughPath) func(served bool) {
	c, r := q.call, q.r
	id := telemetry.RequestIDText(c.id)
	ctx := g.tracing.Extract(r.Context(), telemetry.RawMeta(c.meta), r.Header)
	ctx, server := g.tracing.StartServer(ctx, telemetry.Request{
		Method: "tools/call", Target: c.name, SessionID: r.Header.Get(sessionIDHeader),
		ProtocolVersion: r.Header.Get("Mcp-Protocol-Version"), RequestID: id, Transport: telemetry.TransportTCP,
	})
	transport := telemetry.TransportTCP
	if k := c.up.Kind(); k == upstream.KindStdioSessions || k == upstream.KindStdioStateless {
		transport = telemetry.TransportPipe
	}
	ctx, client := g.tracing.StartClient(ctx, telemetry.Request{Method: "tools/call", Target: c.tool, RequestID: id, Transport: transport},
		telemetry.AttrUpstream.String(c.up.Name()), telemetry.AttrPath.String(p.String()))
	if c.meta == nil {
		c.meta = map[string]json.RawMessage{}
	}
	g.tracing.Inject(ctx, telemetry.RawMeta(c.meta))
	q.r = r.WithContext(ctx)
	return func(served bool) {
		if !served {
			client.AddEvent("the path could not relay the call; the SDK's handler serves it")
		}
		client.End()
		server.End()
	}
}

// toolOf is the name of the tool or prompt a request names, "" for none.
func toolOf(req mcp.Request) string {
	switch p := req.GetParams().(type) {
	case *mcp.CallToolParamsRaw:
		if p != nil {
			return p.Name
		}
	case *mcp.CallToolParams:
		if p != nil {
			return p.Name
		}
	case *mcp.GetPromptParams:
		if p != nil {
			return p.Name
		}
	}
	return ""
}

// listedTool is name if the gateway lists a tool of that name, else "":
// a metric label only ever takes the gateway's own tool names, so that no
// client can add label values.
func (g *Gateway) listedTool(name string) string {
	if name == "" {
		return ""
	}
	if _, ok := g.route(name); ok {
		return name
	}
	return ""
}

// errorClass is how a request ended as a metric label: "" for success,
// tool_error, a JSON-RPC error by its code when the code is one JSON-RPC
// reserves, else _OTHER: an upstream's own codes and reasons, which it
// could vary at will, never become label values.
func errorClass(res mcp.Result, err error) string {
	var rpcErr *jsonrpc.Error
	switch {
	case errors.As(err, &rpcErr) && rpcErr.Code >= -32768 && rpcErr.Code <= -32000:
		return strconv.FormatInt(rpcErr.Code, 10)
	case err != nil:
		return "_OTHER"
	}
	if r, ok := res.(*mcp.CallToolResult); ok && r != nil && r.IsError {
		return "tool_error"
	}
	return ""
}

// errorType is error.type of how a request ended, "" for success: a
// JSON-RPC error by its reason code (data.reason, which the gateway sets)
// or its code, a tool's error result as tool_error.
func errorType(res mcp.Result, err error) string {
	var rpcErr *jsonrpc.Error
	switch {
	case errors.As(err, &rpcErr):
		return reasonOf(rpcErr)
	case err != nil:
		return "_OTHER"
	}
	if r, ok := res.(*mcp.CallToolResult); ok && r != nil && r.IsError {
		return "tool_error"
	}
	return ""
}

// reasonOf is a gateway error's data.reason, else its code as text.
func reasonOf(e *jsonrpc.Error) string {
	var data struct {
		Reason string `json:"reason"`
	}
	if len(e.Data) > 0 && json.Unmarshal(e.Data, &data) == nil && isReasonCode(data.Reason) {
		return data.Reason
	}
	return strconv.FormatInt(e.Code, 10)
}

// isReasonCode: s looks like a reason code (operation_archived), not a
// sentence an upstream wrote, so it may name a kind of error in a span.
func isReasonCode(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// traceAttempt adds an attempt's operation, tenant and decision to the
// span serving it.
func traceAttempt(ctx context.Context, tenant, operationID string, d ledger.Decision) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(telemetry.AttrTenant.String(tenant), telemetry.AttrOperationID.String(operationID), telemetry.AttrDecision.String(string(d)))
}
