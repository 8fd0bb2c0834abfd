package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime/metrics"
	"time"

	"github.com/taskgate/taskgate/bench/internal/cpu"
	"github.com/taskgate/taskgate/bench/internal/load"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/taskwire"
)

// acceptTool is the consequential tool the acceptance calls make.
const acceptTool = fixtures.RunSuiteTool

func measureAll(ctx context.Context, o *options, progress io.Writer) (*results, error) {
	log := slog.New(slog.DiscardHandler)
	if o.verbose {
		log = slog.New(slog.NewTextHandler(progress, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	rep := &results{Machine: machineFacts(o)}
	var err error
	role(ctx, "client", func(ctx context.Context) {
		if o.pass {
			err = measurePairings(ctx, o, rep, progress)
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
	rep.Machine.Upstream = "providersim over httptest on loopback"
	rep.Machine.Ledger = "SQLite, fresh, in " + o.dir
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
	sessions, err := dialAll(ctx, n, st.gateURL, st.key)
	if err != nil {
		return measurement{}, err
	}
	defer closeAll(sessions)
	m, total, err := drive(ctx, o, sessions, nil, func(ctx context.Context, s *session, worker, seq int) error {
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
	cpu0, rt0 := cpu.Self(), readRuntime()
	return func() {
		u.cpu = cpu.Self() - cpu0
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
// and the calls made in all. With px, the gateway or the peer proxy the
// calls go through, it also measures that process's CPU time over the
// window, and the gateway's allocation. A call still hanging well after
// the window ends is an error.
func drive(ctx context.Context, o *options, sessions []*session, px proxy, call func(ctx context.Context, s *session, worker, seq int) error) (measurement, int64, error) {
	var (
		u             usage
		gw0, gw1      gatewayCounters
		gw0Err, gwErr error
	)
	meter := func() func() {
		closed := u.meter()
		if px != nil {
			gw0, gw0Err = px.counters(ctx)
		}
		return func() {
			closed()
			if px != nil {
				gw1, gwErr = px.counters(ctx)
			}
		}
	}
	w, err := load.Run(ctx, load.Options{
		Workers:  len(sessions),
		Warmup:   o.warmup,
		Duration: o.duration,
		Grace:    30 * time.Second,
		Meter:    meter,
	}, func(ctx context.Context, worker, seq int) error {
		return call(ctx, sessions[worker], worker, seq)
	})
	if err != nil {
		return measurement{}, 0, err
	}
	if err := cmp.Or(gw0Err, gwErr); err != nil {
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
	if px != nil {
		cpu := (gw1.cpuSeconds - gw0.cpuSeconds) * 1000 / float64(w.Calls)
		m.GatewayCPUMsPerCall = &cpu
		if !gw1.allocUnknown {
			alloc := (gw1.allocBytes - gw0.allocBytes) / 1024 / float64(w.Calls)
			m.GatewayAllocKBPerCall = &alloc
		}
	}
	return m, w.Total, nil
}
