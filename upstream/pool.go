package upstream

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/telemetry"
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
	// Tracing makes a client span of every request sent upstream and puts
	// its trace context in the request's _meta; nil makes none.
	Tracing *telemetry.Tracing
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

// A Pool holds one managed [Upstream] per configured server. A reload
// ([Pool.Apply]) adds, removes and replaces upstreams while the pool runs.
// Its methods are safe for concurrent use.
type Pool struct {
	opts Options

	mu       sync.Mutex
	active   []*Upstream // configuration order
	byName   map[string]*Upstream
	retiring map[string]*Upstream // removed, kept for operations already on them
	// surfaceFns are told of every upstream's surface changes, also of
	// upstreams added later.
	surfaceFns []func(SurfaceChange)
	ctx        context.Context // set by Start
	cancel     context.CancelFunc
	started    bool
	closed     bool
	wg         sync.WaitGroup
}

// NewPool returns a pool for the configured upstreams (nil entries are
// skipped). It does not connect yet; see [Pool.Start].
func NewPool(cfgs []*config.Upstream, opts *Options) *Pool {
	p := &Pool{opts: opts.withDefaults(), byName: make(map[string]*Upstream, len(cfgs)), retiring: map[string]*Upstream{}}
	for _, cfg := range cfgs {
		if cfg == nil {
			continue
		}
		u := newUpstream(cfg, &p.opts)
		p.active = append(p.active, u)
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
	p.ctx, p.cancel = context.WithCancel(ctx)
	for _, u := range p.active {
		p.runLocked(u)
	}
}

// runLocked starts the supervisors of u and of its tenants' upstreams
// under the pool's context.
func (p *Pool) runLocked(u *Upstream) {
	for _, m := range u.family() {
		ctx, stop := context.WithCancel(p.ctx)
		m.stop, m.done = stop, make(chan struct{})
		p.wg.Go(func() {
			defer close(m.done)
			m.run(ctx)
		})
	}
}

// OnSurfaceChange registers fn with every upstream, those a reload adds
// included (see [Upstream.OnSurfaceChange]).
func (p *Pool) OnSurfaceChange(fn func(SurfaceChange)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.surfaceFns = append(p.surfaceFns, fn)
	for _, u := range p.active {
		u.OnSurfaceChange(fn)
	}
}

// Applied says what [Pool.Apply] changed, by upstream name.
type Applied struct {
	// Added upstreams are connecting; Removed ones are retiring (see
	// [Pool.Retiring]); Replaced ones connect anew with their new
	// settings, the old session serving what was already sent on it until
	// the upstream's timeout; Updated ones keep their session and take the
	// new tools, prefix and required setting.
	Added, Removed, Replaced, Updated []string
}

// Apply makes the pool serve cfgs: upstreams not in the pool are added,
// those not in cfgs removed, those whose connection settings changed
// (config.SameConnection) replaced by a new Upstream of the same name.
// A removed upstream keeps running for the operations already on it until
// [Pool.CloseRetired]; it is no longer in [Pool.All] but [Pool.Get] still
// finds it.
func (p *Pool) Apply(cfgs []*config.Upstream) (*Applied, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("the upstream pool is closed")
	}
	out := &Applied{}
	next := make([]*Upstream, 0, len(cfgs))
	byName := make(map[string]*Upstream, len(cfgs))
	var replaced []*Upstream
	for _, cfg := range cfgs {
		if cfg == nil {
			continue
		}
		old, ok := p.byName[cfg.Name]
		switch {
		case ok && config.SameConnection(old.cfg, cfg):
			old.setLatest(cfg)
			next = append(next, old)
			byName[cfg.Name] = old
			out.Updated = append(out.Updated, cfg.Name)
			continue
		case ok:
			replaced = append(replaced, old)
			out.Replaced = append(out.Replaced, cfg.Name)
		default:
			if r, was := p.retiring[cfg.Name]; was {
				// Back before it drained: the old one still serves what
				// was sent on it, and is closed as a replaced one is.
				delete(p.retiring, cfg.Name)
				replaced = append(replaced, r)
			}
			out.Added = append(out.Added, cfg.Name)
		}
		u := newUpstream(cfg, &p.opts)
		for _, fn := range p.surfaceFns {
			u.OnSurfaceChange(fn)
		}
		next = append(next, u)
		byName[cfg.Name] = u
	}
	for _, u := range p.active {
		if _, kept := byName[u.cfg.Name]; !kept {
			p.retiring[u.cfg.Name] = u
			out.Removed = append(out.Removed, u.cfg.Name)
		}
	}
	p.active, p.byName = next, byName
	if p.started {
		for _, u := range next {
			if u.done == nil {
				p.runLocked(u)
			}
		}
		for _, u := range replaced {
			p.wg.Go(func() {
				// What was sent on the old session is answered on it: give
				// it the longest a request may take before closing it.
				t := time.NewTimer(u.timeout)
				defer t.Stop()
				select {
				case <-t.C:
				case <-p.ctx.Done():
				}
				u.shutdown()
			})
		}
	}
	return out, nil
}

// Retiring lists the removed upstreams still running for operations
// already on them.
func (p *Pool) Retiring() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Sorted(maps.Keys(p.retiring))
}

// CloseRetired closes a removed upstream once nothing needs it any more.
func (p *Pool) CloseRetired(name string) error {
	p.mu.Lock()
	u, ok := p.retiring[name]
	delete(p.retiring, name)
	p.mu.Unlock()
	if !ok {
		return nil
	}
	return u.shutdown()
}

// shutdown stops the supervisors of u and its tenants' upstreams, waits
// for them and closes them.
func (u *Upstream) shutdown() error {
	var errs []error
	for _, m := range u.family() {
		if m.stop != nil {
			m.stop()
			<-m.done
		}
		errs = append(errs, m.close())
	}
	return errors.Join(errs...)
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
	all := append(slices.Clone(p.active), slices.Collect(maps.Values(p.retiring))...)
	p.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	p.wg.Wait()
	var errs []error
	for _, u := range all {
		for _, m := range u.family() {
			errs = append(errs, m.close())
		}
	}
	return errors.Join(errs...)
}

// Get returns the upstream with the configured name, or a removed one that
// is still retiring.
func (p *Pool) Get(name string) (*Upstream, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if u, ok := p.byName[name]; ok {
		return u, true
	}
	u, ok := p.retiring[name]
	return u, ok
}

// All returns every configured upstream in configuration order.
func (p *Pool) All() []*Upstream {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.active)
}
