package telemetry

import (
	"context"
	"encoding/json"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskgate/taskgate/config"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestNewIsOffUnlessConfigured(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		cfg  config.Telemetry
		env  map[string]string
		on   bool
	}{
		{"nothing", config.Telemetry{}, nil, false},
		{"the file", config.Telemetry{Traces: &config.Traces{Endpoint: "http://127.0.0.1:4318"}}, nil, true},
		{"the environment", config.Telemetry{}, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{"traces' own variable", config.Telemetry{}, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{"the SDK disabled", config.Telemetry{Traces: &config.Traces{Endpoint: "http://127.0.0.1:4318"}}, map[string]string{"OTEL_SDK_DISABLED": "true"}, false},
		{"no traces exporter", config.Telemetry{Traces: &config.Traces{Endpoint: "http://127.0.0.1:4318"}}, map[string]string{"OTEL_TRACES_EXPORTER": "none"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := New(ctx, tt.cfg, Settings{Getenv: env(tt.env)})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Shutdown(ctx)
			if tr.On() != tt.on {
				t.Errorf("On() = %v, want %v", tr.On(), tt.on)
			}
		})
	}
}

func TestPlanExport(t *testing.T) {
	half := 0.5
	tests := []struct {
		name     string
		tr       config.Traces
		env      map[string]string
		protocol config.TraceProtocol
		endpoint string // "" for the environment's
		shown    string
		ratio    float64
	}{
		{"http adds the traces path", config.Traces{Endpoint: "http://c:4318"}, nil, config.TraceProtocolHTTP, "http://c:4318/v1/traces", "http://c:4318/v1/traces", 1},
		{"http keeps a path", config.Traces{Endpoint: "https://c/otlp/traces"}, nil, config.TraceProtocolHTTP, "https://c/otlp/traces", "https://c/otlp/traces", 1},
		{"grpc takes the URL as it is", config.Traces{Endpoint: "http://c:4317", Protocol: config.TraceProtocolGRPC, SamplingRatio: &half}, nil, config.TraceProtocolGRPC, "http://c:4317", "http://c:4317", 0.5},
		{"the environment's protocol", config.Traces{}, map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, config.TraceProtocolGRPC, "", "http://c:4317", 1},
		{"the environment's URL shown without its credential", config.Traces{}, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://u:secret@c/v1/traces?k=secret"}, config.TraceProtocolHTTP, "", "https://c/v1/traces", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := planExport(&tt.tr, env(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if p.endpoint != nil {
				got = p.endpoint.String()
			}
			if p.protocol != tt.protocol || got != tt.endpoint || p.shown != tt.shown || p.ratio != tt.ratio {
				t.Errorf("plan = %s %q shown %q ratio %v; want %s %q shown %q ratio %v", p.protocol, got, p.shown, p.ratio, tt.protocol, tt.endpoint, tt.shown, tt.ratio)
			}
		})
	}
	if _, err := planExport(&config.Traces{}, env(map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})); err == nil {
		t.Error("an unknown protocol in the environment was taken")
	}
}

// TestSpansCarryTheCallersTrace: a server span joins the trace its caller
// put in _meta (or, without one, in the traceparent header); its client
// span's context goes out in _meta; the ledger's traceparent puts later
// work in the same trace, linked to the other attempts.
func TestSpansCarryTheCallersTrace(t *testing.T) {
	ctx := context.Background()
	rec := tracetest.NewInMemoryExporter()
	tr, err := New(ctx, config.Telemetry{}, Settings{Exporter: rec})
	if err != nil {
		t.Fatal(err)
	}
	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	in := RawMeta{"traceparent": json.RawMessage(`"` + caller + `"`)}
	sctx, server := tr.StartServer(tr.Extract(ctx, in, map[string][]string{"Traceparent": {"00-11111111111111111111111111111111-2222222222222222-01"}}),
		Request{Method: "tools/call", Target: "hosted_test.run_suite", SessionID: "s-1", RequestID: "7", Transport: TransportTCP})
	cctx, client := tr.StartClient(sctx, Request{Method: "tools/call", Target: "run_suite", Transport: TransportPipe})
	out := AnyMeta{"other": 1}
	tr.Inject(cctx, out)
	client.End()
	server.End()
	if got := trace.SpanContextFromContext(sctx).TraceID().String(); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("the server span is in trace %s, want the caller's from _meta", got)
	}
	if tp := out.Get("traceparent"); tp != Parent(cctx) || out["other"] != 1 {
		t.Errorf("the upstream's _meta = %v; want the client span's traceparent %s beside what it held", out, Parent(cctx))
	}
	header := tr.Extract(ctx, RawMeta{}, map[string][]string{"Traceparent": {caller}})
	if !trace.SpanContextFromContext(header).IsRemote() {
		t.Error("a traceparent header without _meta was not taken")
	}
	bad := tr.Extract(ctx, RawMeta{"traceparent": json.RawMessage(`"00-zz-yy-01"`)}, nil)
	if trace.SpanContextFromContext(bad).IsValid() {
		t.Error("a malformed traceparent was taken")
	}

	later := Parent(sctx)
	wctx, links := Within(ctx, Parent(sctx), []string{later, "garbage", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b9-01"})
	_, step := tr.StartStep(wctx, "taskgate.send", links)
	step.End()
	if len(links) != 1 || links[0].SpanContext.SpanID().String() != "00f067aa0ba902b9" {
		t.Errorf("links = %v, want only the other attempt's", links)
	}
	if err := tr.provider.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	spans := rec.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3", len(spans))
	}
	if spans[0].Name != "run_suite" && spans[0].Name != "tools/call run_suite" {
		t.Errorf("the client span is named %q", spans[0].Name)
	}
	attrs := map[string]string{}
	for _, kv := range spans[1].Attributes {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	want := map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "hosted_test.run_suite", "gen_ai.operation.name": "execute_tool",
		"mcp.session.id": SessionDigest("s-1"), "jsonrpc.request.id": "7", "network.transport": "tcp"}
	for k, v := range want {
		if attrs[k] != v {
			t.Errorf("server span %s = %q, want %q", k, attrs[k], v)
		}
	}
	if spans[1].Name != "tools/call hosted_test.run_suite" || spans[1].SpanKind != trace.SpanKindServer {
		t.Errorf("server span %q of kind %s", spans[1].Name, spans[1].SpanKind)
	}
	if spans[2].Parent.SpanID() != spans[1].SpanContext.SpanID() || spans[2].SpanContext.TraceID() != spans[1].SpanContext.TraceID() {
		t.Error("the step is not a child of the attempt the ledger named")
	}
}

func TestOffCostsNothing(t *testing.T) {
	var tr *Tracing
	ctx := context.Background()
	c, span := tr.StartServer(ctx, Request{Method: "tools/call"})
	if c != ctx || span.IsRecording() {
		t.Error("tracing off made a recording span")
	}
	m := AnyMeta{}
	tr.Inject(ctx, m)
	if len(m) != 0 || Parent(ctx) != "" || tr.Shutdown(ctx) != nil {
		t.Error("tracing off wrote a trace context")
	}
}

func TestRequestIDText(t *testing.T) {
	for raw, want := range map[string]string{`7`: "7", `"abc"`: "abc", `1.5`: "", `null`: "", `{}`: ""} {
		if got := RequestIDText(json.RawMessage(raw)); got != want {
			t.Errorf("RequestIDText(%s) = %q, want %q", raw, got, want)
		}
	}
}
