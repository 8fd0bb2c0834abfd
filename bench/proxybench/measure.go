package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/fixtures"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/providersim"
	"github.com/taskgate/taskgate/taskwire"
)

// The calls the benchmark makes. estimate_suite is a pass-through tool that
// does no more than answer a constant; run_suite is consequential.
const (
	upstreamName = "hosted_test"
	passTool     = providersim.ToolEstimateSuite
	acceptTool   = upstreamName + "." + providersim.ToolRunSuite
	wantEstimate = "18.00"
)

func measureAll(ctx context.Context, o *options, progress io.Writer) (*report, error) {
	log := slog.New(slog.DiscardHandler)
	if o.verbose {
		log = slog.New(slog.NewTextHandler(progress, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	rep := &report{Machine: machineFacts(o)}
	rep.Machine.Upstream = fmt.Sprintf("providersim %s over httptest on loopback", passTool)
	rep.Machine.Ledger = "SQLite, fresh, in " + o.dir
	var err error
	role(ctx, "client", func(ctx context.Context) {
		if o.pass {
			err = withStage(ctx, o, log, rep, func(st *stage) error {
				return measurePassThrough(ctx, o, st, rep, progress)
			})
		}
		if err == nil && o.accept {
			err = measureAcceptance(ctx, o, log, rep, progress)
		}
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// withStage runs f on a new stage and closes it afterwards.
func withStage(ctx context.Context, o *options, log *slog.Logger, rep *report, f func(*stage) error) error {
	st, err := startStage(ctx, o, log)
	if err != nil {
		return err
	}
	defer st.close()
	rep.Machine.Synchronous = st.sync
	return f(st)
}

// passStep is one pass-through measurement of an era.
type passStep struct {
	path     string
	sessions int
}

func (p passStep) target(st *stage) (url, key, tool string) {
	if p.path == "direct" {
		return st.simURL, "", passTool
	}
	return st.gateURL, st.key, upstreamName + "." + passTool
}

// measurePassThrough measures, per era, one session's sequential calls and
// o.sessions sessions' concurrent calls, direct and through the gateway.
// Rounds run every step in turn, so that a burst of load from elsewhere on
// the machine spreads over all steps instead of one.
func measurePassThrough(ctx context.Context, o *options, st *stage, rep *report, progress io.Writer) error {
	steps := []passStep{{"direct", 1}, {"taskgate", 1}, {"direct", o.sessions}, {"taskgate", o.sessions}}
	got := make([][][]measurement, len(o.eras))
	for i := range got {
		got[i] = make([][]measurement, len(steps))
	}
	for round := 1; round <= o.rounds; round++ {
		for i, era := range o.eras {
			for j, step := range steps {
				fmt.Fprintf(progress, "round %d/%d: %s %s, %d session(s) ...\n", round, o.rounds, eraVersion(era), step.path, step.sessions)
				m, err := measurePass(ctx, o, st, era, step)
				if err != nil {
					return fmt.Errorf("%s %s, %d session(s): %w", eraVersion(era), step.path, step.sessions, err)
				}
				got[i][j] = append(got[i][j], m)
			}
		}
	}
	for i, era := range o.eras {
		var ms []measurement
		for j := range steps {
			ms = append(ms, median(got[i][j]))
		}
		rep.Measurements = append(rep.Measurements, ms...)
		rep.Comparisons = append(rep.Comparisons, compareEra(eraVersion(era), ms[0], ms[1], ms[2], ms[3])...)
	}
	return nil
}

func measurePass(ctx context.Context, o *options, st *stage, era fixtures.Era, step passStep) (measurement, error) {
	url, key, tool := step.target(st)
	sessions, err := dialAll(ctx, step.sessions, url, key, era)
	if err != nil {
		return measurement{}, err
	}
	defer closeAll(sessions)
	args := map[string]any{"suite": "settlement"}
	w, err := drive(ctx, o, sessions, func(ctx context.Context, s *session, _, _ int) error {
		return estimate(ctx, s.cs, tool, args)
	})
	if err != nil {
		return measurement{}, err
	}
	m := w.measurement(step.sessions)
	m.Path, m.Era = step.path, eraVersion(era)
	return m, nil
}

// estimate makes one pass-through call and checks its answer.
func estimate(ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return fmt.Errorf("call %s: %w", tool, err)
	}
	if res.IsError {
		return fmt.Errorf("%s answered with an error: %s", tool, contentText(res))
	}
	sc, _ := res.StructuredContent.(map[string]any)
	if got := sc["estimate_usd"]; got != wantEstimate {
		return fmt.Errorf("%s answered estimate_usd %v, want %s: the call did not reach the provider's tool", tool, got, wantEstimate)
	}
	return nil
}

func contentText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, " ")
}

// allStates are every operation state, to count every operation.
func allStates() []ledger.State {
	return []ledger.State{
		ledger.StateAccepted, ledger.StateSending, ledger.StateRunning, ledger.StateReview,
		ledger.StateCompleted, ledger.StateFailed, ledger.StateCancelled,
	}
}

// measureAcceptance measures consequential calls that each create an
// operation (a fresh operation ID every call) and return its task, on
// 2026-07-28 with the Tasks extension: first while the worker dispatches
// what is accepted, then with the worker stopped, so that the difference
// shows what dispatching costs the acceptance path on the same machine.
// Every measurement gets a fresh gateway and ledger, so that no backlog of
// one measurement's operations weighs on the next.
func measureAcceptance(ctx context.Context, o *options, log *slog.Logger, rep *report, progress io.Writer) error {
	for _, worker := range []string{"on", "stopped"} {
		got := make([][]measurement, 2)
		for round := 1; round <= o.rounds; round++ {
			for i, n := range []int{1, o.sessions} {
				fmt.Fprintf(progress, "round %d/%d: %s accept (worker %s), %d session(s) ...\n", round, o.rounds, versionExtension, worker, n)
				err := withStage(ctx, o, log, rep, func(st *stage) error {
					if worker == "stopped" {
						if err := st.gate.Worker.Stop(ctx); err != nil {
							return fmt.Errorf("stop the gateway's worker: %w", err)
						}
					}
					m, err := measureAccept(ctx, o, st, n)
					if err != nil {
						return err
					}
					m.Worker = worker
					got[i] = append(got[i], m)
					return nil
				})
				if err != nil {
					return fmt.Errorf("accept (worker %s), %d session(s): %w", worker, n, err)
				}
			}
		}
		for _, ms := range got {
			rep.Measurements = append(rep.Measurements, median(ms))
		}
	}
	return nil
}

// measureAccept drives acceptances from n sessions on a fresh ledger and
// checks that it holds exactly the operations the calls were answered for.
func measureAccept(ctx context.Context, o *options, st *stage, n int) (measurement, error) {
	sessions, err := dialAll(ctx, n, st.gateURL, st.key, fixtures.EraExtension)
	if err != nil {
		return measurement{}, err
	}
	defer closeAll(sessions)
	w, err := drive(ctx, o, sessions, func(ctx context.Context, s *session, worker, seq int) error {
		opID := fmt.Sprintf("bench-%d-%d", worker, seq)
		task, res, err := taskwire.CallToolAsTask(ctx, s.cs, &mcp.CallToolParams{
			Name:      acceptTool,
			Arguments: map[string]any{"suite": "settlement", "operation_id": opID},
		}, nil)
		if err != nil {
			return fmt.Errorf("call %s for %s: %w", acceptTool, opID, err)
		}
		if task == nil {
			return fmt.Errorf("%s for %s answered without a task: %s", acceptTool, opID, contentText(res))
		}
		return nil
	})
	if err != nil {
		return measurement{}, err
	}
	left, err := st.gate.Store.OperationCount(ctx, []ledger.State{ledger.StateAccepted})
	if err != nil {
		return measurement{}, fmt.Errorf("count undispatched operations: %w", err)
	}
	if err := checkOperations(ctx, st.gate.Store, w.total); err != nil {
		return measurement{}, err
	}
	m := w.measurement(n)
	m.Path, m.Era, m.Created, m.Undispatched = "accept", versionExtension, w.total, &left
	return m, nil
}

// checkOperations checks that the ledger holds exactly the operations the
// calls were answered for, so that no task counted is a lost write.
func checkOperations(ctx context.Context, store ledger.Store, want int64) error {
	got, err := store.OperationCount(ctx, allStates())
	if err != nil {
		return fmt.Errorf("count operations: %w", err)
	}
	if int64(got) != want {
		return fmt.Errorf("the ledger holds %d operations, but %d calls were answered with a new task", got, want)
	}
	return nil
}

// window is what drive observed.
type window struct {
	calls     int64 // calls completed inside the measured window
	seconds   float64
	latencies []time.Duration
	total     int64 // calls completed, warm-up included
	// cpu, allocs and gcs are the process's CPU time, heap allocation
	// and GC cycles inside the window: client, gateway and upstream
	// together, as they share this process.
	cpu    time.Duration
	allocs uint64
	gcs    uint64
}

func (w *window) measurement(sessions int) measurement {
	m := measurement{Sessions: sessions, Calls: w.calls, Seconds: w.seconds}
	if w.seconds > 0 {
		m.CallsPerSec = float64(w.calls) / w.seconds
		m.CPUCores = w.cpu.Seconds() / w.seconds
	}
	if w.calls > 0 {
		m.CPUMsPerCall = float64(w.cpu) / float64(time.Millisecond) / float64(w.calls)
		m.AllocKBPerCall = float64(w.allocs) / 1024 / float64(w.calls)
	}
	if w.seconds > 0 {
		m.GCPerSec = float64(w.gcs) / w.seconds
	}
	slices.Sort(w.latencies)
	if n := len(w.latencies); n > 0 {
		m.P50Ms = float64(w.latencies[(n-1)/2]) / float64(time.Millisecond)
		m.P99Ms = float64(w.latencies[(n-1)*99/100]) / float64(time.Millisecond)
	}
	return m
}

// runtimeCounts are cumulative counters of the Go runtime.
type runtimeCounts struct{ allocs, gcs uint64 }

func readRuntime() runtimeCounts {
	samples := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(samples)
	var c runtimeCounts
	if samples[0].Value.Kind() == metrics.KindUint64 {
		c.allocs = samples[0].Value.Uint64()
	}
	if samples[1].Value.Kind() == metrics.KindUint64 {
		c.gcs = samples[1].Value.Uint64()
	}
	return c
}

const (
	phaseWarmup int32 = iota
	phaseMeasure
	phaseDone
)

// drive makes calls on every session, each from its own goroutine, through
// a warm-up and then a measured window, and counts the calls that complete
// inside the window. The first error stops every goroutine and is returned;
// a call still hanging well after the window ends is an error too.
func drive(ctx context.Context, o *options, sessions []*session, call func(ctx context.Context, s *session, worker, seq int) error) (*window, error) {
	ctx, cancel := context.WithTimeout(ctx, o.warmup+o.duration+30*time.Second)
	defer cancel()
	var (
		phase     atomic.Int32
		errOnce   sync.Once
		firstErr  error
		wg        sync.WaitGroup
		latencies = make([][]time.Duration, len(sessions))
		totals    = make([]int64, len(sessions))
	)
	for worker, s := range sessions {
		wg.Go(func() {
			for seq := 0; phase.Load() != phaseDone; seq++ {
				start := time.Now()
				if err := call(ctx, s, worker, seq); err != nil {
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
	w := &window{}
	if sleep(o.warmup) {
		t0, cpu0, rt0 := time.Now(), processCPU(), readRuntime()
		phase.Store(phaseMeasure)
		if sleep(o.duration) {
			phase.Store(phaseDone)
			w.seconds = time.Since(t0).Seconds()
			w.cpu = processCPU() - cpu0
			rt := readRuntime()
			w.allocs, w.gcs = rt.allocs-rt0.allocs, rt.gcs-rt0.gcs
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
	for i := range sessions {
		w.total += totals[i]
		w.calls += int64(len(latencies[i]))
		w.latencies = append(w.latencies, latencies[i]...)
	}
	if w.calls == 0 {
		return nil, errors.New("no call completed inside the measured window; lengthen -duration")
	}
	return w, nil
}
