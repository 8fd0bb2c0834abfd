// Package limits bounds what one tenant, or one source address, may hold
// of a gateway at once, so that none can exhaust it for the others: open
// sessions and event streams (per tenant and in total), tool calls in
// progress and their rate per tenant, consequential calls being accepted
// and worker jobs running per tenant, and console sign-in attempts per
// source address. A [Keeper] holds the counts, token buckets and
// semaphores of one replica; the decisions are pure functions over them.
// A refusal is a [Refusal] that names the limit, as data.reason, and when
// to try again; a tenant that keeps calling without waiting that long has
// its refusals answered late, so that refusing it costs the gateway
// little. It never refuses work it has admitted: acceptances and jobs past
// their tenant's bound wait their turn.
package limits

import (
	"context"
	"fmt"
	"math"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
	"golang.org/x/time/rate"
)

// Kind is a thing a tenant holds for a while and gives back.
type Kind string

const (
	// Sessions are 2025-11-25 sessions, held until they end.
	Sessions Kind = "sessions"
	// Streams are standalone event streams (GET /mcp), held while open.
	Streams Kind = "streams"
	// Calls are tool calls in progress.
	Calls Kind = "calls"
	// Jobs are worker jobs running (see [Keeper.Job]).
	Jobs Kind = "jobs"
	// Accepts are consequential calls being accepted into the ledger (see
	// [Keeper.Accept]).
	Accepts Kind = "accepts"
)

// Reason names the limit behind a refusal, as data.reason carries it.
type Reason string

const (
	ReasonSessionLimit     Reason = "session_limit_reached"
	ReasonStreamLimit      Reason = "stream_limit_reached"
	ReasonConcurrencyLimit Reason = "concurrency_limit_reached"
	ReasonRateLimited      Reason = "rate_limited"
	ReasonSignInRateLimit  Reason = "sign_in_rate_limited"
)

// Scope says whose limit was reached.
type Scope string

const (
	ScopeTenant  Scope = "tenant"
	ScopeGateway Scope = "gateway"
	ScopeAddress Scope = "address"
)

// Refusal is a limit that was reached.
type Refusal struct {
	Reason Reason
	Scope  Scope
	// Limit is the number that was reached (per second for a rate).
	Limit float64
	// RetryAfter is when a retry may succeed, at least one second.
	RetryAfter time.Duration
	// Pace is how long the refusal is held before it is answered: zero,
	// unless its tenant is being refused faster than clients that wait
	// RetryAfter would be (see [Keeper.Call]).
	Pace time.Duration
}

// Error says which limit was reached and what to do, so that a model
// reading it alone can act.
func (r *Refusal) Error() string {
	after := fmt.Sprintf("retry in %d s", r.RetryAfterSeconds())
	switch r.Reason {
	case ReasonSessionLimit:
		return fmt.Sprintf("the %s limit of %g open sessions is reached; close sessions you no longer use (HTTP DELETE with their Mcp-Session-Id), reuse an open one, or %s", r.Scope, r.Limit, after)
	case ReasonStreamLimit:
		return fmt.Sprintf("the %s limit of %g open event streams is reached; close a stream you no longer read, or %s", r.Scope, r.Limit, after)
	case ReasonConcurrencyLimit:
		return fmt.Sprintf("this tenant already has %g tool calls in progress, its limit; wait for one to finish and %s", r.Limit, after)
	case ReasonRateLimited:
		return fmt.Sprintf("this tenant is calling tools faster than its limit of %g calls per second; nothing was started; %s", r.Limit, after)
	case ReasonSignInRateLimit:
		return fmt.Sprintf("too many sign-in attempts from this address (at most %g a minute); %s", r.Limit, after)
	}
	return fmt.Sprintf("limit %s reached; %s", r.Reason, after)
}

// RetryAfterSeconds is RetryAfter in whole seconds, rounded up, at least
// one: what the Retry-After header and data.retry_after say.
func (r *Refusal) RetryAfterSeconds() int {
	return max(1, int(math.Ceil(r.RetryAfter.Seconds())))
}

// Bound is how many of a kind one tenant, and all tenants together, may
// hold.
type Bound struct {
	PerTenant int
	Total     int
}

// holdRetry is what a refusal to hold a session or a stream suggests: such
// things are given back when a client closes them or they idle out, which
// nothing here can predict.
const holdRetry = 30 * time.Second

// callRetry is what a refusal for calls in progress suggests: most calls
// end within it.
const callRetry = time.Second

// decideHold decides whether a tenant holding tenantHeld of kind, while
// all hold totalHeld, may take one more under b. It returns nil to admit.
func decideHold(kind Kind, tenantHeld, totalHeld int, b Bound) *Refusal {
	reason, retry := holdReason(kind)
	switch {
	case tenantHeld >= b.PerTenant:
		return &Refusal{Reason: reason, Scope: ScopeTenant, Limit: float64(b.PerTenant), RetryAfter: retry}
	case totalHeld >= b.Total:
		return &Refusal{Reason: reason, Scope: ScopeGateway, Limit: float64(b.Total), RetryAfter: retry}
	}
	return nil
}

func holdReason(kind Kind) (Reason, time.Duration) {
	switch kind {
	case Sessions:
		return ReasonSessionLimit, holdRetry
	case Streams:
		return ReasonStreamLimit, holdRetry
	}
	return ReasonConcurrencyLimit, callRetry
}

// decideRate decides whether a call that the token bucket would delay by
// delay may go now: only an undelayed one may, since a call is refused
// rather than held.
func decideRate(delay time.Duration, reason Reason, scope Scope, limit float64) *Refusal {
	if delay <= 0 {
		return nil
	}
	return &Refusal{Reason: reason, Scope: scope, Limit: limit, RetryAfter: delay}
}

// decidePace decides how long a refusal of a tool call is held before it
// is answered: not at all while the tenant's prompt refusals last (prompt
// is whether one was left), delay once they are spent. A client that waits
// retry_after (at least a second) after each refusal is refused at most
// once a second for each call it has in progress; one that ignores it is
// refused as fast as it sends, and pacing its refusals bounds that rate at
// its connections divided by delay.
func decidePace(prompt bool, delay time.Duration) time.Duration {
	if prompt {
		return 0
	}
	return delay
}

// Options are the limits a Keeper enforces; every field must be positive.
type Options struct {
	Sessions Bound
	Streams  Bound
	// CallsPerTenant bounds one tenant's tool calls in progress (the total
	// is bounded by the connections the listener takes).
	CallsPerTenant int
	// CallRate is one tenant's tool calls per second, CallBurst how many
	// it may make at once.
	CallRate  float64
	CallBurst int
	// JobsPerTenant bounds one tenant's worker jobs (sends, polls,
	// reconciliations) running at once; more wait their turn.
	JobsPerTenant int
	// AcceptsPerTenant bounds one tenant's consequential calls being
	// accepted into the ledger at once; more wait their turn.
	AcceptsPerTenant int
	// RefusalDelay is how long a refused tool call is held before it is
	// answered once its tenant has been refused more than CallsPerTenant
	// times in the last second.
	RefusalDelay time.Duration
	// SignInsPerMinute bounds sign-in attempts per source address.
	SignInsPerMinute int
	// Registerer, when set, gets the limits, what is held and the
	// refusals by reason.
	Registerer prometheus.Registerer
}

// Keeper holds what each tenant holds on this replica and the token
// buckets of tenants and source addresses.
type Keeper struct {
	opts Options

	mu    sync.Mutex
	held  map[Kind]map[string]int
	total map[Kind]int
	rates map[string]*rate.Limiter
	// turns holds each tenant's places for worker jobs and acceptances,
	// and how many hold or wait for one, so that an idle tenant's entry
	// is dropped.
	turns map[turnKey]*tenantTurns
	// prompt holds each tenant's refusals that are answered at once:
	// CallsPerTenant a second, as many at once.
	prompt  map[string]*rate.Limiter
	signIns map[string]*rate.Limiter
	// callEnded is closed, and replaced, whenever a call in progress ends,
	// waking the calls that wait for one of their tenant's to end.
	callEnded chan struct{}

	refused *prometheus.CounterVec
	paced   prometheus.Counter
}

// CallWait is how long a tool call past its tenant's calls in progress
// waits for one of them to end before it is refused. A client that sends
// its next call as soon as it has an answer may be a moment ahead of the
// end of the call that answered, and a tenant that floods spends its
// refusals more slowly.
const CallWait = 250 * time.Millisecond

// maxAddresses bounds the source addresses whose sign-in buckets are kept;
// past it, full buckets (addresses that have not tried for a while) are
// dropped, and so cost nothing.
const maxAddresses = 4096

// New returns a Keeper of opts, registering its metrics.
func New(opts Options) *Keeper {
	k := &Keeper{
		opts:      opts,
		held:      map[Kind]map[string]int{Sessions: {}, Streams: {}, Calls: {}, Jobs: {}, Accepts: {}},
		total:     map[Kind]int{},
		rates:     map[string]*rate.Limiter{},
		prompt:    map[string]*rate.Limiter{},
		turns:     map[turnKey]*tenantTurns{},
		signIns:   map[string]*rate.Limiter{},
		callEnded: make(chan struct{}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "taskgate_limit_refusals_total",
			Help: "Requests refused because a limit was reached, by data.reason.",
		}, []string{"reason"}),
		paced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "taskgate_limit_paced_refusals_total",
			Help: "Refused tool calls answered only after limits.refusal_delay, because their tenant was refused faster than a client that waits retry_after would be.",
		}),
	}
	if r := opts.Registerer; r != nil {
		k.register(r)
	}
	return k
}

func (k *Keeper) register(r prometheus.Registerer) {
	limit := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "taskgate_limit",
		Help: "Each configured limit: per tenant, in total, or per second for a rate.",
	}, []string{"limit"})
	for name, v := range map[string]float64{
		"sessions": float64(k.opts.Sessions.Total), "sessions_per_tenant": float64(k.opts.Sessions.PerTenant),
		"streams": float64(k.opts.Streams.Total), "streams_per_tenant": float64(k.opts.Streams.PerTenant),
		"calls_per_tenant": float64(k.opts.CallsPerTenant), "call_rate": k.opts.CallRate, "call_burst": float64(k.opts.CallBurst),
		"sign_ins_per_minute": float64(k.opts.SignInsPerMinute), "refusal_delay_seconds": k.opts.RefusalDelay.Seconds(),
		"jobs_per_tenant": float64(k.opts.JobsPerTenant), "accepts_per_tenant": float64(k.opts.AcceptsPerTenant),
	} {
		limit.WithLabelValues(name).Set(v)
	}
	held := prometheus.NewDesc("taskgate_limit_held", "What all tenants hold now of each bounded kind: sessions, streams, calls, worker jobs, acceptances.", []string{"kind"}, nil)
	r.MustRegister(limit, k.refused, k.paced, heldCollector{k, held})
	for _, reason := range []Reason{ReasonSessionLimit, ReasonStreamLimit, ReasonConcurrencyLimit, ReasonRateLimited, ReasonSignInRateLimit} {
		k.refused.WithLabelValues(string(reason))
	}
}

// heldCollector reports what is held as the scrape happens.
type heldCollector struct {
	k    *Keeper
	desc *prometheus.Desc
}

func (c heldCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c heldCollector) Collect(ch chan<- prometheus.Metric) {
	for _, kind := range []Kind{Sessions, Streams, Calls, Jobs, Accepts} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(c.k.Held(kind, "")), string(kind))
	}
}

// Held returns what tenant holds of kind, or, for tenant "", what all do.
func (k *Keeper) Held(kind Kind, tenant string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if tenant == "" {
		return k.total[kind]
	}
	return k.held[kind][tenant]
}

func (k *Keeper) bound(kind Kind) Bound {
	switch kind {
	case Sessions:
		return k.opts.Sessions
	case Streams:
		return k.opts.Streams
	}
	// Calls in progress are bounded per tenant; the listener's connection
	// limit bounds them in total.
	return Bound{PerTenant: k.opts.CallsPerTenant, Total: math.MaxInt}
}

// Hold takes one of kind for tenant, or refuses. The release function it
// returns gives it back; calling it more than once gives back once.
func (k *Keeper) Hold(kind Kind, tenant string) (release func(), _ *Refusal) {
	release, refusal, _ := k.take(kind, tenant)
	if refusal != nil {
		k.refused.WithLabelValues(string(refusal.Reason)).Inc()
	}
	return release, refusal
}

// take is Hold without counting a refusal; it also returns the channel
// that the next end of a call closes, read with the decision.
func (k *Keeper) take(kind Kind, tenant string) (release func(), _ *Refusal, callEnded <-chan struct{}) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if r := decideHold(kind, k.held[kind][tenant], k.total[kind], k.bound(kind)); r != nil {
		return nil, r, k.callEnded
	}
	k.held[kind][tenant]++
	k.total[kind]++
	var once sync.Once
	return func() {
		once.Do(func() {
			k.mu.Lock()
			defer k.mu.Unlock()
			if k.held[kind][tenant]--; k.held[kind][tenant] <= 0 {
				delete(k.held[kind], tenant)
			}
			k.total[kind]--
			if kind == Calls {
				close(k.callEnded)
				k.callEnded = make(chan struct{})
			}
		})
	}, nil, nil
}

// Call admits one tool call of tenant at now, or refuses it: past the
// tenant's rate, or with as many of its calls in progress as allowed for
// longer than CallWait (or until ctx ends). A call refused for concurrency
// does not spend a token. A refusal's Pace says how long to hold it before
// answering: RefusalDelay once the tenant has been refused more than
// CallsPerTenant times in the last second.
func (k *Keeper) Call(ctx context.Context, tenant string, now time.Time) (release func(), _ *Refusal) {
	k.mu.Lock()
	lim := k.rates[tenant]
	if lim == nil {
		lim = rate.NewLimiter(rate.Limit(k.opts.CallRate), k.opts.CallBurst)
		k.rates[tenant] = lim
	}
	k.mu.Unlock()
	release, waited, refusal := k.holdCall(ctx, tenant)
	if refusal != nil {
		return nil, k.callRefused(tenant, refusal, now.Add(waited))
	}
	// The bucket is read when the wait ended: a reservation dated before
	// the bucket's last would count the time between them twice.
	now = now.Add(waited)
	res := lim.ReserveN(now, 1)
	if r := decideRate(res.DelayFrom(now), ReasonRateLimited, ScopeTenant, k.opts.CallRate); r != nil {
		res.CancelAt(now)
		release()
		return nil, k.callRefused(tenant, r, now)
	}
	return release, nil
}

// callRefused counts r, a refusal of tenant's tool call at now, and sets
// how long it is held before it is answered.
func (k *Keeper) callRefused(tenant string, r *Refusal, now time.Time) *Refusal {
	k.mu.Lock()
	prompt := k.prompt[tenant]
	if prompt == nil {
		prompt = rate.NewLimiter(rate.Limit(k.opts.CallsPerTenant), k.opts.CallsPerTenant)
		k.prompt[tenant] = prompt
	}
	k.mu.Unlock()
	r.Pace = decidePace(prompt.AllowN(now, 1), k.opts.RefusalDelay)
	k.refused.WithLabelValues(string(r.Reason)).Inc()
	if r.Pace > 0 {
		k.paced.Inc()
	}
	return r
}

// holdCall holds a call in progress for tenant, waiting up to CallWait for
// one of the tenant's calls to end when it holds as many as allowed. It
// returns how long it waited: zero when it did not.
func (k *Keeper) holdCall(ctx context.Context, tenant string) (func(), time.Duration, *Refusal) {
	release, refusal, ended := k.take(Calls, tenant)
	if refusal == nil {
		return release, 0, nil
	}
	start := time.Now()
	wait := time.NewTimer(CallWait)
	defer wait.Stop()
	for {
		select {
		case <-ended:
		case <-wait.C:
			return nil, time.Since(start), refusal
		case <-ctx.Done():
			return nil, time.Since(start), refusal
		}
		if release, refusal, ended = k.take(Calls, tenant); refusal == nil {
			return release, time.Since(start), nil
		}
	}
}

// turnKey names one tenant's places of one kind (Jobs or Accepts).
type turnKey struct {
	kind   Kind
	tenant string
}

// tenantTurns is one tenant's places of one kind: a semaphore of its
// bound, and how many hold or wait on it.
type tenantTurns struct {
	sem   *semaphore.Weighted
	users int
}

// Job holds one of tenant's worker jobs running, waiting while the tenant
// has JobsPerTenant running, until ctx ends (then it returns ctx's error).
// A tenant with a backlog thus takes at most its share of the worker, and
// another tenant's work still finds the ledger and the processors free.
// The release function gives the place back; calling it more than once
// gives back once.
func (k *Keeper) Job(ctx context.Context, tenant string) (release func(), _ error) {
	return k.turn(ctx, Jobs, tenant, k.opts.JobsPerTenant)
}

// Accept holds one of tenant's acceptances of a consequential call,
// waiting while the tenant has AcceptsPerTenant in progress, until ctx
// ends: a tenant with many calls at once does not fill the ledger's
// commits ahead of another's. Release as for Job.
func (k *Keeper) Accept(ctx context.Context, tenant string) (release func(), _ error) {
	return k.turn(ctx, Accepts, tenant, k.opts.AcceptsPerTenant)
}

func (k *Keeper) turn(ctx context.Context, kind Kind, tenant string, bound int) (release func(), _ error) {
	key := turnKey{kind, tenant}
	k.mu.Lock()
	tt := k.turns[key]
	if tt == nil {
		tt = &tenantTurns{sem: semaphore.NewWeighted(int64(bound))}
		k.turns[key] = tt
	}
	tt.users++
	k.mu.Unlock()
	leave := func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		if tt.users--; tt.users == 0 {
			delete(k.turns, key)
		}
	}
	if err := tt.sem.Acquire(ctx, 1); err != nil {
		leave()
		return nil, fmt.Errorf("wait for one of tenant %q's %d %s in progress to end: %w", tenant, bound, kind, err)
	}
	k.mu.Lock()
	k.held[kind][tenant]++
	k.total[kind]++
	k.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			k.mu.Lock()
			if k.held[kind][tenant]--; k.held[kind][tenant] <= 0 {
				delete(k.held[kind], tenant)
			}
			k.total[kind]--
			k.mu.Unlock()
			tt.sem.Release(1)
			leave()
		})
	}, nil
}

// SignIn admits one sign-in attempt from addr (a remote address, host:port
// or host) at now, or refuses it.
func (k *Keeper) SignIn(addr string, now time.Time) *Refusal {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	perMinute := float64(k.opts.SignInsPerMinute)
	k.mu.Lock()
	lim := k.signIns[host]
	if lim == nil {
		if len(k.signIns) >= maxAddresses {
			pruneFull(k.signIns, now)
		}
		lim = rate.NewLimiter(rate.Limit(perMinute/60), k.opts.SignInsPerMinute)
		k.signIns[host] = lim
	}
	k.mu.Unlock()
	res := lim.ReserveN(now, 1)
	if r := decideRate(res.DelayFrom(now), ReasonSignInRateLimit, ScopeAddress, perMinute); r != nil {
		res.CancelAt(now)
		k.refused.WithLabelValues(string(r.Reason)).Inc()
		return r
	}
	return nil
}

// pruneFull drops the buckets that are full at now: their addresses have
// not tried for long enough that a new bucket is the same.
func pruneFull(buckets map[string]*rate.Limiter, now time.Time) {
	for addr, lim := range buckets {
		if lim.TokensAt(now) >= float64(lim.Burst()) {
			delete(buckets, addr)
		}
	}
}
