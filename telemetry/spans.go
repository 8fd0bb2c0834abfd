package telemetry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Transport is network.transport of an MCP request: tcp for HTTP, pipe
// for stdio.
type Transport string

// The transports MCP runs on, as the conventions name them.
const (
	TransportTCP  Transport = "tcp"
	TransportPipe Transport = "pipe"
)

// Request describes one MCP request for its span. Every field is a name
// or an ID; none is ever an argument.
type Request struct {
	// Method is mcp.method.name, such as tools/call.
	Method string
	// Target is the tool's (or prompt's) name: gen_ai.tool.name, and the
	// second word of the span's name. Empty for none.
	Target string
	// SessionID is the MCP session, recorded as mcp.session.id by a short
	// digest: the ID itself is a handle to the session.
	SessionID string
	// ProtocolVersion is mcp.protocol.version.
	ProtocolVersion string
	// RequestID is the JSON-RPC id as its JSON text, jsonrpc.request.id.
	RequestID string
	Transport Transport
}

// The attributes taskgate adds to the conventions' own.
const (
	AttrOperationID = attribute.Key("taskgate.operation_id")
	AttrTenant      = attribute.Key("taskgate.tenant")
	AttrDecision    = attribute.Key("taskgate.decision")
	AttrUpstream    = attribute.Key("taskgate.upstream")
	AttrTool        = attribute.Key("taskgate.tool")
	AttrRemoteJob   = attribute.Key("taskgate.remote_job_id")
	AttrPath        = attribute.Key("taskgate.path")
)

func (r *Request) attributes() []attribute.KeyValue {
	kv := make([]attribute.KeyValue, 0, 8)
	kv = append(kv, semconv.McpMethodNameKey.String(r.Method))
	if r.Target != "" && r.Method == "tools/call" {
		kv = append(kv, semconv.GenAIToolName(r.Target), semconv.GenAIOperationNameExecuteTool)
	}
	if r.SessionID != "" {
		kv = append(kv, semconv.McpSessionID(SessionDigest(r.SessionID)))
	}
	if r.ProtocolVersion != "" {
		kv = append(kv, semconv.McpProtocolVersion(r.ProtocolVersion))
	}
	if r.RequestID != "" {
		kv = append(kv, semconv.JSONRPCRequestID(r.RequestID))
	}
	if r.Transport != "" {
		kv = append(kv, semconv.NetworkTransportKey.String(string(r.Transport)))
	}
	return kv
}

// SpanName is the conventions' "{mcp.method.name} {target}".
func (r *Request) SpanName() string {
	if r.Target == "" {
		return r.Method
	}
	return r.Method + " " + r.Target
}

// SessionDigest is what a span records of a session ID: the first 16 hex
// digits of its SHA-256, enough to tell sessions apart in one trace store.
func SessionDigest(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:8])
}

// RequestIDText is a JSON-RPC id as jsonrpc.request.id records it: a
// string's text, or a number's digits.
func RequestIDText(id json.RawMessage) string {
	var s string
	if json.Unmarshal(id, &s) == nil {
		return s
	}
	if n, err := strconv.ParseInt(string(id), 10, 64); err == nil {
		return strconv.FormatInt(n, 10)
	}
	return ""
}

// StartServer starts the span of a request the gateway received. ctx
// should hold the caller's trace context (Extract).
func (t *Tracing) StartServer(ctx context.Context, r Request) (context.Context, trace.Span) {
	if t == nil {
		return ctx, noop.Span{}
	}
	return t.tracer.Start(ctx, r.SpanName(), trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(r.attributes()...))
}

// StartClient starts the span of a request the gateway sends upstream;
// Inject then puts its context in the request's _meta.
func (t *Tracing) StartClient(ctx context.Context, r Request, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if t == nil {
		return ctx, noop.Span{}
	}
	return t.tracer.Start(ctx, r.SpanName(), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(append(r.attributes(), attrs...)...))
}

// StartStep starts the span of one piece of the gateway's own work, such
// as acceptance or a worker's send, under ctx's span and linked to links.
func (t *Tracing) StartStep(ctx context.Context, name string, links []trace.Link, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if t == nil {
		return ctx, noop.Span{}
	}
	return t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithLinks(links...), trace.WithAttributes(attrs...))
}

// Fail marks span as failed with error.type errType (a reason code or a
// JSON-RPC error code, never a message with caller text) and, for a
// JSON-RPC error, rpc.response.status_code.
func Fail(span trace.Span, errType string, rpcCode int64) {
	if !span.IsRecording() {
		return
	}
	span.SetStatus(codes.Error, errType)
	span.SetAttributes(semconv.ErrorTypeKey.String(errType))
	if rpcCode != 0 {
		span.SetAttributes(semconv.RPCResponseStatusCode(strconv.FormatInt(rpcCode, 10)))
	}
}

// Extract returns ctx with the trace context a request carries: in its
// _meta (SEP-414), else in its HTTP traceparent header. A malformed
// value is ignored, as the W3C propagator ignores it.
func (t *Tracing) Extract(ctx context.Context, meta propagation.TextMapCarrier, header http.Header) context.Context {
	if t == nil {
		return ctx
	}
	if meta != nil && meta.Get("traceparent") != "" {
		return t.prop.Extract(ctx, meta)
	}
	if header != nil {
		return t.prop.Extract(ctx, propagation.HeaderCarrier(header))
	}
	return ctx
}

// Inject writes ctx's trace context into meta: traceparent, and
// tracestate and baggage when there are any.
func (t *Tracing) Inject(ctx context.Context, meta propagation.TextMapCarrier) {
	if t == nil {
		return
	}
	t.prop.Inject(ctx, meta)
}

// Parent is the W3C traceparent of ctx's span, which the ledger keeps on
// an attempt; "" when ctx has no sampled span.
func Parent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	m := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), m)
	return m["traceparent"]
}

// remote is the span context a stored traceparent names.
func remote(traceparent string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	return trace.SpanContextFromContext(ctx)
}

// Within returns ctx under the span a stored traceparent names (an
// attempt's), so that work done later, on any replica, joins its trace;
// links are the other traceparents, such as later attempts'. A stored
// value that is empty or malformed leaves ctx as it is.
func Within(ctx context.Context, parent string, others []string) (context.Context, []trace.Link) {
	if sc := remote(parent); sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	var links []trace.Link
	for _, o := range slices.Compact(slices.Sorted(slices.Values(others))) {
		if o == parent {
			continue
		}
		if sc := remote(o); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	return ctx, links
}

// AnyMeta carries trace context in a go-sdk request's _meta.
type AnyMeta map[string]any

// Get implements propagation.TextMapCarrier.
func (m AnyMeta) Get(key string) string {
	s, _ := m[key].(string)
	return s
}

// Set implements propagation.TextMapCarrier.
func (m AnyMeta) Set(key, value string) { m[key] = value }

// Keys implements propagation.TextMapCarrier.
func (m AnyMeta) Keys() []string { return slices.Collect(maps.Keys(m)) }

// RawMeta carries trace context in a relayed request's _meta, whose values
// are kept as JSON.
type RawMeta map[string]json.RawMessage

// Get implements propagation.TextMapCarrier.
func (m RawMeta) Get(key string) string {
	var s string
	if raw, ok := m[key]; ok && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

// Set implements propagation.TextMapCarrier.
func (m RawMeta) Set(key, value string) {
	raw, err := json.Marshal(value)
	if err == nil {
		m[key] = raw
	}
}

// Keys implements propagation.TextMapCarrier.
func (m RawMeta) Keys() []string { return slices.Collect(maps.Keys(m)) }
