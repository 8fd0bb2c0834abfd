// Package daemon assembles a running gateway from a configuration: the
// ledger, the upstream pool, the background worker, the MCP server and its
// HTTP listener (or a stdio front), started in order and stopped in reverse.
// It holds wiring and process-level settings only (start and stop order,
// the GC target, how long to wait for upstreams' tools, refusing
// --no-worker on SQLite, applying a reload to what it wired and the
// control socket that asks for one); every decision about operations, and
// what a reload may change, lives in the packages it wires.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/net/netutil"

	"github.com/taskgate/taskgate/api"
	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/dburl"
	"github.com/taskgate/taskgate/ledger/postgres"
	"github.com/taskgate/taskgate/limits"
	"github.com/taskgate/taskgate/mcpserver"
	"github.com/taskgate/taskgate/secrets"
	"github.com/taskgate/taskgate/signingkeys"
	"github.com/taskgate/taskgate/taskwire"
	"github.com/taskgate/taskgate/telemetry"
	"github.com/taskgate/taskgate/upstream"
	"github.com/taskgate/taskgate/worker"
)

// Options configure Start.
type Options struct {
	Config *config.Config
	Logger *slog.Logger
	// Store, when set, is used instead of opening Config.Database; the
	// daemon then does not close it, and it seals secret arguments with
	// the ring it was opened with.
	Store ledger.Store
	// Secrets is the key ring that seals secret arguments in the ledger
	// and opens them for a send; nil for none. Start refuses a
	// configuration whose tools declare secret arguments without one,
	// unless it says secrets.store: plaintext.
	Secrets *secrets.Ring
	// Listener, when set, is served instead of listening on Config.Listen.
	Listener net.Listener
	// NoHTTP starts no HTTP listener (a stdio front).
	NoHTTP bool
	// NoWorker starts no background worker: the gateway accepts
	// consequential calls and enqueues their dispatch jobs, but runs no
	// job. Another replica on the same PostgreSQL ledger must run the
	// worker (an operation whose job no worker takes waits; its queue
	// lease lapses and it is recovered once one runs). Start refuses it
	// on SQLite, whose ledger no other replica shares.
	NoWorker bool
	// SDKPathOnly is a test switch (mcpserver.Options.SDKPathOnly): every
	// pass-through call takes the SDK path, so that it can be compared with
	// the fast path. Start warns when it is on.
	SDKPathOnly bool
	// ToolSync is how often upstream tool lists are re-read; default 10s.
	ToolSync time.Duration
	// ServeAtOnce makes Start return as soon as the gateway serves.
	// Otherwise it returns once every upstream has connected and its tools
	// are listed, or after five seconds (the gateway serves meanwhile).
	ServeAtOnce bool
	// ControlSocket, when set, is the Unix socket on which Start takes
	// reloads (taskgate reload); LoadConfig reads the file a reload names,
	// as the configuration was read at start.
	ControlSocket string
	LoadConfig    func(path string) (*config.Config, error)
	// Getenv reads the OTEL_* environment that, besides Config.Telemetry,
	// turns traces on and tunes their exporter; nil reads none.
	Getenv func(string) string
}

// Daemon is a running gateway.
type Daemon struct {
	Config *config.Config
	Store  ledger.Store
	Pool   *upstream.Pool
	// Worker is nil when Options.NoWorker is set.
	Worker   *worker.Worker
	Gateway  *mcpserver.Gateway
	Registry *prometheus.Registry
	// URL is the base URL of the HTTP listener ("" without one).
	URL string

	log     *slog.Logger
	secrets *secrets.Ring
	// limits holds what each tenant takes of the listener and the worker.
	limits *limits.Keeper
	// tracing exports the spans of every part; nil when traces are off.
	tracing *telemetry.Tracing
	// auth is the HTTP listener's authentication, which Reload replaces;
	// nil without a listener.
	auth *authn.Switch
	// reloadMu serialises reloads and guards Config while one runs.
	reloadMu sync.Mutex
	reloads  *prometheus.CounterVec
	// control serves the control socket at controlPath; nil without one.
	control     *http.Server
	controlPath string
	ownStore    bool
	http        *http.Server
	httpDone    chan error
	stopSync    context.CancelFunc
	syncDone    chan struct{}
}

// Start opens, connects and starts everything, in order.
func Start(ctx context.Context, opts *Options) (_ *Daemon, err error) {
	cfg := opts.Config
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Daemon{Config: cfg, Store: opts.Store, log: log, Registry: prometheus.NewRegistry(), secrets: opts.Secrets}
	defer func() {
		if err != nil {
			d.Stop(context.WithoutCancel(ctx))
		}
	}()
	if opts.NoWorker && !sharedLedger(opts) {
		return nil, errors.New("a gateway without its worker needs a PostgreSQL ledger shared with a replica that runs one; on SQLite nothing would ever dispatch an accepted operation")
	}
	if err := cfg.CheckSecretsKey(opts.Secrets != nil); err != nil {
		return nil, err
	}
	if err := openTenantHeaders(cfg, opts.Secrets); err != nil {
		return nil, err
	}
	if tools := cfg.SecretTools(); len(tools) > 0 && opts.Secrets == nil {
		log.Warn("secrets.store is plaintext: the secret arguments of these tools are kept unencrypted in the ledger, where anyone who reads its database or a backup reads them",
			"tools", tools)
	}
	if d.Store == nil {
		d.Store, err = dburl.Open(ctx, cfg.Database, &dburl.Options{Logger: log, Migrate: true, Secrets: opts.Secrets})
		if err != nil {
			return nil, err
		}
		d.ownStore = true
	}
	if err := sealPlaintext(ctx, d.Store, log); err != nil {
		return nil, err
	}
	checkSigning(ctx, signingkeys.NewSigner(d.Store, opts.Secrets), log)
	d.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := mcpserver.NewMetrics(d.Registry, d.Store)
	if d.Store != nil {
		d.Registry.MustRegister(api.NewBudgetCollector(d.Store, log, nil))
	}
	d.reloads = newReloadCounter(d.Registry)
	d.limits = mcpserver.NewKeeper(cfg.Limits, d.Registry)

	if d.tracing, err = telemetry.New(ctx, cfg.Telemetry, telemetry.Settings{Getenv: opts.Getenv, Logger: log}); err != nil {
		return nil, err
	}
	d.Pool = upstream.NewPool(cfg.Upstreams, &upstream.Options{Logger: log, Observe: metrics.ObserveUpstream, StateChanged: metrics.UpstreamStates(cfg.Upstreams), Restarted: metrics.UpstreamRestarted, ClientName: "taskgate", Tracing: d.tracing})
	d.Gateway, err = mcpserver.New(&mcpserver.Options{Store: d.Store, Pool: d.Pool, Config: cfg, Metrics: metrics, Logger: log, SDKPathOnly: opts.SDKPathOnly, Limits: d.limits, Tracing: d.tracing})
	if err != nil {
		return nil, err
	}
	if opts.SDKPathOnly {
		log.Warn("pass-through calls take the SDK path only: a test switch, slower, not for production")
	}
	d.Pool.Start(context.WithoutCancel(ctx))
	if !opts.NoWorker {
		d.Worker, err = worker.New(&worker.Options{Store: d.Store, Upstreams: worker.FromPool(d.Pool), Catalog: d.Gateway.Catalog(), Config: cfg, Logger: log, Secrets: opts.Secrets, Limits: d.limits, Tracing: d.tracing})
		if err != nil {
			return nil, err
		}
		if err := d.Worker.Start(ctx); err != nil {
			return nil, err
		}
	} else {
		log.Warn("running without the background worker: operations accepted here are dispatched only by a replica that runs it")
	}
	// The listener opens once the worker runs, so that nothing accepted
	// waits for one, and before any upstream is waited for: health, the
	// ledger's tasks and the tools of every upstream that is up must not
	// depend on one that is down.
	if !opts.NoHTTP {
		if err := d.listen(opts); err != nil {
			return nil, err
		}
	}

	every := opts.ToolSync
	if every <= 0 {
		every = 10 * time.Second
	}
	syncCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d.stopSync, d.syncDone = cancel, make(chan struct{})
	go func() {
		defer close(d.syncDone)
		synced := make(chan struct{})
		go func() {
			defer close(synced)
			d.Gateway.RunToolSync(syncCtx, every)
		}()
		defer func() { <-synced }()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-syncCtx.Done():
				return
			case <-t.C:
				d.drainRetired(syncCtx)
			}
		}
	}()
	if opts.ControlSocket != "" {
		if opts.LoadConfig == nil {
			return nil, errors.New("a control socket needs Options.LoadConfig to read the files reloads name")
		}
		if err := d.serveControl(opts.ControlSocket, opts.LoadConfig); err != nil {
			return nil, err
		}
	}
	if !opts.ServeAtOnce {
		d.waitForUpstreams(ctx)
	}
	return d, nil
}

// listen opens the HTTP listener and serves the gateway on it.
func (d *Daemon) listen(opts *Options) error {
	cfg, log := d.Config, d.log
	auth, err := authenticator(cfg, d.Store, log)
	if err != nil {
		return err
	}
	d.auth = authn.NewSwitch(auth)
	restAPI := api.New(&api.Options{Store: d.Store, Logger: log, MaxBodyBytes: cfg.MaxBodyBytes,
		QueueLease: cfg.Worker.Lease})
	approverConsole, err := d.console(restAPI)
	if err != nil {
		return err
	}
	lim := cfg.Limits
	handler, err := d.Gateway.Handler(&mcpserver.HTTPOptions{Auth: d.auth, Gatherer: d.Registry, Extra: restAPI.Register,
		ReceiptKeys: signingkeys.Handler(d.Store, log), Console: approverConsole.Handler(), Limits: d.limits})
	if err != nil {
		return err
	}
	ln := opts.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return fmt.Errorf("listen on %s (listen in %s): %w", cfg.Listen, cfg.File, err)
		}
	}
	d.URL = "http://" + ln.Addr().String()
	// Connections past the limit wait to be accepted rather than take a
	// file descriptor that the ledger, upstreams and other clients need.
	ln = netutil.LimitListener(ln, lim.MaxConnections)
	d.http = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		// A request's headers and body; /mcp lifts it once the body is read.
		ReadTimeout: lim.ReadTimeout,
		// A whole answer; /mcp, whose answers may be event streams, bounds
		// each write instead.
		WriteTimeout: lim.WriteTimeout,
		// Idle keep-alive connections are closed; open streams are not idle.
		IdleTimeout: lim.IdleTimeout,
		ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	d.httpDone = make(chan error, 1)
	go func() { d.httpDone <- d.http.Serve(ln) }()
	log.Info("taskgate is serving", "mcp", d.URL+"/mcp", "ledger", dburl.Describe(cfg.Database), "upstreams", len(cfg.Upstreams))
	return nil
}

// sealPlaintext seals the secret arguments that operations accepted before
// a key was configured hold in plain text, or warns that they are there.
// Values sealed under an older key are left to taskgate secrets-key
// rotate: a replica not yet given the newest key could not open them.
func sealPlaintext(ctx context.Context, store ledger.Store, log *slog.Logger) error {
	rep, err := store.SecretsReseal(ctx, nil)
	if err != nil {
		return fmt.Errorf("check the ledger for secret arguments kept in plain text: %w", err)
	}
	if rep.Resealed > 0 {
		log.Info("encrypted the secret arguments that operations kept in plain text", "operations", rep.Resealed)
	}
	if rep.Plaintext > 0 {
		log.Warn("operations keep secret arguments in plain text in the ledger; configure a secrets key (secrets.key_file) and restart to encrypt them",
			"operations", rep.Plaintext)
	}
	return nil
}

// checkSigning logs which key issues receipts, or why none can: final
// receipts then stay provisional and unsigned (no active key, or a key the
// secrets keys cannot open), and the log says which before a reviewer
// finds out.
func checkSigning(ctx context.Context, signer *signingkeys.Signer, log *slog.Logger) {
	kid, err := signer.Check(ctx)
	switch {
	case err != nil:
		log.Warn("receipts cannot be issued, and stay provisional until they can: configure the secrets key that sealed the signing key, or retire it and create another; then taskgate receipt issue signs the ones that ended meanwhile", "err", err)
	case kid == "":
		log.Info("receipts are not issued, only provisional: the ledger has no active signing key (taskgate signing-keys create)")
	default:
		log.Info("receipts are issued signed", "kid", kid)
	}
}

// sharedLedger reports whether the ledger Start would use is PostgreSQL,
// the one store several replicas share.
func sharedLedger(opts *Options) bool {
	if opts.Store != nil {
		_, ok := opts.Store.(*postgres.Store)
		return ok
	}
	return !strings.HasPrefix(opts.Config.Database, "sqlite:")
}

// upstreamWait bounds how long Start waits for upstreams to connect.
const upstreamWait = 5 * time.Second

// waitForUpstreams returns once every upstream has a session and a sync
// has listed their tools, or after upstreamWait, so that a caller of Start
// sees a complete tool list when the upstreams are up and answer
// tools/list promptly. The gateway serves meanwhile; an upstream that
// connects later, or whose tools/list takes longer than the sync waits
// (SyncTools), is listed when it does.
func (d *Daemon) waitForUpstreams(ctx context.Context) {
	deadline := time.NewTimer(upstreamWait)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		connected := 0
		for _, u := range d.Pool.All() {
			if u.Connected() {
				connected++
			}
		}
		if connected == len(d.Pool.All()) {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			d.log.Warn("serving before every upstream connected; their tools are listed when they do", "connected", connected, "upstreams", len(d.Pool.All()))
			return
		case <-tick.C:
		}
	}
	d.Gateway.SyncTools(ctx)
}

func authenticator(cfg *config.Config, store ledger.Store, log *slog.Logger) (*authn.Authenticator, error) {
	o := &authn.Options{ResourceURL: cfg.PublicURL + "/mcp", Logger: log}
	if *cfg.Auth.APIKeys {
		o.Store = store
	}
	if j := cfg.Auth.JWT; j != nil {
		o.JWT = &authn.JWTOptions{Issuer: j.Issuer, Audience: j.Audience, JWKSURL: j.JWKSURL, TenantClaim: j.TenantClaim, Algorithms: j.Algorithms, Leeway: j.Leeway}
	}
	a, err := authn.New(o)
	if err != nil {
		return nil, fmt.Errorf("%s: auth: %w", cfg.File, err)
	}
	return a, nil
}

// ServeStdio serves one local client on in/out as the configured stdio
// tenant until the client hangs up or ctx ends.
func (d *Daemon) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	server, err := d.Gateway.NewServer(d.Config.Auth.StdioTenant)
	if err != nil {
		return err
	}
	defer d.Gateway.RemoveServer(server)
	return server.Run(ctx, taskwire.NewStdioTransport(in, out))
}

// Shutdown bounds.
const (
	// httpGrace is how long answers in flight get to be written before the
	// listener's connections are closed.
	httpGrace = 10 * time.Second
	// drainGrace is how long handlers still running after that get to end
	// before the ledger is closed anyway.
	drainGrace = 30 * time.Second
)

// Stop shuts down in reverse order: waits for operations' ends first
// (their clients are answered with what is known, and sessions' standalone
// streams end), then the listener (in-flight acceptances finish;
// connections still open at the deadline are closed), the handlers still
// running, tool sync, the worker, upstreams and the ledger.
func (d *Daemon) Stop(ctx context.Context) error {
	var errs []error
	if d.Gateway != nil {
		d.Gateway.Shutdown()
	}
	if d.http != nil {
		sctx, cancel := context.WithTimeout(ctx, httpGrace)
		if err := d.http.Shutdown(sctx); err != nil {
			d.log.Warn("closing connections whose answers were not written in time", "err", err)
			errs = append(errs, d.http.Close())
		}
		cancel()
		if err := <-d.httpDone; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
	}
	keepStore := false
	if d.Gateway != nil {
		dctx, cancel := context.WithTimeout(ctx, drainGrace)
		if err := d.Gateway.Drain(dctx); err != nil {
			// Closing the ledger now would fail them midway; the process
			// ending releases it instead.
			d.log.Error("leaving the ledger open for handlers that did not end", "err", err)
			errs = append(errs, err)
			keepStore = true
		}
		cancel()
	}
	if d.control != nil {
		errs = append(errs, d.control.Close())
		if err := os.Remove(d.controlPath); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if d.stopSync != nil {
		d.stopSync()
		<-d.syncDone
	}
	if d.Worker != nil {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		errs = append(errs, d.Worker.Stop(wctx))
		cancel()
	}
	if d.Pool != nil {
		errs = append(errs, d.Pool.Close())
	}
	if d.ownStore && d.Store != nil && !keepStore {
		errs = append(errs, d.Store.Close())
	}
	// Last, so that the spans of everything that stopped are sent.
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if err := d.tracing.Shutdown(tctx); err != nil {
		d.log.Warn("sending the last spans", "err", err)
	}
	cancel()
	return errors.Join(errs...)
}

// Tracing is where the gateway's spans go; off (nil) when traces are off.
func (d *Daemon) Tracing() *telemetry.Tracing { return d.tracing }

// openTenantHeaders opens cfg's sealed tenant header values with ring (nil:
// the gateway has no secrets key, and a sealed value is an error).
func openTenantHeaders(cfg *config.Config, ring *secrets.Ring) error {
	var open func(sealed, label string) ([]byte, error)
	if ring != nil {
		open = ring.OpenBytes
	}
	return cfg.OpenTenantHeaders(open)
}
