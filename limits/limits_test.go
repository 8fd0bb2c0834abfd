package limits

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestDecideHold(t *testing.T) {
	b := Bound{PerTenant: 2, Total: 5}
	tests := []struct {
		name              string
		kind              Kind
		tenantHeld, total int
		wantReason        Reason
		wantScope         Scope
		wantLimit         float64
		wantRetry         time.Duration
	}{
		{"first", Sessions, 0, 0, "", "", 0, 0},
		{"below both", Sessions, 1, 4, "", "", 0, 0},
		{"tenant full", Sessions, 2, 2, ReasonSessionLimit, ScopeTenant, 2, holdRetry},
		{"gateway full", Sessions, 0, 5, ReasonSessionLimit, ScopeGateway, 5, holdRetry},
		{"both full names the tenant's", Streams, 2, 5, ReasonStreamLimit, ScopeTenant, 2, holdRetry},
		{"calls", Calls, 2, 3, ReasonConcurrencyLimit, ScopeTenant, 2, callRetry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := decideHold(tt.kind, tt.tenantHeld, tt.total, b)
			if tt.wantReason == "" {
				if r != nil {
					t.Fatalf("refused: %v", r)
				}
				return
			}
			if r == nil {
				t.Fatal("admitted")
			}
			if r.Reason != tt.wantReason || r.Scope != tt.wantScope || r.Limit != tt.wantLimit || r.RetryAfter != tt.wantRetry {
				t.Errorf("refusal = %+v, want %s %s %g %s", r, tt.wantReason, tt.wantScope, tt.wantLimit, tt.wantRetry)
			}
		})
	}
}

func TestDecideRate(t *testing.T) {
	tests := []struct {
		delay     time.Duration
		admit     bool
		retryAfer int
	}{
		{0, true, 0},
		{-time.Second, true, 0},
		{time.Millisecond, false, 1},
		{1500 * time.Millisecond, false, 2},
		{3 * time.Second, false, 3},
	}
	for _, tt := range tests {
		r := decideRate(tt.delay, ReasonRateLimited, ScopeTenant, 5)
		if (r == nil) != tt.admit {
			t.Errorf("delay %s: refusal %v, want admitted %v", tt.delay, r, tt.admit)
			continue
		}
		if r != nil && r.RetryAfterSeconds() != tt.retryAfer {
			t.Errorf("delay %s: retry after %d s, want %d", tt.delay, r.RetryAfterSeconds(), tt.retryAfer)
		}
	}
}

func TestDecidePace(t *testing.T) {
	tests := []struct {
		prompt bool
		delay  time.Duration
		want   time.Duration
	}{
		{true, time.Second, 0},
		{false, time.Second, time.Second},
		{false, 10 * time.Millisecond, 10 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := decidePace(tt.prompt, tt.delay); got != tt.want {
			t.Errorf("decidePace(%v, %s) = %s, want %s", tt.prompt, tt.delay, got, tt.want)
		}
	}
}

// TestRefusalsPacedPastPrompt walks tenants' calls at given times through
// a keeper of 2 calls in progress, 1 a second and a refusal delay of 2s:
// a tenant is refused at most 2 times a second at once; past that each
// refusal is held. Clients that wait retry_after are never held.
func TestRefusalsPacedPastPrompt(t *testing.T) {
	k := New(Options{Sessions: Bound{1, 1}, Streams: Bound{1, 1}, CallsPerTenant: 2, CallRate: 1, CallBurst: 1,
		SignInsPerMinute: 1, RefusalDelay: 2 * time.Second, JobsPerTenant: 1, Registerer: prometheus.NewRegistry()})
	now := time.Unix(1000, 0)
	steps := []struct {
		tenant   string
		at       time.Duration
		admitted bool
		pace     time.Duration
	}{
		// A flood: the first is admitted, two refusals are answered at
		// once, the rest are held.
		{"flood", 0, true, 0},
		{"flood", 0, false, 0},
		{"flood", 0, false, 0},
		{"flood", 0, false, 2 * time.Second},
		{"flood", 10 * time.Millisecond, false, 2 * time.Second},
		// Another tenant is not concerned.
		{"other", 10 * time.Millisecond, true, 0},
		{"other", 10 * time.Millisecond, false, 0},
		// Half a second on, one prompt refusal is back.
		{"flood", 510 * time.Millisecond, false, 0},
		{"flood", 510 * time.Millisecond, false, 2 * time.Second},
		// Two clients that wait retry_after (a second) after a refusal:
		// each second one is admitted and one refused, never held.
		{"honest", 0, true, 0},
		{"honest", 0, false, 0},
		{"honest", time.Second, true, 0},
		{"honest", time.Second, false, 0},
		{"honest", 2 * time.Second, true, 0},
		{"honest", 2 * time.Second, false, 0},
		{"honest", 3 * time.Second, true, 0},
		{"honest", 3 * time.Second, false, 0},
	}
	paced := 0
	for i, s := range steps {
		release, r := k.Call(context.Background(), s.tenant, now.Add(s.at))
		if (r == nil) != s.admitted {
			t.Fatalf("step %d (%s at %s): refusal %v, want admitted %v", i, s.tenant, s.at, r, s.admitted)
		}
		if release != nil {
			release()
			continue
		}
		if r.Reason != ReasonRateLimited || r.Pace != s.pace {
			t.Errorf("step %d (%s at %s): %s held %s, want %s held %s", i, s.tenant, s.at, r.Reason, r.Pace, ReasonRateLimited, s.pace)
		}
		if r.Pace > 0 {
			paced++
		}
	}
	if got := testutil.ToFloat64(k.paced); got != float64(paced) {
		t.Errorf("taskgate_limit_paced_refusals_total = %g, want %d", got, paced)
	}
}

func TestJobsPerTenant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		k := testKeeper(nil) // 2 jobs per tenant
		a1, err := k.Job(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		a2, err := k.Job(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		// A third waits, until its context ends.
		done, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := k.Job(done, "a"); err == nil {
			t.Fatal("a third job of a tenant with 2 running did not wait")
		}
		// Another tenant's job runs at once.
		b1, err := k.Job(ctx, "b")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan func(), 1)
		go func() {
			release, err := k.Job(ctx, "a")
			if err != nil {
				t.Error(err)
			}
			got <- release
		}()
		synctest.Wait() // the third waits for one of a's to end
		select {
		case <-got:
			t.Fatal("a third job ran while 2 of the tenant's ran")
		default:
		}
		a1()
		a1() // a second release gives nothing back
		a3 := <-got
		if n := k.Held(Jobs, "a"); n != 2 {
			t.Errorf("a holds %d jobs, want 2", n)
		}
		if _, err := k.Job(done, "a"); err == nil {
			t.Fatal("after one release given twice, the tenant had room for a fourth job")
		}
		a2()
		a3()
		b1()
		// Acceptances are bounded apart from jobs.
		acc, err := k.Accept(ctx, "a")
		if err != nil {
			t.Fatalf("a first acceptance: %v", err)
		}
		acc2, err := k.Accept(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.Accept(done, "a"); err == nil {
			t.Fatal("a third acceptance of a tenant with 2 in progress did not wait")
		}
		if n := k.Held(Accepts, ""); n != 2 {
			t.Errorf("%d acceptances held, want 2", n)
		}
		acc()
		acc2()
		if n := len(k.turns); n != 0 {
			t.Errorf("%d tenants' job places kept with none running", n)
		}
	})
}

func TestRefusalMessagesNameTheLimit(t *testing.T) {
	for _, r := range []*Refusal{
		{Reason: ReasonSessionLimit, Scope: ScopeTenant, Limit: 100, RetryAfter: holdRetry},
		{Reason: ReasonStreamLimit, Scope: ScopeGateway, Limit: 1000, RetryAfter: holdRetry},
		{Reason: ReasonConcurrencyLimit, Scope: ScopeTenant, Limit: 16, RetryAfter: callRetry},
		{Reason: ReasonRateLimited, Scope: ScopeTenant, Limit: 50, RetryAfter: 20 * time.Millisecond},
		{Reason: ReasonSignInRateLimit, Scope: ScopeAddress, Limit: 10, RetryAfter: 6 * time.Second},
	} {
		msg := r.Error()
		if !strings.Contains(msg, strconv.FormatFloat(r.Limit, 'g', -1, 64)) || !strings.Contains(msg, fmt.Sprintf("retry in %d s", r.RetryAfterSeconds())) {
			t.Errorf("%s: %q does not say the limit and when to retry", r.Reason, msg)
		}
	}
}

func testKeeper(reg prometheus.Registerer) *Keeper {
	return New(Options{
		Sessions: Bound{PerTenant: 2, Total: 3}, Streams: Bound{PerTenant: 1, Total: 10},
		CallsPerTenant: 2, CallRate: 10, CallBurst: 3, SignInsPerMinute: 2, RefusalDelay: 2 * time.Second,
		JobsPerTenant: 2, AcceptsPerTenant: 2, Registerer: reg,
	})
}

func TestHoldPerTenantAndTotal(t *testing.T) {
	reg := prometheus.NewRegistry()
	k := testKeeper(reg)
	var releases []func()
	take := func(tenant string) *Refusal {
		rel, r := k.Hold(Sessions, tenant)
		if rel != nil {
			releases = append(releases, rel)
		}
		return r
	}
	steps := []struct {
		tenant string
		want   Reason
		scope  Scope
	}{
		{"a", "", ""}, {"a", "", ""}, {"a", ReasonSessionLimit, ScopeTenant},
		{"b", "", ""}, {"b", ReasonSessionLimit, ScopeGateway}, {"c", ReasonSessionLimit, ScopeGateway},
	}
	for i, s := range steps {
		r := take(s.tenant)
		got, scope := Reason(""), Scope("")
		if r != nil {
			got, scope = r.Reason, r.Scope
		}
		if got != s.want || scope != s.scope {
			t.Fatalf("step %d (%s): refusal %q %q, want %q %q", i, s.tenant, got, scope, s.want, s.scope)
		}
	}
	releases[0]()
	releases[0]() // a second release gives nothing back
	if got := k.Held(Sessions, "a"); got != 1 {
		t.Errorf("a holds %d after one release, want 1", got)
	}
	if r := take("c"); r != nil {
		t.Errorf("after a release, c refused: %v", r)
	}
	if got := testutil.ToFloat64(k.refused.WithLabelValues(string(ReasonSessionLimit))); got != 3 {
		t.Errorf("refusals counted %g, want 3", got)
	}
	if n, err := testutil.GatherAndCount(reg, "taskgate_limit", "taskgate_limit_held", "taskgate_limit_refusals_total"); err != nil || n == 0 {
		t.Errorf("metrics: %d, %v", n, err)
	}
}

func TestCallConcurrencyAndRate(t *testing.T) {
	ctx := context.Background()
	k := testKeeper(nil)
	now := time.Unix(1000, 0)
	r1, ref := k.Call(ctx, "a", now)
	if ref != nil {
		t.Fatal(ref)
	}
	_, ref = k.Call(ctx, "a", now)
	if ref != nil {
		t.Fatal(ref)
	}
	// Past its calls in progress, a call waits up to CallWait for one to
	// end (here until its context ends), then is refused.
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, ref = k.Call(done, "a", now); ref == nil || ref.Reason != ReasonConcurrencyLimit {
		t.Fatalf("third call in progress: %v, want %s", ref, ReasonConcurrencyLimit)
	}
	// Another tenant is not concerned.
	if _, ref = k.Call(ctx, "b", now); ref != nil {
		t.Fatalf("tenant b: %v", ref)
	}
	r1()
	// The burst of 3 is spent by the third admitted call; the refused one
	// spent nothing.
	if _, ref = k.Call(ctx, "a", now); ref != nil {
		t.Fatalf("third token: %v", ref)
	}
	r1()
	k2 := testKeeper(nil)
	for i := range 3 {
		rel, ref := k2.Call(ctx, "a", now)
		if ref != nil {
			t.Fatalf("call %d of the burst: %v", i, ref)
		}
		rel()
	}
	_, ref = k2.Call(ctx, "a", now)
	if ref == nil || ref.Reason != ReasonRateLimited || ref.RetryAfter != 100*time.Millisecond || ref.RetryAfterSeconds() != 1 {
		t.Fatalf("past the burst: %+v, want rate_limited after 100ms", ref)
	}
	if k2.Held(Calls, "a") != 0 {
		t.Errorf("a refused call is held")
	}
	// A tenth of a second later a token has come back.
	if _, ref = k2.Call(ctx, "a", now.Add(100*time.Millisecond)); ref != nil {
		t.Errorf("after the refill: %v", ref)
	}
}

func TestSignInPerAddress(t *testing.T) {
	k := testKeeper(nil)
	now := time.Unix(1000, 0)
	tests := []struct {
		addr   string
		at     time.Duration
		refuse bool
	}{
		{"127.0.0.1:4000", 0, false},
		{"127.0.0.1:4001", 0, false}, // another port, the same address
		{"127.0.0.1:4002", 0, true},
		{"127.0.0.2:4000", 0, false},
		{"127.0.0.1:4003", 30 * time.Second, false}, // two a minute: one back after 30s
		{"127.0.0.1:4003", 30 * time.Second, true},
	}
	for i, tt := range tests {
		r := k.SignIn(tt.addr, now.Add(tt.at))
		if (r != nil) != tt.refuse {
			t.Fatalf("attempt %d from %s: refusal %v, want refused %v", i, tt.addr, r, tt.refuse)
		}
		if r != nil && r.Reason != ReasonSignInRateLimit {
			t.Errorf("reason %s", r.Reason)
		}
	}
}

func TestSignInBucketsArePruned(t *testing.T) {
	k := testKeeper(nil)
	now := time.Unix(1000, 0)
	for i := range maxAddresses + 10 {
		k.SignIn("192.0.2."+strconv.Itoa(i)+":80", now.Add(time.Duration(i)*time.Hour))
	}
	if n := len(k.signIns); n > maxAddresses {
		t.Errorf("%d buckets kept, want at most %d", n, maxAddresses)
	}
}

func TestCallWaitsForAnotherToEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		k := New(Options{Sessions: Bound{1, 1}, Streams: Bound{1, 1}, CallsPerTenant: 1, CallRate: 1000, CallBurst: 1000, SignInsPerMinute: 1})
		first, ref := k.Call(ctx, "a", time.Now())
		if ref != nil {
			t.Fatal(ref)
		}
		admitted := make(chan *Refusal, 1)
		go func() {
			release, ref := k.Call(ctx, "a", time.Now())
			if release != nil {
				release()
			}
			admitted <- ref
		}()
		synctest.Wait() // the second call waits for the first to end
		first()
		if ref := <-admitted; ref != nil {
			t.Errorf("a call that waited for the tenant's other call to end was refused: %v", ref)
		}
		// With nothing ending, the wait runs out and the call is refused.
		held, _ := k.Call(ctx, "a", time.Now())
		defer held()
		if _, ref := k.Call(ctx, "a", time.Now()); ref == nil || ref.Reason != ReasonConcurrencyLimit {
			t.Errorf("with the tenant's call still in progress after CallWait: %v, want %s", ref, ReasonConcurrencyLimit)
		}
	})
}

// TestCallThatWaitedIsRatedWhenItEnds: a call that waited for one of its
// tenant's calls to end is judged by the tenant's bucket as it is when the
// wait ends, not as it was when the call came.
func TestCallThatWaitedIsRatedWhenItEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		k := New(Options{Sessions: Bound{1, 1}, Streams: Bound{1, 1}, CallsPerTenant: 1, CallRate: 10, CallBurst: 1,
			SignInsPerMinute: 1, RefusalDelay: time.Second, JobsPerTenant: 1})
		first, ref := k.Call(ctx, "a", time.Now())
		if ref != nil {
			t.Fatal(ref)
		}
		got := make(chan *Refusal, 1)
		go func() {
			release, ref := k.Call(ctx, "a", time.Now())
			if release != nil {
				release()
			}
			got <- ref
		}()
		synctest.Wait()
		// A token comes back every 100ms; the first call ends 200ms on.
		time.Sleep(200 * time.Millisecond)
		first()
		if ref := <-got; ref != nil {
			t.Errorf("a call admitted 200ms after it came, with a token back by then: %v", ref)
		}
	})
}
