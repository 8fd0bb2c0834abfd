package mcpserver

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/internal/buildinfo"
	"github.com/taskgate/taskgate/ledger"
)

// Metrics are the gateway's Prometheus collectors, registered on a
// registry of the caller's (never the global one).
type Metrics struct {
	decisions *prometheus.CounterVec
	upstream  *prometheus.HistogramVec
	errors    *prometheus.CounterVec
	connected *prometheus.GaugeVec
	restarts  *prometheus.CounterVec
	// serverOps and clientOps are the OpenTelemetry conventions' MCP
	// operation durations, in this one registry.
	serverOps *prometheus.HistogramVec
	clientOps *prometheus.HistogramVec
}

// NewMetrics registers the collectors on reg (nil: unregistered). When
// store is set, open_tasks reads the ledger at each scrape.
func NewMetrics(reg prometheus.Registerer, store ledger.Store) *Metrics {
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "taskgate_decisions_total", Help: "Attempts decided, by decision and reason.",
		}, []string{"decision", "reason"}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "taskgate_upstream_request_seconds", Help: "Latency of requests to upstream MCP servers.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"upstream", "method", "outcome"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "taskgate_errors_total", Help: "Errors by reason.",
		}, []string{"reason"}),
		connected: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "taskgate_upstream_connected", Help: "1 while the upstream has a session, else 0.",
		}, []string{"upstream"}),
		serverOps: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "mcp_server_operation_duration_seconds", Help: "MCP requests the gateway received, from receipt to answer (OpenTelemetry's mcp.server.operation.duration).",
			Buckets: operationBuckets(),
		}, []string{"mcp_method_name", "gen_ai_tool_name", "error_type"}),
		clientOps: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "mcp_client_operation_duration_seconds", Help: "MCP requests the gateway sent upstream, from sending to answer (OpenTelemetry's mcp.client.operation.duration).",
			Buckets: operationBuckets(),
		}, []string{"mcp_method_name", "taskgate_upstream", "error_type"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "taskgate_upstream_restarts_total", Help: "Times a stdio upstream's process was started again, or an HTTP upstream's session established again.",
		}, []string{"upstream"}),
	}
	if reg == nil {
		return m
	}
	reg.MustRegister(m.decisions, m.upstream, m.errors, m.connected, m.restarts, m.serverOps, m.clientOps, buildInfoGauge(buildinfo.Read()))
	if store != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "taskgate_open_tasks", Help: "Operations that have not ended.",
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			n, err := store.OperationCount(ctx, []ledger.State{ledger.StateAccepted, ledger.StateSending, ledger.StateRunning, ledger.StateInputRequired, ledger.StateReview})
			if err != nil {
				m.errors.WithLabelValues("metrics_ledger_unavailable").Inc()
				return -1
			}
			return float64(n)
		}))
		if c, ok := store.(interface{ Commits() int64 }); ok {
			reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "taskgate_ledger_commits_total", Help: "Write transactions committed on the SQLite ledger since the gateway started (each one sync of its log to disk).",
			}, func() float64 { return float64(c.Commits()) }))
		}
	}
	return m
}

// ObserveUpstream records one upstream request; it fits upstream.Options.Observe.
func (m *Metrics) ObserveUpstream(upstream, method string, d time.Duration, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
		m.errors.WithLabelValues("upstream_" + method).Inc()
	}
	m.upstream.WithLabelValues(upstream, method, outcome).Observe(d.Seconds())
	errType := ""
	if err != nil {
		errType = "_OTHER"
	}
	m.clientOps.WithLabelValues(methodLabel(method), upstream, errType).Observe(d.Seconds())
}

// observeServer records one MCP request the gateway answered; tool is
// the name of a tool the gateway lists, or empty.
func (m *Metrics) observeServer(method, tool, errType string, d time.Duration) {
	m.serverOps.WithLabelValues(methodLabel(method), tool, errType).Observe(d.Seconds())
}

// operationBuckets are the conventions' advice for MCP operation
// durations, in seconds.
func operationBuckets() []float64 {
	return []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}
}

// methodLabel is an MCP method as a metric label: the protocol's own
// methods as they are, anything else a client sent as "other", so that
// no client can add label values.
func methodLabel(method string) string {
	switch method {
	case "initialize", "ping", "tools/list", "tools/call", "resources/list", "resources/read", "resources/templates/list",
		"resources/subscribe", "resources/unsubscribe", "prompts/list", "prompts/get", "completion/complete", "logging/setLevel",
		"tasks/get", "tasks/result", "tasks/list", "tasks/cancel", "tasks/update", "elicitation/create", "sampling/createMessage", "roots/list",
		"notifications/initialized", "notifications/cancelled", "notifications/progress", "notifications/roots/list_changed",
		"notifications/elicitation/complete", "notifications/message", "notifications/tasks/status":
		return method
	}
	return "other"
}

// UpstreamStates shows each configured upstream as not connected and never
// restarted until its supervisor reports otherwise, and returns the func
// that follows its sessions; it fits upstream.Options.StateChanged.
func (m *Metrics) UpstreamStates(cfgs []*config.Upstream) func(upstream string, connected bool) {
	for _, cfg := range cfgs {
		if cfg == nil {
			continue
		}
		m.connected.WithLabelValues(cfg.Name).Set(0)
		m.restarts.WithLabelValues(cfg.Name)
	}
	return m.upstreamConnected
}

func (m *Metrics) upstreamConnected(upstream string, connected bool) {
	v := 0.0
	if connected {
		v = 1
	}
	m.connected.WithLabelValues(upstream).Set(v)
}

// UpstreamRestarted counts one restart of an upstream; it fits
// upstream.Options.Restarted.
func (m *Metrics) UpstreamRestarted(upstream string) {
	m.restarts.WithLabelValues(upstream).Inc()
}

// buildInfoGauge is the constant 1 labelled with what taskgate version
// prints, so a dashboard can tell which build each replica runs.
func buildInfoGauge(info buildinfo.Info) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "taskgate_build_info", Help: "Always 1; its labels are the version, commit and Go version this binary was built from.",
		ConstLabels: prometheus.Labels{"version": info.Version, "revision": info.Revision, "goversion": info.GoVersion},
	})
	g.Set(1)
	return g
}
