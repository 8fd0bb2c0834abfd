package upstream

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/taskgate/taskgate/config"
)

// Defaults for [Options].
const (
	DefaultClientName        = "taskgate"
	DefaultClientVersion     = "dev"
	DefaultRestartBackoff    = 500 * time.Millisecond
	DefaultMaxRestartBackoff = 30 * time.Second
	// DefaultTimeout bounds one upstream call when the configuration gives
	// no timeout.
	DefaultTimeout = 60 * time.Second
)

// Options configure a [Pool]. A nil *Options means the defaults.
type Options struct {
	// Logger receives connection events (connects, losses, restarts), a
	// stdio child's stderr and declined elicitations. If nil, nothing is
	// logged.
	Logger *slog.Logger
	// Observe is called after every upstream request with its method,
	// duration and error (for metrics). May be nil.
	Observe func(upstream, method string, d time.Duration, err error)
	// StateChanged is called, outside any lock, whenever an upstream's
	// session is published (connected true) or withdrawn (false), so that
	// listings and metrics follow it. May be nil.
	StateChanged func(upstream string, connected bool)
	// Restarted is called, outside any lock, each time a stdio upstream's
	// process is started again after its first start, and each time an
	// HTTP upstream's session is established again after one was lost
	// (for metrics). May be nil.
	Restarted func(upstream string)
	// ClientName and ClientVersion are the Implementation sent to
	// upstreams; defaults DefaultClientName and DefaultClientVersion.
	ClientName, ClientVersion string
	// RestartBackoff and MaxRestartBackoff bound the exponential backoff
	// between connection attempts; defaults DefaultRestartBackoff and
	// DefaultMaxRestartBackoff.
	RestartBackoff, MaxRestartBackoff time.Duration
}

func (o *Options) withDefaults() Options {
	var out Options
	if o != nil {
		out = *o
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.ClientName == "" {
		out.ClientName = DefaultClientName
	}
	if out.ClientVersion == "" {
		out.ClientVersion = DefaultClientVersion
	}
	if out.RestartBackoff <= 0 {
		out.RestartBackoff = DefaultRestartBackoff
	}
	if out.MaxRestartBackoff <= 0 {
		out.MaxRestartBackoff = DefaultMaxRestartBackoff
	}
	out.MaxRestartBackoff = max(out.MaxRestartBackoff, out.RestartBackoff)
	return out
}

// A Pool holds one managed [Upstream] per configured server. Its methods are
// safe for concurrent use.
type Pool struct {
	upstreams []*Upstream
	byName    map[string]*Upstream

	mu      sync.Mutex
	started bool
	closed  bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// NewPool returns a pool for the configured upstreams (nil entries are
// skipped). It does not connect yet; see [Pool.Start].
func NewPool(cfgs []*config.Upstream, opts *Options) *Pool {
	o := opts.withDefaults()
	p := &Pool{byName: make(map[string]*Upstream, len(cfgs))}
	for _, cfg := range cfgs {
		if cfg == nil {
			continue
		}
		u := newUpstream(cfg, &o)
		p.upstreams = append(p.upstreams, u)
		p.byName[cfg.Name] = u
	}
	return p
}

// Start connects every upstream in the background, retrying with backoff,
// and returns at once. The connections live until ctx ends or [Pool.Close].
// Calling Start again, or after Close, does nothing.
func (p *Pool) Start(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.closed {
		return
	}
	p.started = true
	ctx, p.cancel = context.WithCancel(ctx)
	for _, u := range p.upstreams {
		p.wg.Go(func() { u.run(ctx) })
	}
}

// Close closes every session and stops every stdio child, waiting until they
// have exited. Calls waiting for a connection fail. Close may be called more
// than once.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	cancel := p.cancel
	p.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	p.wg.Wait()
	var errs []error
	for _, u := range p.upstreams {
		errs = append(errs, u.close())
	}
	return errors.Join(errs...)
}

// Get returns the upstream with the configured name.
func (p *Pool) Get(name string) (*Upstream, bool) {
	u, ok := p.byName[name]
	return u, ok
}

// All returns every upstream in configuration order.
func (p *Pool) All() []*Upstream {
	return append([]*Upstream(nil), p.upstreams...)
}
