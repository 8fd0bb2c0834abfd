package load

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestRunCountsOnlyTheWindow(t *testing.T) {
	t.Parallel()
	// Run's windows and the operations' waits follow the bubble's clock:
	// exact, and taking no real time.
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var calls, metered atomic.Int64
		opened, closed := false, false
		w, err := Run(ctx, Options{
			Workers:  3,
			Warmup:   20 * time.Millisecond,
			Duration: 100 * time.Millisecond,
			Meter: func() func() {
				opened = true
				n := calls.Load()
				return func() { closed = true; metered.Store(calls.Load() - n) }
			},
		}, func(ctx context.Context, worker, seq int) error {
			if worker < 0 || worker >= 3 || seq < 0 {
				return errors.New("worker or seq out of range")
			}
			calls.Add(1)
			time.Sleep(time.Millisecond)
			return nil
		})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if w.Calls <= 0 || w.Total < w.Calls || w.Total != calls.Load() {
			t.Errorf("calls %d in the window, %d in all, %d made; want 0 < window <= all = made", w.Calls, w.Total, calls.Load())
		}
		if int64(len(w.Latencies)) != w.Calls || !slices.IsSorted(w.Latencies) {
			t.Errorf("%d latencies for %d calls, sorted %t; want one per call, shortest first", len(w.Latencies), w.Calls, slices.IsSorted(w.Latencies))
		}
		if !opened || !closed || metered.Load() <= 0 {
			t.Errorf("meter opened %t, closed %t, saw %d calls; want it to see the window's calls", opened, closed, metered.Load())
		}
		if w.Seconds <= 0 || w.PerSecond() <= 0 {
			t.Errorf("window %v s at %v calls/s; want both positive", w.Seconds, w.PerSecond())
		}
	})
}

// A worker with an Interval starts its calls that far apart, and the wait
// before a call is not part of its latency.
func TestRunKeepsTheInterval(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w, err := Run(context.Background(), Options{
			Workers:  1,
			Warmup:   15 * time.Millisecond,
			Duration: 100 * time.Millisecond,
			Interval: 10 * time.Millisecond,
		}, func(ctx context.Context, worker, seq int) error {
			time.Sleep(time.Millisecond)
			return nil
		})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if w.Calls < 9 || w.Calls > 11 {
			t.Errorf("%d calls in a 100ms window at one every 10ms, want about 10", w.Calls)
		}
		if last := w.Latencies[len(w.Latencies)-1]; last != time.Millisecond {
			t.Errorf("longest latency %v, want the call's own 1ms", last)
		}
	})
}

func TestRunReturnsTheFirstError(t *testing.T) {
	t.Parallel()
	// Run's windows and the operations' waits follow the bubble's clock:
	// exact, and taking no real time.
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		boom := errors.New("boom")
		_, err := Run(ctx, Options{Workers: 4, Warmup: time.Hour, Duration: time.Hour}, func(ctx context.Context, worker, seq int) error {
			if worker == 2 && seq == 5 {
				return boom
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Millisecond):
				return nil
			}
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Run = %v, want the operation's own error", err)
		}
	})
}

func TestRunGraceBoundsAHangingCall(t *testing.T) {
	t.Parallel()
	// Run's windows and the operations' waits follow the bubble's clock:
	// exact, and taking no real time.
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := Run(ctx, Options{Workers: 1, Duration: 10 * time.Millisecond, Grace: 10 * time.Millisecond}, func(ctx context.Context, _, _ int) error {
			<-ctx.Done()
			return nil
		})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Run = %v, want the grace deadline", err)
		}
	})
}

func TestPercentileMs(t *testing.T) {
	t.Parallel()
	ms := func(n ...int) []time.Duration {
		var out []time.Duration
		for _, v := range n {
			out = append(out, time.Duration(v)*time.Millisecond)
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name      string
		latencies []time.Duration
		p         int
		want      float64
	}{
		{"none", nil, 50, 0},
		{"one", ms(7), 99, 7},
		{"median of an even count takes the lower", ms(1, 2, 3, 4), 50, 2},
		{"median of an odd count", ms(1, 2, 3), 50, 2},
		{"p99 of a hundred", ms(hundred...), 99, 99},
		{"p50 of a hundred", ms(hundred...), 50, 50},
	}
	for _, tt := range tests {
		w := &Window{Latencies: tt.latencies}
		if got := w.PercentileMs(tt.p); got != tt.want {
			t.Errorf("%s: PercentileMs(%d) = %v, want %v", tt.name, tt.p, got, tt.want)
		}
	}
}

func TestMedianKeepsEveryRound(t *testing.T) {
	t.Parallel()
	type round struct{ rate, p50 float64 }
	rate := func(r round) float64 { return r.rate }
	got, rates := Median([]round{{300, 3}, {100, 1}, {200, 2}}, rate)
	if got != (round{200, 2}) {
		t.Errorf("Median picked %+v, want the 200/s round", got)
	}
	if want := []float64{300, 100, 200}; !slices.Equal(rates, want) {
		t.Errorf("Median rates = %v, want %v in run order", rates, want)
	}
	if _, one := Median([]round{{5, 1}}, rate); one != nil {
		t.Errorf("a single round lists rates %v, want none", one)
	}
}
