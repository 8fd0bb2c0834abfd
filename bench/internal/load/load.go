// Package load runs workers against an operation for a warm-up and a
// measured window and reports how many calls completed and how long each
// took. It counts only the calls that complete inside the measured window,
// and it must never retry or pass over a failed call: the first error ends
// the run and is returned.
package load

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Options are a run's workers and window.
type Options struct {
	// Workers is how many goroutines call the operation, each in a loop.
	Workers int
	// Warmup is the unmeasured time before the window, on the same workers.
	Warmup time.Duration
	// Duration is the measured window.
	Duration time.Duration
	// Grace, when positive, is how long a call may still run after the
	// window closes; a run that is not over by then fails. Zero waits for
	// every call.
	Grace time.Duration
	// Meter, when set, is called as the window opens; the function it
	// returns is called as the window closes, so that it can read counters
	// of its own over exactly the window. It is not called when the run is
	// cut short.
	Meter func() (closed func())
	// Interval, when positive, is the least time between the starts of
	// one worker's calls, for a workload that keeps to a rate; the wait
	// before a call is not part of its latency.
	Interval time.Duration
}

// Op is one call: the worker's seq-th, counting from zero.
type Op func(ctx context.Context, worker, seq int) error

// Window is what a run observed.
type Window struct {
	// Calls is how many calls completed inside the measured window.
	Calls int64
	// Total is how many calls completed, warm-up included.
	Total int64
	// Seconds is how long the window was open.
	Seconds float64
	// Latencies are the durations of the window's calls, shortest first.
	Latencies []time.Duration
}

const (
	phaseWarmup int32 = iota
	phaseMeasure
	phaseDone
)

// Run calls op from o.Workers goroutines through the warm-up and then the
// measured window, and counts the calls that complete inside the window.
// A call counts in the window when it completes there, even if it began in
// the warm-up.
func Run(ctx context.Context, o Options, op Op) (*Window, error) {
	var cancel context.CancelFunc
	if o.Grace > 0 {
		ctx, cancel = context.WithTimeout(ctx, o.Warmup+o.Duration+o.Grace)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	var (
		phase     atomic.Int32
		errOnce   sync.Once
		firstErr  error
		wg        sync.WaitGroup
		latencies = make([][]time.Duration, o.Workers)
		totals    = make([]int64, o.Workers)
	)
	for worker := range o.Workers {
		wg.Go(func() {
			pace := rate.NewLimiter(rate.Inf, 1)
			if o.Interval > 0 {
				pace = rate.NewLimiter(rate.Every(o.Interval), 1)
			}
			for seq := 0; phase.Load() != phaseDone; seq++ {
				if pace.Wait(ctx) != nil || phase.Load() == phaseDone {
					return
				}
				start := time.Now()
				if err := op(ctx, worker, seq); err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
				totals[worker]++
				if phase.Load() == phaseMeasure {
					latencies[worker] = append(latencies[worker], time.Since(start))
				}
			}
		})
	}
	sleep := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
	w := &Window{}
	if sleep(o.Warmup) {
		closed := func() {}
		if o.Meter != nil {
			closed = o.Meter()
		}
		t0 := time.Now()
		phase.Store(phaseMeasure)
		if sleep(o.Duration) {
			phase.Store(phaseDone)
			w.Seconds = time.Since(t0).Seconds()
			closed()
		}
	}
	phase.Store(phaseDone)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("interrupted: %w", err)
	}
	for i := range o.Workers {
		w.Total += totals[i]
		w.Calls += int64(len(latencies[i]))
		w.Latencies = append(w.Latencies, latencies[i]...)
	}
	if w.Calls == 0 {
		return nil, errors.New("no call completed inside the measured window; lengthen -duration")
	}
	slices.Sort(w.Latencies)
	return w, nil
}

// PerSecond is the window's calls per second.
func (w *Window) PerSecond() float64 {
	if w.Seconds <= 0 {
		return 0
	}
	return float64(w.Calls) / w.Seconds
}

// PercentileMs is the p-th percentile (0 to 100) of the window's
// latencies in milliseconds: the latency at or below which p percent of the
// calls completed, rounded down to a call's own.
func (w *Window) PercentileMs(p int) float64 {
	n := len(w.Latencies)
	if n == 0 {
		return 0
	}
	return float64(w.Latencies[(n-1)*p/100]) / float64(time.Millisecond)
}

// Median returns the round whose rate is the median, and the rate of every
// round in run order when there were several (nil for a single round), so
// that a report can show how much the rounds spread.
func Median[T any](rounds []T, rate func(T) float64) (T, []float64) {
	sorted := slices.SortedFunc(slices.Values(rounds), func(a, b T) int { return cmp.Compare(rate(a), rate(b)) })
	m := sorted[(len(sorted)-1)/2]
	if len(rounds) < 2 {
		return m, nil
	}
	rates := make([]float64, len(rounds))
	for i, r := range rounds {
		rates[i] = rate(r)
	}
	return m, rates
}
