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
		CallsPerTenant: 2, CallRate: 10, CallBurst: 3, SignInsPerMinute: 2, Registerer: reg,
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
