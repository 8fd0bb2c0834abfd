// Package mcpserver is taskgate's downstream MCP server: the tools and
// prompts of every upstream, listed under their namespaced names (or
// unprefixed when an upstream's prefix is empty), their resources,
// templates, completion and subscriptions passed through to the upstream
// that listed them (surface.go), consequential calls turned into operations
// in the ledger (accepted once per tenant, returned as tasks in either
// protocol era or awaited for clients without tasks; an upstream's question
// during one is put to the client through its task, and the answer recorded
// for the worker to take back), pass-through calls forwarded with their
// progress, log messages and the upstream's questions to the client
// (elicitation, sampling, roots), and the HTTP surface around it (browser
// origin checks, authentication, health, readiness, metrics).
//
// The tenant of every request comes from authentication (or, for a stdio
// front, from configuration), never from the request body. Every task lives
// in the ledger; nothing about a task is held only in memory, so any
// replica, or a restarted gateway, answers for it. The package never sends
// a consequential call to its provider itself: the worker does, after the
// acceptance has committed. The one provider call made here is the
// contract's estimate tool, which prices a call before it is accepted.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/internal/buildinfo"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/limits"
	"github.com/taskgate/taskgate/provider"
	"github.com/taskgate/taskgate/taskwire"
	"github.com/taskgate/taskgate/telemetry"
	"github.com/taskgate/taskgate/upstream"
)

// serverVersion is the version clients are told: the one taskgate version
// prints.
func serverVersion() string { return buildinfo.Read().Version }

// implementation is how the gateway's servers name themselves.
func implementation() *mcp.Implementation {
	return &mcp.Implementation{Name: "taskgate", Version: serverVersion()}
}

// Options configure a Gateway.
type Options struct {
	Store   ledger.Store
	Pool    *upstream.Pool
	Config  *config.Config
	Metrics *Metrics
	Logger  *slog.Logger
	Clock   func() time.Time
	// SDKPathOnly is a test switch: every pass-through call takes the SDK
	// path (the go-sdk server and passThrough), none is relayed as bytes,
	// so that the two paths can be compared. It is slower; not for
	// production.
	SDKPathOnly bool
	// Limits, when set, bounds each tenant's consequential calls being
	// accepted at once (limits.accepts_per_tenant); nil accepts each as
	// it comes.
	Limits *limits.Keeper
	// Tracing makes a span of every request; nil makes none.
	Tracing *telemetry.Tracing
}

// Gateway serves the downstream MCP surface.
type Gateway struct {
	store   ledger.Store
	pool    *upstream.Pool
	catalog *provider.Catalog
	cfg     atomic.Pointer[config.Config]
	metrics *Metrics
	log     *slog.Logger
	clock   func() time.Time
	// sdkPathOnly: Options.SDKPathOnly.
	sdkPathOnly bool
	// limits: Options.Limits.
	limits *limits.Keeper
	// tracing: Options.Tracing.
	tracing *telemetry.Tracing

	mu      sync.Mutex
	routes  map[string]*route // by downstream tool name
	servers []*mcp.Server
	listed  map[string]string // downstream tool name -> JSON of the listed tool, to notice changes
	// syncBusy serialises SyncTools.
	syncBusy chan struct{}
	// toolsListed holds the upstreams whose tools have been listed and
	// published: the pool's current ones, each as the one object it is
	// until a reload replaces it.
	toolsListed map[*upstream.Upstream]bool
	// listFailing holds the connected upstreams whose last listing failed,
	// so that a failure is logged as a warning once, not at every sync.
	// Only SyncTools, which syncBusy serialises, touches it.
	listFailing map[*upstream.Upstream]bool
	// listSlow holds the upstreams whose last listing outlasted a sync's
	// patience (SyncTools only); lateListErr, under mu, why such a listing
	// failed in the end, for the next sync to warn of.
	listSlow    map[*upstream.Upstream]bool
	lateListErr map[*upstream.Upstream]error

	// deliveries holds each /mcp request's delivery by its key.
	deliveries sync.Map
	// relayBuffers are reused by forwarded pass-through responses.
	relayBuffers sync.Pool
	// parked holds the bridged calls that wait for their client's answer.
	parked parkedCalls
	// serverInfo is implementation() as JSON, which a 2026-07-28 result
	// relayed from a 2025-11-25 session carries as the gateway's own do.
	serverInfo json.RawMessage

	// stopping ends when Shutdown is called: every wait for an operation
	// (and for a user's answer) ends with it.
	stopping context.Context
	shutdown context.CancelFunc
	// handling counts the MCP requests being handled and the HTTP requests
	// carrying them, for Drain.
	handling inflight

	// surface holds the upstreams' resources and prompts (surface.go).
	surface surfaceState
}

// route is where a downstream tool name leads.
type route struct {
	upstream string
	tool     string
	policy   *config.Tool // nil: pass through
	contract *provider.Contract
	// headerArguments: the tool's input schema sends arguments as HTTP
	// headers too (x-mcp-header), which only the SDK's client builds.
	headerArguments bool
}

func (r *route) consequential() bool { return r.contract != nil }

// newRoute leads to tool of upstream u under contract (nil: it passes
// through). A consequential tool's policy is its contract's: for a tool
// that takes its declared contract, the configuration's policy with that
// contract adopted.
func newRoute(u *config.Upstream, tool string, contract *provider.Contract) *route {
	r := &route{upstream: u.Name, tool: tool, policy: u.Tools[tool], contract: contract}
	if contract != nil {
		r.policy = contract.Policy
	}
	return r
}

// New builds a Gateway. Tools appear as upstreams connect (SyncTools).
func New(opts *Options) (*Gateway, error) {
	if opts == nil || opts.Store == nil || opts.Pool == nil || opts.Config == nil {
		return nil, errors.New("mcpserver: Store, Pool and Config are required")
	}
	g := &Gateway{
		store: opts.Store, pool: opts.Pool, catalog: provider.NewCatalog(opts.Config),
		metrics: opts.Metrics, log: opts.Logger, clock: opts.Clock, sdkPathOnly: opts.SDKPathOnly, limits: opts.Limits, tracing: opts.Tracing,
		routes: map[string]*route{}, listed: map[string]string{}, syncBusy: make(chan struct{}, 1),
		toolsListed: map[*upstream.Upstream]bool{}, listFailing: map[*upstream.Upstream]bool{},
		listSlow: map[*upstream.Upstream]bool{}, lateListErr: map[*upstream.Upstream]error{},
	}
	g.cfg.Store(opts.Config)
	g.stopping, g.shutdown = context.WithCancel(context.Background())
	g.relayBuffers.New = func() any { b := make([]byte, 8<<10); return &b }
	g.serverInfo, _ = json.Marshal(implementation())
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if g.clock == nil {
		g.clock = time.Now
	}
	if g.metrics == nil {
		g.metrics = NewMetrics(nil, nil)
	}
	g.initSurface()
	return g, nil
}

// config is the configuration in force: the one the gateway started with,
// or the last one applied by Reconfigure.
func (g *Gateway) config() *config.Config { return g.cfg.Load() }

// Reconfigure puts cfg in force for what comes next: new calls take its
// tool policies and timings (an accepted operation keeps the policy it was
// accepted under), retiring names the removed upstreams whose
// consequential contracts stay known while their operations run, and the
// tool lists are synced with the pool (which the caller has applied cfg
// to). The fields config.CheckReload guards keep what the gateway started
// with.
func (g *Gateway) Reconfigure(cfg *config.Config, retiring []string) {
	g.cfg.Store(cfg)
	g.catalog.Replace(cfg, retiring)
	g.requestSync()
}

// Catalog returns the contracts of the consequential tools.
func (g *Gateway) Catalog() *provider.Catalog { return g.catalog }

// NewServer returns an MCP server with the gateway's tools and tasks.
// defaultTenant is the tenant of requests that carry no authentication (a
// stdio front); empty means such requests are refused. The server is kept
// in step with the tool list until RemoveServer.
func (g *Gateway) NewServer(defaultTenant string) (*mcp.Server, error) {
	return g.newServer(defaultTenant, nil)
}

// newServer is NewServer with the session options of opts (KeepAlive).
func (g *Gateway) newServer(defaultTenant string, opts *mcp.ServerOptions) (*mcp.Server, error) {
	so := mcp.ServerOptions{}
	if opts != nil {
		so = *opts
	}
	so.Logger = g.log
	g.surfaceOptions(&so)
	// Upstreams' log messages reach clients (askingOptions).
	so.Capabilities.Logging = &mcp.LoggingCapabilities{}
	s := mcp.NewServer(implementation(), &so)
	s.AddSendingMiddleware(restoreRequestedSchema)
	s.AddReceivingMiddleware(g.advertiseSurface)
	h := &host{g: g, defaultTenant: defaultTenant}
	if err := taskwire.Install(s, h, &taskwire.Options{Logger: g.log}); err != nil {
		return nil, err
	}
	s.AddReceivingMiddleware(g.listSurface)
	s.AddReceivingMiddleware(withTenant(defaultTenant))
	// Outermost, so that Drain also waits for the task layer's work.
	s.AddReceivingMiddleware(g.countHandling)
	s.AddReceivingMiddleware(g.observeRequests)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.servers = append(g.servers, s)
	g.installSurface(s)
	for name, raw := range g.listed {
		var t mcp.Tool
		if err := json.Unmarshal([]byte(raw), &t); err == nil {
			s.AddTool(&t, g.passThrough(g.routes[name]))
		}
	}
	return s, nil
}

// RemoveServer stops keeping s in step with the tool list, once the
// session it served (a stdio front) has ended.
func (g *Gateway) RemoveServer(s *mcp.Server) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.servers = slices.DeleteFunc(g.servers, func(x *mcp.Server) bool { return x == s })
}

// Shutdown ends every wait for an operation's end — a client without tasks
// waiting for its result, a 2025-11-25 tasks/result, a user's answer to an
// approval question — so that stopping the HTTP server is not held up by
// them: each answers what is known now (a client without tasks is told to
// call again). Waits that start afterwards end at once.
func (g *Gateway) Shutdown() { g.shutdown() }

// Drain waits until no MCP request is being handled and no answer to one
// is being written, or ctx ends. Call it after the HTTP server has stopped
// and before closing the ledger, so that no handler finds it closed: a
// 2025-11-25 handler can outlive the HTTP request that carried it.
func (g *Gateway) Drain(ctx context.Context) error {
	if err := g.handling.wait(ctx); err != nil {
		return fmt.Errorf("MCP requests still being handled: %w", err)
	}
	return nil
}

// countHandling counts every request a server handles, for Drain.
func (g *Gateway) countHandling(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		g.handling.start()
		defer g.handling.done()
		return next(ctx, method, req)
	}
}

// inflight counts work in progress; wait returns once there is none.
type inflight struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to zero; nil while nobody waits
}

func (f *inflight) start() {
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
}

func (f *inflight) done() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n--; f.n == 0 && f.idle != nil {
		close(f.idle)
		f.idle = nil
	}
}

func (f *inflight) wait(ctx context.Context) error {
	f.mu.Lock()
	if f.n == 0 {
		f.mu.Unlock()
		return nil
	}
	if f.idle == nil {
		f.idle = make(chan struct{})
	}
	idle := f.idle
	f.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SyncTools lists every connected upstream's tools and publishes them under
// their namespaced names; tools that disappeared are withdrawn. The
// upstreams are listed at once, and one whose listing takes longer than
// toolListPatience keeps what it listed before until it answers
// (listTools). Prompts, resources and templates are listed and published
// with them (syncSurface).
func (g *Gateway) SyncTools(ctx context.Context) {
	// One sync at a time: an older listing published after a newer one
	// would bring back what the newer withdrew.
	select {
	case g.syncBusy <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-g.syncBusy }()
	next := map[string]*mcp.Tool{}
	routes := map[string]*route{}
	var listed []*upstream.Upstream
	all := g.pool.All()
	listings := g.listTools(ctx, all)
	for i, u := range all {
		tools, err := listings[i].tools, listings[i].err
		g.mu.Lock()
		lateErr := g.lateListErr[u]
		delete(g.lateListErr, u)
		g.mu.Unlock()
		if errors.Is(err, errListingSlow) && lateErr != nil {
			// Slow again, and the last slow listing failed: that is a
			// failure to warn of.
			err = fmt.Errorf("its last tools/list failed after more than %s: %w", toolListPatience, lateErr)
		}
		if err != nil {
			switch {
			case errors.Is(err, errListingSlow):
				// Not a failure yet: the listing goes on, and its success
				// asks for another sync, its failure is warned of at the
				// next.
				level := slog.LevelDebug
				if !g.listSlow[u] && !g.hasListedTools(u) {
					level = slog.LevelInfo
				}
				g.listSlow[u] = true
				g.log.Log(ctx, level, "the upstream's tools/list is still running; its tools are published when it answers", "upstream", u.Name(), "waited", toolListPatience)
			case errors.Is(err, errNotListed) || g.listFailing[u]:
				g.log.Debug("upstream tools not available yet", "upstream", u.Name(), "err", err)
			case g.hasListedTools(u):
				g.listFailing[u] = true
				g.log.Warn("the upstream is connected but its tools could not be listed; the tools it listed before stay listed, and they are listed again every sync", "upstream", u.Name(), "err", err)
			default:
				g.listFailing[u] = true
				g.log.Warn("the upstream is connected but its tools could not be listed; they are listed again every sync, and a required upstream keeps /readyz at 503 until they are", "upstream", u.Name(), "err", err)
			}
			// Keep what was listed before: a reconnect must not make tools
			// flicker out of the list.
			g.mu.Lock()
			for name, r := range g.routes {
				if r.upstream == u.Name() && !g.catalog.GatewayTool(r.upstream, r.tool) {
					var t mcp.Tool
					if json.Unmarshal([]byte(g.listed[name]), &t) == nil {
						next[name], routes[name] = &t, r
					}
				}
			}
			g.mu.Unlock()
			continue
		}
		listed = append(listed, u)
		delete(g.listSlow, u)
		if g.listFailing[u] {
			delete(g.listFailing, u)
			g.log.Info("the upstream's tools are listed again", "upstream", u.Name())
		}
		// Declared contracts first: the tools they call are the gateway's.
		for _, f := range g.catalog.Discover(u.Name(), tools) {
			if f.Reason == "" {
				g.log.Info("adopted the provider contract the tool declares", "upstream", f.Upstream, "tool", f.Tool)
			} else {
				g.log.Warn("a tool that takes its declared provider contract takes no new calls", "upstream", f.Upstream, "tool", f.Tool, "declaration", f.State, "reason", f.Reason)
			}
		}
		cfg := u.Config()
		for _, t := range tools {
			// The tools the provider contracts call are the gateway's:
			// listed, they would let any tenant act on every tenant's jobs
			// under the gateway's credential.
			if g.catalog.GatewayTool(u.Name(), t.Name) {
				continue
			}
			name := t.Name
			if p := cfg.ToolPrefix(); p != "" {
				name = p + "." + t.Name
			}
			r := newRoute(cfg, t.Name, g.catalog.Contract(u.Name(), t.Name))
			r.headerArguments = hasHeaderArguments(t.InputSchema)
			listed, err := g.downstreamTool(name, t, r)
			if err != nil {
				g.log.Warn("skipping an upstream tool", "upstream", u.Name(), "tool", t.Name, "err", err)
				continue
			}
			if _, dup := next[name]; dup {
				g.log.Warn("two upstreams list the same tool name; keeping the first", "tool", name)
				continue
			}
			next[name], routes[name] = listed, r
		}
	}
	for u := range g.listFailing {
		if !slices.Contains(all, u) {
			delete(g.listFailing, u)
		}
	}
	for u := range g.listSlow {
		if !slices.Contains(all, u) {
			delete(g.listSlow, u)
		}
	}
	g.mu.Lock()
	for u := range g.lateListErr {
		if !slices.Contains(all, u) {
			delete(g.lateListErr, u)
		}
	}
	g.mu.Unlock()
	g.publish(next, routes, all, listed)
	g.syncSurface(ctx)
}

// hasListedTools reports whether u's tools have been published.
func (g *Gateway) hasListedTools(u *upstream.Upstream) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.toolsListed[u]
}

var (
	// errNotListed stands for the tools of an upstream that has no session.
	errNotListed = errors.New("the upstream has no session")
	// errListingSlow stands for the tools of an upstream whose tools/list
	// has not been answered within toolListPatience and goes on.
	errListingSlow = fmt.Errorf("its tools/list has not been answered within %s", toolListPatience)
)

const (
	// toolListTimeout bounds one upstream's tools/list.
	toolListTimeout = 10 * time.Second
	// toolListPatience is how long a sync waits for the upstreams' tool
	// lists before it publishes what it has: one slow or hanging upstream
	// must not hold back every other upstream's tools, nor /readyz.
	toolListPatience = 2 * time.Second
)

// toolListing is one upstream's tools/list, or why there is none.
type toolListing struct {
	tools []*mcp.Tool
	err   error
}

// listTools lists the tools of every connected upstream of all at once,
// and waits up to toolListPatience for them. A listing that takes longer
// goes on in the background, up to toolListTimeout, and asks for another
// sync when it succeeds: the upstream caches its list, so that sync
// publishes it at once. An upstream without a session is not waited for:
// its tools are listed when it connects (its new session asks for a sync).
func (g *Gateway) listTools(ctx context.Context, all []*upstream.Upstream) []toolListing {
	out := make([]toolListing, len(all))
	pending := make([]chan toolListing, len(all))
	for i, u := range all {
		if !u.Connected() {
			out[i].err = errNotListed
			continue
		}
		ch := make(chan toolListing, 1)
		pending[i] = ch
		go func() {
			lctx, cancel := context.WithTimeout(ctx, toolListTimeout)
			defer cancel()
			tools, err := u.Tools(lctx)
			ch <- toolListing{tools, err}
		}()
	}
	got, arrived := awaitListings(ctx, pending, func(i int, l toolListing) {
		if l.err == nil {
			g.requestSync()
			return
		}
		g.mu.Lock()
		g.lateListErr[all[i]] = l.err
		g.mu.Unlock()
	})
	for i, ch := range pending {
		switch {
		case ch == nil:
		case arrived[i]:
			out[i] = got[i]
		case ctx.Err() != nil:
			out[i].err = ctx.Err()
		default:
			out[i].err = errListingSlow
		}
	}
	return out
}

// awaitListings waits up to toolListPatience, and no longer than ctx lasts,
// for the results of the listings pending (nil where none was started), and
// returns those that arrived by then. Each that arrives later is handed to
// late, on a goroutine of its own, with its index.
func awaitListings[T any](ctx context.Context, pending []chan T, late func(i int, result T)) (got []T, arrived []bool) {
	got, arrived = make([]T, len(pending)), make([]bool, len(pending))
	patience := time.NewTimer(toolListPatience)
	defer patience.Stop()
	waiting := true
	for i, ch := range pending {
		if ch == nil {
			continue
		}
		if waiting {
			select {
			case got[i] = <-ch:
				arrived[i] = true
				continue
			case <-patience.C:
				waiting = false
			case <-ctx.Done():
				waiting = false
			}
		}
		select {
		case got[i] = <-ch:
			arrived[i] = true
			continue
		default:
		}
		go func() { late(i, <-ch) }()
	}
	return got, arrived
}

// publish replaces the listed tools on every server, touching only changes,
// and records which of the pool's upstreams (all) the listing holds the
// tools of (listed); an upstream a reload replaced or removed is
// forgotten. Both happen under one lock: a call must not find an
// upstream's tools listed (so an unknown name is refused as unknown)
// before they are published.
func (g *Gateway) publish(next map[string]*mcp.Tool, routes map[string]*route, all, listed []*upstream.Upstream) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for u := range g.toolsListed {
		if !slices.Contains(all, u) {
			delete(g.toolsListed, u)
		}
	}
	for _, u := range listed {
		g.toolsListed[u] = true
	}
	var gone []string
	for name := range g.listed {
		if _, ok := next[name]; !ok {
			gone = append(gone, name)
		}
	}
	for _, s := range g.servers {
		if len(gone) > 0 {
			s.RemoveTools(gone...)
		}
	}
	for _, name := range gone {
		delete(g.listed, name)
		delete(g.routes, name)
	}
	for _, name := range slices.Sorted(maps.Keys(next)) {
		t := next[name]
		raw, err := json.Marshal(t)
		if err != nil {
			continue
		}
		g.routes[name] = routes[name]
		if g.listed[name] == string(raw) {
			continue
		}
		g.listed[name] = string(raw)
		for _, s := range g.servers {
			s.AddTool(t, g.passThrough(routes[name]))
		}
	}
}

// RunToolSync keeps the tool list in step with the upstreams until ctx ends.
func (g *Gateway) RunToolSync(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		g.SyncTools(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// route returns where a downstream tool name leads: a listed tool, or a
// consequential tool the configuration names on an upstream that has no
// session or whose tools are not listed yet, so that a call is answered
// for what it is (upstream_unavailable, or a retry attaching to its
// operation) rather than as an unknown tool. It never leads to a tool of
// the gateway's own: one a reload has just hidden is refused before the
// next sync withdraws it.
func (g *Gateway) route(name string) (*route, bool) {
	g.mu.Lock()
	r, ok := g.routes[name]
	var listed map[*upstream.Upstream]bool
	if !ok {
		listed = maps.Clone(g.toolsListed)
	}
	g.mu.Unlock()
	if ok {
		return r, !g.catalog.GatewayTool(r.upstream, r.tool)
	}
	for _, u := range g.pool.All() {
		cfg := u.Config()
		tool, ok := upstreamTool(cfg, name)
		if !ok || listed[u] && u.Connected() || g.catalog.GatewayTool(u.Name(), tool) {
			continue
		}
		if c := g.catalog.Contract(u.Name(), tool); c != nil {
			return newRoute(cfg, tool, c), true
		}
	}
	return nil, false
}

// upstreamTool is the upstream's own name of the downstream tool name, if
// name is in the namespace of upstream u.
func upstreamTool(u *config.Upstream, name string) (string, bool) {
	if u.ToolPrefix() == "" {
		return name, true
	}
	return strings.CutPrefix(name, u.ToolPrefix()+".")
}

// gatewayTool reports whether the downstream tool name is one the provider
// contracts call (provider.GatewayTools), which no client may call.
func (g *Gateway) gatewayTool(name string) bool {
	for _, u := range g.pool.All() {
		if tool, ok := upstreamTool(u.Config(), name); ok && g.catalog.GatewayTool(u.Name(), tool) {
			return true
		}
	}
	return false
}

// OperationIDArgument is the argument taskgate adds to a consequential
// tool's input schema, and strips before forwarding.
const OperationIDArgument = "operation_id"

// MetaOperationID is the _meta key that may carry the operation ID.
const MetaOperationID = "dev.taskgate/operation-id"

// hasHeaderArguments reports whether an input schema marks any property,
// at any depth, with x-mcp-header.
func hasHeaderArguments(schema any) bool {
	b, err := json.Marshal(schema)
	if err != nil {
		return false
	}
	var v any
	if json.Unmarshal(b, &v) != nil {
		return false
	}
	var walk func(v any) bool
	walk = func(v any) bool {
		switch x := v.(type) {
		case map[string]any:
			if _, ok := x["x-mcp-header"]; ok {
				return true
			}
			for _, e := range x {
				if walk(e) {
					return true
				}
			}
		case []any:
			return slices.ContainsFunc(x, walk)
		}
		return false
	}
	return walk(v)
}

// keyArgument is the argument in which r's provider contract passes the
// provider's key, when it is not operation_id itself; empty for none.
func keyArgument(r *route) string {
	if r.contract == nil || r.contract.KeyArgument() == OperationIDArgument {
		return ""
	}
	return r.contract.KeyArgument()
}

// downstreamTool is the upstream tool as clients see it: renamed, without
// taskgate's reserved _meta keys (which its own client side puts there),
// and for a consequential tool, with the operation_id argument added and
// the contract's key argument taken away.
func (g *Gateway) downstreamTool(name string, t *mcp.Tool, r *route) (*mcp.Tool, error) {
	out := *t
	out.Name = name
	out.Meta = nil
	for k, v := range t.Meta {
		if !strings.HasPrefix(strings.ToLower(k), "dev.taskgate/") {
			if out.Meta == nil {
				out.Meta = mcp.Meta{}
			}
			out.Meta[k] = v
		}
	}
	var schema map[string]any
	b, err := json.Marshal(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	if err := json.Unmarshal(b, &schema); err != nil || schema["type"] != "object" {
		return nil, fmt.Errorf("input schema is not an object schema")
	}
	if r.consequential() {
		props, _ := schema["properties"].(map[string]any)
		props = maps.Clone(props)
		if props == nil {
			props = map[string]any{}
		}
		// The contract's key argument carries taskgate's key, whatever the
		// client sends in it: the model is not shown it, so that its only
		// retry rule is operation_id.
		key := keyArgument(r)
		delete(props, key)
		props[OperationIDArgument] = map[string]any{
			"type": "string",
			"description": "A unique ID for this one logical operation, chosen by you: ASCII letters, digits and " + ledger.IDPunctuation + ". " +
				"Reuse the same value when retrying, so that the work runs and is paid for only once; " +
				"use a new value only for new work.",
			"pattern":   ledger.IDPattern,
			"minLength": 1,
			"maxLength": ledger.MaxIDBytes,
		}
		schema = maps.Clone(schema)
		schema["properties"] = props
		if required, ok := schema["required"].([]any); ok && key != "" {
			schema["required"] = slices.DeleteFunc(slices.Clone(required), func(v any) bool { return v == key })
		}
		note := "This tool has real-world cost or effects; taskgate runs each operation_id once."
		if r.policy.Approval == ledger.ApprovalRequired {
			note += " It runs only under a human's approval for the operation ID."
		}
		out.Description = strings.TrimSpace(t.Description + "\n\n" + note)
	}
	out.InputSchema = schema
	return &out, nil
}

// statelessVersion reports whether v is a stateless protocol version this
// gateway knows (each request names its version; no server-to-client
// requests). Versions are compared as names, never as ordered strings: an
// unknown version is not "later" and gets none of a known one's handling.
func statelessVersion(v string) bool {
	switch v {
	case "2026-07-28":
		return true
	}
	return false
}
