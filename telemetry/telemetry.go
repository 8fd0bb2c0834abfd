// Package telemetry holds the gateway's traces: the tracer provider and
// its OTLP exporter, the spans of the OpenTelemetry semantic conventions
// for MCP (semconv v1.40.0, development status), and the W3C trace
// context a request carries in params._meta (SEP-414).
//
// A span attribute is only ever a method, a name, an ID, a version or a
// decision: never an argument's value, a header's value, a URL's
// credential or a key. Nothing here decides anything about a call; with
// tracing off every function costs a nil check.
package telemetry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/internal/buildinfo"
)

// instrumentation names the tracer, as the conventions ask of a library.
const instrumentation = "github.com/taskgate/taskgate"

// Tracing makes the gateway's spans. A nil *Tracing, like Off's, makes
// none and costs nothing.
type Tracing struct {
	tracer   trace.Tracer
	provider *sdktrace.TracerProvider
	prop     propagation.TextMapPropagator
	endpoint string
}

// Off is tracing that records nothing.
func Off() *Tracing { return nil }

// On says whether spans are recorded at all.
func (t *Tracing) On() bool { return t != nil }

// Endpoint is where spans go, without any credential, for the log.
func (t *Tracing) Endpoint() string {
	if t == nil {
		return ""
	}
	return t.endpoint
}

// Provider is the tracer provider, for libraries that take one; nil when
// off.
func (t *Tracing) Provider() trace.TracerProvider {
	if t == nil {
		return noop.NewTracerProvider()
	}
	return t.provider
}

// Shutdown sends the spans not yet exported and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// Settings are what New reads besides the configuration.
type Settings struct {
	// Getenv reads the OTEL_* environment; nil reads none.
	Getenv func(string) string
	Logger *slog.Logger
	// Exporter replaces the OTLP exporter (tests of the span shapes).
	Exporter sdktrace.SpanExporter
}

// New starts tracing as c and the OTEL_* environment say: on when
// telemetry.traces is set or the environment names an OTLP endpoint, and
// off (nil) otherwise or when OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none. The exporter reads the rest of the standard
// OTEL_EXPORTER_OTLP_* variables itself; the file's values win.
func New(ctx context.Context, c config.Telemetry, s Settings) (*Tracing, error) {
	getenv := s.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	log := s.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(getenv("OTEL_TRACES_EXPORTER"), "none") {
		return Off(), nil
	}
	tr := c.Traces
	if tr == nil {
		if getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && s.Exporter == nil {
			return Off(), nil
		}
		tr = &config.Traces{}
	}
	plan, err := planExport(tr, getenv)
	if err != nil {
		return nil, err
	}
	exp := s.Exporter
	if exp == nil {
		if exp, err = plan.exporter(ctx); err != nil {
			return nil, fmt.Errorf("telemetry.traces: start the %s exporter: %w", plan.protocol, err)
		}
	}
	res, err := newResource(ctx, c.Resource)
	if err != nil {
		return nil, err
	}
	// A caller's sampled trace is kept whatever the ratio, so that one
	// agent's trace is never cut at the gateway.
	sampler := sdktrace.ParentBased(sdktrace.TraceIDRatioBased(plan.ratio))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Second)),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler),
	)
	log.Info("traces are exported", "protocol", plan.protocol, "endpoint", plan.shown, "sampling_ratio", plan.ratio)
	return &Tracing{
		tracer:   tp.Tracer(instrumentation, trace.WithInstrumentationVersion(buildinfo.Read().Version), trace.WithSchemaURL(semconv.SchemaURL)),
		provider: tp,
		prop:     propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		endpoint: plan.shown,
	}, nil
}

// exportPlan is what the exporter is made from.
type exportPlan struct {
	protocol config.TraceProtocol
	// endpoint is the file's URL, empty to take the environment's.
	endpoint *url.URL
	shown    string
	headers  map[string]string
	ratio    float64
}

// planExport decides the exporter from the file and the environment.
func planExport(tr *config.Traces, getenv func(string) string) (*exportPlan, error) {
	p := &exportPlan{protocol: tr.Protocol, headers: maps.Clone(tr.Headers), ratio: 1}
	if p.protocol == "" {
		p.protocol = config.TraceProtocol(cmp.Or(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), string(config.TraceProtocolHTTP)))
	}
	switch p.protocol {
	case config.TraceProtocolHTTP, config.TraceProtocolGRPC:
	default:
		return nil, fmt.Errorf("telemetry: the OTLP protocol %q from the environment is neither %s nor %s", p.protocol, config.TraceProtocolHTTP, config.TraceProtocolGRPC)
	}
	if tr.SamplingRatio != nil {
		p.ratio = *tr.SamplingRatio
	}
	raw := tr.Endpoint
	if raw == "" {
		raw = cmp.Or(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
		p.shown = shownURL(raw)
		return p, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("telemetry.traces.endpoint: %w", err)
	}
	if p.protocol == config.TraceProtocolHTTP && (u.Path == "" || u.Path == "/") {
		u.Path = "/v1/traces"
	}
	p.endpoint = u
	p.shown = shownURL(u.String())
	return p, nil
}

func (p *exportPlan) exporter(ctx context.Context) (*otlptrace.Exporter, error) {
	if p.protocol == config.TraceProtocolGRPC {
		var opts []otlptracegrpc.Option
		if p.endpoint != nil {
			opts = append(opts, otlptracegrpc.WithEndpointURL(p.endpoint.String()))
		}
		if len(p.headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(p.headers))
		}
		return otlptracegrpc.New(ctx, opts...)
	}
	var opts []otlptracehttp.Option
	if p.endpoint != nil {
		opts = append(opts, otlptracehttp.WithEndpointURL(p.endpoint.String()))
	}
	if len(p.headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(p.headers))
	}
	return otlptracehttp.New(ctx, opts...)
}

// shownURL is raw without user information, query or fragment, for logs.
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(set in the environment)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

func newResource(ctx context.Context, attrs map[string]string) (*resource.Resource, error) {
	kv := []attribute.KeyValue{semconv.ServiceName("taskgate"), semconv.ServiceVersion(buildinfo.Read().Version)}
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		kv = append(kv, attribute.String(k, attrs[k]))
	}
	// Later sources win: the defaults, then the environment, then the file.
	res, err := resource.New(ctx, resource.WithAttributes(kv[:2]...), resource.WithFromEnv(), resource.WithAttributes(kv[2:]...))
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("telemetry.resource: %w", err)
	}
	return res, nil
}
