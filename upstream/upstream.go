package upstream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/internal/inert"
	"github.com/taskgate/taskgate/taskwire"
	"github.com/taskgate/taskgate/telemetry"
)

// ErrNotConnected is wrapped by the error of a request that was never sent
// because its upstream had no connection before the request's deadline.
var ErrNotConnected = errors.New("upstream is not connected")

// protocolExtension is the first protocol version without server-to-client
// requests (and with the tasks extension).
const protocolExtension = "2026-07-28"

// childWaitDelay bounds how long a stdio child's stderr may stay open after
// the child exited (a grandchild holding it), so waiting for a child ends.
const childWaitDelay = 2 * time.Second

// An Upstream is one configured MCP server and its managed connection. Its
// methods are safe for concurrent use.
type Upstream struct {
	cfg          *config.Upstream
	logger       *slog.Logger
	observe      func(upstream, method string, d time.Duration, err error)
	tracing      *telemetry.Tracing
	stateChanged func(upstream string, connected bool)
	restarted    func(upstream string)
	timeout      time.Duration
	minBackoff   time.Duration
	maxBackoff   time.Duration
	// restartBudget is max_restarts_per_minute (stdio upstreams).
	restartBudget int

	// cfg is the configuration the upstream connects by; latest is the
	// newest with the same connection (tools, prefix, required).
	latest atomic.Pointer[config.Upstream]

	client   *mcp.Client
	setupErr error // the upstream cannot be connected at all
	// stop ends the supervisor; done is closed when it has returned.
	stop context.CancelFunc
	done chan struct{}
	// httpTransport and httpClient are set for HTTP upstreams only.
	httpTransport *http.Transport
	httpClient    *http.Client
	// sdkURL is the URL the SDK's sessions are given: the configured one
	// without userinfo and query, which httpClient's round tripper adds
	// back, so that no error the SDK or net/http words names a credential.
	sdkURL   string
	progress progressRouter
	logs     logRouter
	tokens   atomic.Uint64
	// impl is the gateway's client information; relay is the session
	// RelayCall relays in (HTTP upstreams).
	impl  *mcp.Implementation
	relay relaySession
	// asking holds the relay sessions for clients that can be asked, by
	// the capabilities they declare, under askingMu.
	askingMu sync.Mutex
	asking   map[string]*relaySession
	// suspect asks the supervisor to check the session with a ping.
	suspect chan struct{}
	// toolsBusy serialises tools/list refreshes.
	toolsBusy chan struct{}

	mu       sync.Mutex
	conn     *conn         // nil while disconnected
	changed  chan struct{} // closed and replaced whenever conn or closed changes
	lastErr  error         // why the upstream is not connected
	lastEra  taskwire.Era  // what the last session offered
	closed   bool
	routes   map[*mcp.ClientSession]*askRoute
	toolsGen uint64 // bumped by reconnects and tools/list_changed
	tools    toolCache
	closeErr error // from stopping the last stdio child on shutdown

	// taskAskers, under mu, answer the elicitations of the 2025-11-25
	// upstream tasks whose tasks/result a TaskResult is reading, by task ID.
	taskAskers map[string]elicitFunc

	// unavailable, under mu, is set while a stdio upstream waits out its
	// spent restart budget: calls fail at once instead of waiting.
	unavailable *restartBudgetError

	surface surface

	// tenants are the upstream as each tenant of its tenant headers
	// reaches it (see For); nil without tenant headers.
	tenants map[string]*Upstream
	// tenant is the tenant this upstream is the copy of its upstream for
	// (see newTenants); "" for the upstream itself.
	tenant string
}

// conn is one connected session.
type conn struct {
	cs       *mcp.ClientSession
	protocol string
	era      taskwire.Era
	gate     *gate
	route    *askRoute
	pid      int // stdio child, 0 for HTTP
	// ended is closed once a stdio child's output has ended, before the
	// calls in flight fail and before the supervisor withdraws the
	// session; nil for HTTP.
	ended <-chan struct{}
	// tap is a stdio session's connection, which relayed calls use; nil
	// for HTTP.
	tap *tapConn
}

// over reports whether c's stdio child has stopped answering: no request
// sent on c could be read any more.
func (c *conn) over() bool {
	if c.ended == nil {
		return false
	}
	select {
	case <-c.ended:
		return true
	default:
		return false
	}
}

type toolCache struct {
	ok    bool
	gen   uint64
	tools []*mcp.Tool
}

func newUpstream(cfg *config.Upstream, o *Options) *Upstream {
	u := &Upstream{
		cfg:           cfg,
		logger:        o.Logger.With("upstream", cfg.Name),
		observe:       o.Observe,
		stateChanged:  o.StateChanged,
		restarted:     o.Restarted,
		timeout:       cfg.Timeout,
		minBackoff:    o.RestartBackoff,
		maxBackoff:    o.MaxRestartBackoff,
		restartBudget: cmp.Or(cfg.MaxRestartsPerMinute, config.DefaultMaxRestartsPerMinute),
		suspect:       make(chan struct{}, 1),
		toolsBusy:     make(chan struct{}, 1),
		changed:       make(chan struct{}),
		routes:        make(map[*mcp.ClientSession]*askRoute),
		taskAskers:    make(map[string]elicitFunc),
		progress:      progressRouter{sinks: make(map[string]*progressSink)},
		relay:         relaySession{lock: make(chan struct{}, 1)},
	}
	if u.timeout <= 0 {
		u.timeout = DefaultTimeout
	}
	u.latest.Store(cfg)
	u.tenants = newTenants(cfg, o)
	u.logs.logger = u.logger
	u.impl = &mcp.Implementation{Name: o.ClientName, Version: o.ClientVersion}
	u.client = mcp.NewClient(u.impl, &mcp.ClientOptions{
		Logger:                 u.logger,
		ToolListChangedHandler: u.toolsChanged,
		// Resources and prompts: see surface.go.
		ResourceListChangedHandler: u.resourcesChanged,
		PromptListChangedHandler:   u.promptsChanged,
		ResourceUpdatedHandler:     u.resourceUpdated,
		// Elicitation, answered by the call that can (answerQuestions). No
		// sampling, and roots answered with none: the gateway has neither
		// a model nor files; a call whose client has them declares them in
		// a session of its own (declareCapabilities). The tasks extension
		// is declared per request by CallToolAsTask and on tasks/*, not
		// here: declared for the session, it would let a 2026-07-28
		// upstream answer a plain CallTool with a task.
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}},
		// input_required results go back to the caller as they are.
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	u.client.AddSendingMiddleware(u.observeRequests, declareCapabilities)
	if o.Tracing.On() {
		u.tracing = o.Tracing
		u.client.AddSendingMiddleware(u.traceRequests)
	}
	u.client.AddReceivingMiddleware(u.answerQuestions)
	if err := taskwire.InstallClient(u.client); err != nil {
		u.setupErr = err
	}
	switch {
	case cfg.URL != "":
		base, ok := http.DefaultTransport.(*http.Transport)
		if ok {
			u.httpTransport = base.Clone()
		} else {
			u.httpTransport = &http.Transport{}
		}
		// Keep a connection per concurrent call alive: the default of two
		// idle connections per host makes concurrent calls dial anew.
		u.httpTransport.MaxIdleConnsPerHost = 64
		header := make(http.Header, len(cfg.Headers))
		for k, v := range cfg.Headers {
			header.Set(k, v)
		}
		// The configuration was validated: the URL parses.
		target, _ := url.Parse(cfg.URL)
		bare := *target
		bare.User, bare.RawQuery, bare.ForceQuery, bare.Fragment, bare.RawFragment = nil, "", false, "", ""
		u.sdkURL = bare.String()
		u.httpClient = &http.Client{Transport: taskwire.WrapRoundTripper(&roundTripper{
			next:     u.httpTransport,
			user:     target.User,
			query:    target.RawQuery,
			static:   header,
			progress: &u.progress,
			logs:     &u.logs,
			suspect:  u.markSuspect,
		})}
	case len(cfg.Command) == 0:
		u.setupErr = fmt.Errorf("upstream %s has neither a url nor a command; configure one", cfg.Name)
	}
	return u
}

// Name is the configured name.
func (u *Upstream) Name() string { return u.cfg.Name }

// Config is the upstream's configuration, the latest a reload gave it
// (one that changes how it connects makes a new Upstream instead). Do not
// modify it.
func (u *Upstream) Config() *config.Upstream { return u.latest.Load() }

// Endpoint is the URL, or the command line, for receipts and messages:
// the URL with its credentials redacted ([inert.URL]), since both are
// shown to people and agents who must not learn the gateway's secrets.
func (u *Upstream) Endpoint() string {
	if u.cfg.URL != "" {
		return inert.URL(u.cfg.URL)
	}
	args := make([]string, len(u.cfg.Command))
	for i, a := range u.cfg.Command {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`") {
			a = strconv.Quote(a)
		}
		args[i] = a
	}
	return strings.Join(args, " ")
}

// OffersTasks reports which task design the upstream offers, as of its
// current session (or its last one while it is down; EraNone before the
// first). It is EraNone when the configuration turns tasks off.
func (u *Upstream) OffersTasks() taskwire.Era {
	if u.cfg.Tasks == "off" {
		return taskwire.EraNone
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.conn != nil {
		return u.conn.era
	}
	return u.lastEra
}

// Ready reports whether the upstream is connected and answers a ping. It
// does not wait for a connection.
func (u *Upstream) Ready(ctx context.Context) error {
	u.mu.Lock()
	c, last := u.conn, u.lastErr
	u.mu.Unlock()
	if c == nil {
		if last == nil {
			last = errors.New("no session yet")
		}
		return &notConnectedError{name: u.cfg.Name, cause: last}
	}
	ctx, cancel := u.bound(ctx)
	defer cancel()
	if err := u.ping(ctx, c); err != nil {
		return fmt.Errorf("upstream %s did not answer a ping: %w", u.cfg.Name, err)
	}
	return nil
}

// Connected reports whether the upstream has a session now.
func (u *Upstream) Connected() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.conn != nil
}

// ping checks that a session answers: with ping up to protocol 2025-11-25,
// with server/discover from 2026-07-28, which has no ping (the go-sdk sends
// it through CallCustomMethod and adds the per-request _meta).
func (u *Upstream) ping(ctx context.Context, c *conn) error {
	if c.protocol >= protocolExtension {
		_, err := mcp.CallCustomMethod[*mcp.DiscoverParams, *mcp.DiscoverResult](ctx, c.cs, "server/discover", &mcp.DiscoverParams{})
		return err
	}
	return c.cs.Ping(ctx, nil)
}

// Tools lists the upstream's tools (every page of tools/list). The list is
// cached and fetched again after a reconnect or a
// notifications/tools/list_changed. Tools are as the upstream listed them,
// with a 2025-11-25 tool's execution copied into its _meta by taskwire (read
// it with taskwire.ToolTaskSupport). The tools are shared: do not modify
// them.
func (u *Upstream) Tools(ctx context.Context) ([]*mcp.Tool, error) {
	ctx, cancel := u.bound(ctx)
	defer cancel()
	select {
	case u.toolsBusy <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("upstream %s: waiting to list tools: %w", u.cfg.Name, ctx.Err())
	}
	defer func() { <-u.toolsBusy }()

	defer u.trackRequest()()
	c, err := u.current(ctx)
	if err != nil {
		return nil, err
	}
	u.mu.Lock()
	cache, gen := u.tools, u.toolsGen
	u.mu.Unlock()
	if cache.ok && cache.gen == gen {
		return slices.Clone(cache.tools), nil
	}
	var tools []*mcp.Tool
	for t, err := range c.cs.Tools(ctx, nil) {
		if err != nil {
			// A server that does not declare tools may not know the
			// method: it offers none. It is asked again after a
			// tools/list_changed, as any server is.
			if rpcErr := (*jsonrpc.Error)(nil); errors.As(err, &rpcErr) && rpcErr.Code == jsonrpc.CodeMethodNotFound {
				tools = nil
				break
			}
			return nil, fmt.Errorf("upstream %s: tools/list: %w", u.cfg.Name, err)
		}
		tools = append(tools, t)
	}
	u.mu.Lock()
	// A change announced while listing leaves gen behind: the next call
	// lists again.
	u.tools = toolCache{ok: true, gen: gen, tools: tools}
	u.mu.Unlock()
	return slices.Clone(tools), nil
}

func (u *Upstream) toolsChanged(context.Context, *mcp.ToolListChangedRequest) {
	u.mu.Lock()
	u.toolsGen++
	u.mu.Unlock()
	u.logger.Debug("upstream tool list changed")
	u.announce(SurfaceChange{Kind: ToolsChanged})
}

// bound applies the upstream's timeout to ctx.
func (u *Upstream) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, u.timeout)
}

// current returns the connected session, waiting for one until ctx ends.
func (u *Upstream) current(ctx context.Context) (*conn, error) {
	for {
		u.mu.Lock()
		c, changed, closed, unavailable := u.conn, u.changed, u.closed, u.unavailable
		u.mu.Unlock()
		switch {
		case c != nil && !c.over():
			return c, nil
		case c != nil:
			// The child died: wait until the supervisor replaces the
			// session, as though the call had come a moment later.
		case closed:
			return nil, &notConnectedError{name: u.cfg.Name, cause: errors.New("the upstream pool is closed")}
		case unavailable != nil:
			// No session can come before the budget allows a start.
			return nil, &notConnectedError{name: u.cfg.Name, cause: unavailable}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			u.mu.Lock()
			last := u.lastErr
			u.mu.Unlock()
			return nil, &notConnectedError{name: u.cfg.Name, cause: ctx.Err(), last: last}
		}
	}
}

// notConnectedError is the error of a request never sent for want of a
// connection.
type notConnectedError struct {
	name  string
	cause error
	last  error // the last connection attempt's failure, if any
}

func (e *notConnectedError) Error() string {
	s := "upstream " + e.name + " is not connected: " + e.cause.Error()
	if e.last != nil {
		s += " (last connection attempt: " + e.last.Error() + ")"
	}
	return s
}

func (e *notConnectedError) Unwrap() []error { return []error{ErrNotConnected, e.cause} }

// run is the upstream's supervisor: it keeps one session connected until ctx
// ends. A stdio child is started again after backoff, as often as its
// restart budget allows within a minute (see planRestart); an HTTP session
// is opened again after backoff.
func (u *Upstream) run(ctx context.Context) {
	if u.setupErr != nil {
		u.logger.Error("upstream cannot be connected", "error", u.setupErr)
		u.setDown(nil, u.setupErr)
		return
	}
	stdio := u.httpClient == nil
	backoff := u.minBackoff
	hadSession := false
	// restarts and exits are a stdio child's, within the last minute.
	var restarts, exits []time.Time
	for attempt := 1; ; attempt++ {
		c, err := u.connect(ctx)
		reason := err
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			u.setDown(nil, err)
		} else {
			attempt = 0
			up := time.Now()
			u.setUp(c)
			if hadSession && !stdio {
				u.reportRestart()
			}
			hadSession = true
			u.sessionStarted(ctx, c)
			reason = u.watch(ctx, c)
			u.setDown(c, reason)
			closeErr := c.cs.Close()
			if ctx.Err() != nil {
				// A stdio child's exit status is worth reporting; a
				// failed HTTP DELETE of a session is not.
				if stdio {
					u.mu.Lock()
					u.closeErr = closeErr
					u.mu.Unlock()
				}
				return
			}
			if time.Since(up) >= u.maxBackoff {
				backoff = u.minBackoff
			}
		}
		next, spent := time.Now().Add(backoff), false
		if stdio {
			now := time.Now()
			exits = append(recent(exits, now), now)
			restarts = recent(restarts, now)
			plan := planRestart(restarts, now, backoff, u.restartBudget)
			next, spent = plan.At, plan.Spent
		}
		switch {
		case spent:
			u.markUnavailable(&restartBudgetError{crashes: len(exits), budget: u.restartBudget, next: next, last: reason})
		case c == nil:
			u.logger.Warn("connecting to upstream failed; retrying", "endpoint", u.Endpoint(), "attempt", attempt, "retry_in", backoff, "error", err)
		default:
			u.logger.Warn("upstream connection lost; reconnecting", "endpoint", u.Endpoint(), "reason", reason, "pid", c.pid, "retry_in", backoff)
		}
		timer := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		if stdio {
			restarts = append(restarts, time.Now())
			u.available()
			u.reportRestart()
		}
		backoff = min(2*backoff, u.maxBackoff)
	}
}

// markUnavailable marks a stdio upstream unavailable until its restart
// budget allows the next start, and says so.
func (u *Upstream) markUnavailable(e *restartBudgetError) {
	u.mu.Lock()
	u.unavailable, u.lastErr = e, e
	u.broadcastLocked()
	u.mu.Unlock()
	u.logger.Error("stdio upstream keeps exiting; it is unavailable, and calls to it fail, until its next start",
		"endpoint", u.Endpoint(), "crashes_last_minute", e.crashes, "max_restarts_per_minute", e.budget,
		"next_start", e.next.Format(time.RFC3339), "reason", e.last)
}

// available ends an unavailability: the child is about to be started.
func (u *Upstream) available() {
	u.mu.Lock()
	if u.unavailable != nil {
		u.lastErr, u.unavailable = u.unavailable.last, nil
	}
	u.mu.Unlock()
}

func (u *Upstream) reportRestart() {
	if u.restarted != nil {
		u.restarted(u.cfg.Name)
	}
}

// connect opens a session, bounded by the upstream's timeout.
func (u *Upstream) connect(ctx context.Context) (*conn, error) {
	ctx, cancel := u.bound(ctx)
	defer cancel()
	var transport mcp.Transport
	var cmd *exec.Cmd
	var ended chan struct{}
	var tap *tapTransport
	if u.httpClient != nil {
		transport = &mcp.StreamableClientTransport{Endpoint: u.sdkURL, HTTPClient: u.httpClient}
	} else {
		cmd = u.command()
		ended = make(chan struct{})
		tap = &tapTransport{
			cmd:      cmd,
			progress: &u.progress,
			logs:     &u.logs,
			ended:    ended,
		}
		transport = taskwire.WrapClientTransport(tap)
		// A stdio upstream has one session for every call, so it declares
		// everything a call's client may answer (see stdioCapabilities).
		ctx = context.WithValue(ctx, sessionCapabilitiesKey{}, stdioCapabilities())
	}
	cs, err := u.client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", u.Endpoint(), err)
	}
	c := &conn{
		cs:       cs,
		protocol: cs.InitializeResult().ProtocolVersion,
		era:      taskwire.ServerOffersTasks(cs),
		gate:     newGate(),
		route:    &askRoute{},
		ended:    ended,
	}
	if cmd != nil && cmd.Process != nil {
		c.pid = cmd.Process.Pid
	}
	if tap != nil {
		c.tap = tap.conn
	}
	u.askToLog(ctx, cs)
	return c, nil
}

// command builds the stdio child: taskgate's environment plus the
// configured env, stderr into the log.
func (u *Upstream) command() *exec.Cmd {
	cmd := exec.Command(u.cfg.Command[0], u.cfg.Command[1:]...)
	env := os.Environ()
	for _, k := range slices.Sorted(maps.Keys(u.cfg.Env)) {
		env = append(env, k+"="+u.cfg.Env[k])
	}
	cmd.Env = env
	cmd.Stderr = &lineLogger{logger: u.logger}
	cmd.WaitDelay = childWaitDelay
	return cmd
}

// watch waits until the session ends, a ping after a failed round trip
// fails, or ctx ends, and says which.
func (u *Upstream) watch(ctx context.Context, c *conn) error {
	ended := make(chan error, 1)
	go func() { ended <- c.cs.Wait() }()
	for {
		select {
		case err := <-ended:
			if err == nil {
				return errors.New("the session ended")
			}
			return fmt.Errorf("the session ended: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-u.suspect:
			pctx, cancel := u.bound(ctx)
			err := u.ping(pctx, c)
			cancel()
			if err != nil && ctx.Err() == nil {
				return fmt.Errorf("a request failed and a ping failed after it: %w", err)
			}
		}
	}
}

func (u *Upstream) markSuspect() {
	select {
	case u.suspect <- struct{}{}:
	default:
	}
}

// setUp publishes a new session.
func (u *Upstream) setUp(c *conn) {
	// A failure reported before this session existed says nothing about it.
	select {
	case <-u.suspect:
	default:
	}
	u.mu.Lock()
	u.conn, u.lastErr, u.lastEra = c, nil, c.era
	u.routes[c.cs] = c.route
	u.toolsGen++
	u.broadcastLocked()
	u.mu.Unlock()
	u.logger.Info("upstream connected", "endpoint", u.Endpoint(), "protocol", c.protocol, "tasks", c.era.String(), "pid", c.pid)
	if u.stateChanged != nil {
		u.stateChanged(u.cfg.Name, true)
	}
}

// setDown withdraws session c (nil: none was published) for reason.
func (u *Upstream) setDown(c *conn, reason error) {
	u.mu.Lock()
	u.lastErr = reason
	withdrawn := c != nil && u.conn == c
	if withdrawn {
		u.conn = nil
		delete(u.routes, c.cs)
		u.broadcastLocked()
	}
	u.mu.Unlock()
	if withdrawn && u.stateChanged != nil {
		u.stateChanged(u.cfg.Name, false)
	}
}

func (u *Upstream) broadcastLocked() {
	close(u.changed)
	u.changed = make(chan struct{})
}

// close marks the upstream closed, closes sessions opened for single calls
// and idle HTTP connections, and returns the error of stopping the last
// stdio child. The supervisor must have returned.
func (u *Upstream) close() error {
	u.mu.Lock()
	u.closed = true
	u.broadcastLocked()
	var extra []*mcp.ClientSession
	for cs := range u.routes {
		extra = append(extra, cs)
	}
	closeErr := u.closeErr
	u.mu.Unlock()
	for _, cs := range extra {
		cs.Close()
	}
	if u.httpTransport != nil {
		u.closeRelaySessions()
		u.httpTransport.CloseIdleConnections()
	}
	if closeErr != nil {
		return fmt.Errorf("upstream %s: closing: %w", u.cfg.Name, closeErr)
	}
	return nil
}

// pid is the current stdio child's process ID, or 0.
func (u *Upstream) pid() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.conn == nil {
		return 0
	}
	return u.conn.pid
}

// observeRequests reports every request sent to the upstream to
// Options.Observe.
func (u *Upstream) observeRequests(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if u.observe == nil || strings.HasPrefix(method, "notifications/") {
			return next(ctx, method, req)
		}
		start := time.Now()
		res, err := next(ctx, method, req)
		u.observe(u.cfg.Name, method, time.Since(start), err)
		return res, err
	}
}

// traceRequests makes the client span of every request sent upstream, in
// the trace of the work that sends it (a relayed call, a worker's step),
// and carries that span's context in the request's _meta, so that an
// upstream that traces joins the trace.
func (u *Upstream) traceRequests(next mcp.MethodHandler) mcp.MethodHandler {
	transport := telemetry.TransportPipe
	if u.httpClient != nil {
		transport = telemetry.TransportTCP
	}
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if strings.HasPrefix(method, "notifications/") {
			return next(ctx, method, req)
		}
		r := telemetry.Request{Method: method, Transport: transport}
		p := req.GetParams()
		hasParams := p != nil && !reflect.ValueOf(p).IsNil()
		if c, ok := p.(*mcp.CallToolParams); ok && hasParams {
			r.Target = c.Name
		}
		ctx, span := u.tracing.StartClient(ctx, r, telemetry.AttrUpstream.String(u.cfg.Name))
		defer span.End()
		if hasParams {
			// Params are built for this one request (CallTool sends a copy of
			// the caller's); the map is cloned so that no caller's map changes.
			meta := maps.Clone(p.GetMeta())
			if meta == nil {
				meta = map[string]any{}
			}
			u.tracing.Inject(ctx, telemetry.AnyMeta(meta))
			p.SetMeta(meta)
		}
		res, err := next(ctx, method, req)
		if err != nil {
			telemetry.Fail(span, errorType(err), 0)
		} else if c, ok := res.(*mcp.CallToolResult); ok && c != nil && c.IsError {
			telemetry.Fail(span, "tool_error", 0)
		}
		return res, err
	}
}

// errorType is error.type of a failed upstream request: the JSON-RPC
// error code, or _OTHER (a transport failure, whose text may name a URL).
func errorType(err error) string {
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) {
		return strconv.FormatInt(rpc.Code, 10)
	}
	return "_OTHER"
}

// lineLogger logs a stdio child's stderr, one record per line.
type lineLogger struct {
	logger *slog.Logger
	mu     sync.Mutex
	buf    []byte
}

// maxLogLine caps a logged stderr line.
const maxLogLine = 16 << 10

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := slices.Index(l.buf, '\n')
		if i < 0 {
			break
		}
		l.emit(l.buf[:i])
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > maxLogLine {
		l.emit(l.buf)
		l.buf = nil
	}
	return len(p), nil
}

func (l *lineLogger) emit(line []byte) {
	if s := strings.TrimRight(string(line), "\r"); s != "" {
		l.logger.Info("upstream stderr", "line", s)
	}
}
