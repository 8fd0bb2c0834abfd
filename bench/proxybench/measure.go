package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime/metrics"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/bench/internal/load"
	"github.com/taskgate/taskgate/internal/sim/fixtures"
	"github.com/taskgate/taskgate/internal/sim/providersim"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/taskwire"
)

// The calls the benchmark makes. estimate_suite is a pass-through tool that
// does no more than answer a constant; run_suite is consequential.
const (
	upstreamName = "hosted_test"
	passTool     = providersim.ToolEstimateSuite
	acceptTool   = fixtures.RunSuiteTool
	wantEstimate = "18.00"
)

func measureAll(ctx context.Context, o *options, progress io.Writer) (*results, error) {
	log := slog.New(slog.DiscardHandler)
	if o.verbose {
		log = slog.New(slog.NewTextHandler(progress, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	rep := &results{Machine: machineFacts(o)}
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
func withStage(ctx context.Context, o *options, log *slog.Logger, rep *results, f func(*stage) error) error {
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
func measurePassThrough(ctx context.Context, o *options, st *stage, rep *results, progress io.Writer) error {
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
	m, _, err := drive(ctx, o, sessions, func(ctx context.Context, s *session, _, _ int) error {
		return estimate(ctx, s.cs, tool, args)
	})
	if err != nil {
		return measurement{}, err
	}
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
		return fmt.Errorf("%s answered with an error: %s", tool, fixtures.ResultText(res))
	}
	sc, _ := res.StructuredContent.(map[string]any)
	if got := sc["estimate_usd"]; got != wantEstimate {
		return fmt.Errorf("%s answered estimate_usd %v, want %s: the call did not reach the provider's tool", tool, got, wantEstimate)
	}
	return nil
}

// allStates are every operation state, to count every operation.
func allStates() []ledger.State {
	return []ledger.State{
		ledger.StateAwaitingApproval, ledger.StateAccepted, ledger.StateSending, ledger.StateRunning, ledger.StateInputRequired, ledger.StateReview,
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
func measureAcceptance(ctx context.Context, o *options, log *slog.Logger, rep *results, progress io.Writer) error {
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
	m, total, err := drive(ctx, o, sessions, func(ctx context.Context, s *session, worker, seq int) error {
		opID := fmt.Sprintf("bench-%d-%d", worker, seq)
		task, res, err := taskwire.CallToolAsTask(ctx, s.cs, fixtures.RunSuiteCall(opID, nil), nil)
		if err != nil {
			return fmt.Errorf("call %s for %s: %w", acceptTool, opID, err)
		}
		if task == nil {
			return fmt.Errorf("%s for %s answered without a task: %s", acceptTool, opID, fixtures.ResultText(res))
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
	if err := checkOperations(ctx, st.gate.Store, total); err != nil {
		return measurement{}, err
	}
	m.Path, m.Era, m.Created, m.Undispatched = "accept", versionExtension, total, &left
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

// usage is the process's CPU time, heap allocation and GC cycles inside a
// measured window: client, gateway and upstream together, as they share
// this process.
type usage struct {
	cpu    time.Duration
	allocs uint64
	gcs    uint64
}

// meter reads the process's counters as the window opens and stores
// their growth in u as it closes.
func (u *usage) meter() func() {
	cpu0, rt0 := processCPU(), readRuntime()
	return func() {
		u.cpu = processCPU() - cpu0
		rt := readRuntime()
		u.allocs, u.gcs = rt.allocs-rt0.allocs, rt.gcs-rt0.gcs
	}
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

// drive makes calls on every session, each from its own goroutine, through
// o's warm-up and measured window, and returns the window's measurement
// and the calls made in all. A call still hanging well after the window
// ends is an error.
func drive(ctx context.Context, o *options, sessions []*session, call func(ctx context.Context, s *session, worker, seq int) error) (measurement, int64, error) {
	var u usage
	w, err := load.Run(ctx, load.Options{
		Workers:  len(sessions),
		Warmup:   o.warmup,
		Duration: o.duration,
		Grace:    30 * time.Second,
		Meter:    u.meter,
	}, func(ctx context.Context, worker, seq int) error {
		return call(ctx, sessions[worker], worker, seq)
	})
	if err != nil {
		return measurement{}, 0, err
	}
	m := measurement{
		Sessions: len(sessions), Calls: w.Calls, Seconds: w.Seconds, CallsPerSec: w.PerSecond(),
		P50Ms: w.PercentileMs(50), P99Ms: w.PercentileMs(99),
		CPUMsPerCall:   float64(u.cpu) / float64(time.Millisecond) / float64(w.Calls),
		AllocKBPerCall: float64(u.allocs) / 1024 / float64(w.Calls),
	}
	if w.Seconds > 0 {
		m.CPUCores = u.cpu.Seconds() / w.Seconds
		m.GCPerSec = float64(u.gcs) / w.Seconds
	}
	return m, w.Total, nil
}
