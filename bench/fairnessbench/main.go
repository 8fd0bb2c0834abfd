// Command fairnessbench measures whether one tenant's flood starves
// another: tenant B's consequential-call latency (p50, p99) with the
// gateway quiet, and again while tenant A floods it with consequential
// calls from many goroutines, ignoring every refusal's retry_after as a
// hostile tenant would. B calls one after another, at most one call every
// -b-interval, within its own call rate. It prints the ratio of the two p50s against the
// target (within 2x) and how A's calls were answered.
//
// The gateway is `taskgate serve` as shipped, a child process with the
// default limits, in front of the simulated provider on loopback; the
// flood is bounded in calls and in time. It exits non-zero only when a
// measurement fails (one of B's calls, or a flood call answered with
// anything but a task or a limit's refusal), never for a ratio above its
// target.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/bench/internal/child"
	"github.com/taskgate/taskgate/bench/internal/command"
	"github.com/taskgate/taskgate/bench/internal/load"
	"github.com/taskgate/taskgate/bench/internal/report"
	"github.com/taskgate/taskgate/bench/internal/serve"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/taskwire"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options are the command's flags.
type options struct {
	taskgate         string
	duration         time.Duration
	warmup           time.Duration
	floodCalls       int
	floodConcurrency int
	floodWithin      time.Duration
	bInterval        time.Duration
	limits           string
	dir              string
	json             bool
	cpuProfile       string
}

func (o *options) validate() error {
	if err := command.CheckWindow(o.duration, o.warmup, 1); err != nil {
		return err
	}
	switch {
	case o.floodCalls < 1:
		return fmt.Errorf("-flood-calls must be at least 1, got %d", o.floodCalls)
	case o.floodConcurrency < 1:
		return fmt.Errorf("-flood-concurrency must be at least 1, got %d", o.floodConcurrency)
	case o.bInterval < 0:
		return fmt.Errorf("-b-interval must not be negative, got %s", o.bInterval)
	case o.floodWithin < o.warmup+o.duration:
		return fmt.Errorf("-flood-within (%s) must cover -warmup plus -duration (%s), the window B is measured in during the flood", o.floodWithin, o.warmup+o.duration)
	}
	return command.CheckDir(o.dir, "")
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	return command.Run(ctx, args, stdout, stderr, command.Program[*results]{
		Name: "fairnessbench",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.taskgate, "taskgate", "", "the taskgate binary to run (default: build cmd/taskgate)")
			fs.DurationVar(&o.duration, "duration", 5*time.Second, "how long B's calls are measured, quiet and during the flood")
			fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured warm-up before each of B's windows")
			fs.IntVar(&o.floodCalls, "flood-calls", 20000, "at most this many calls by A in the flood")
			fs.IntVar(&o.floodConcurrency, "flood-concurrency", 64, "A's goroutines calling at once")
			fs.DurationVar(&o.floodWithin, "flood-within", time.Minute, "the flood stops after this long even if calls are left")
			fs.DurationVar(&o.bInterval, "b-interval", 80*time.Millisecond, "the least time between the starts of tenant B's calls (the default keeps B at half the default limits.call_rate; 0: back to back)")
			fs.StringVar(&o.limits, "limits", "", `YAML mapping added as the configuration's limits, e.g. "{calls_per_tenant: 8}" (default: the shipped defaults)`)
			fs.StringVar(&o.dir, "dir", os.TempDir(), "directory for the gateway's configuration and ledger")
			fs.BoolVar(&o.json, "json", false, "print one JSON document instead of the table")
			fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of this process (the clients and the provider) to this file")
		},
		Check:      o.validate,
		JSON:       &o.json,
		CPUProfile: &o.cpuProfile,
		Measure:    func(ctx context.Context, progress io.Writer) (*results, error) { return measure(ctx, &o, progress) },
		Table:      printTable,
	})
}

// results are what one run measured; -json prints them as they are.
type results struct {
	Machine report.Machine `json:"machine"`
	Limits  string         `json:"limits"`
	// BIntervalMs is the least time between the starts of B's calls.
	BIntervalMs float64 `json:"b_interval_ms"`
	Quiet       window  `json:"quiet"`
	Flood       window  `json:"flood"`
	// Ratio is Flood's p50 over Quiet's: within Target is fair.
	Ratio  float64 `json:"p50_ratio"`
	Target float64 `json:"target"`
	Met    bool    `json:"met"`
	// A is how tenant A's flood calls were answered.
	A floodCount `json:"tenant_a"`
}

// window is B's calls in one measured window.
type window struct {
	Calls int64   `json:"calls"`
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
}

// floodCount is how A's calls were answered: with a task, or refused by
// a limit (by data.reason).
type floodCount struct {
	Calls   int64            `json:"calls"`
	Tasks   int64            `json:"tasks"`
	Refused map[string]int64 `json:"refused"`
	Seconds float64          `json:"seconds"`
}

// fairTarget is how many times its quiet p50 tenant B's p50 may be during
// A's flood.
const fairTarget = 2.0

func measure(ctx context.Context, o *options, progress io.Writer) (_ *results, err error) {
	dir, err := os.MkdirTemp(o.dir, "fairnessbench-")
	if err != nil {
		return nil, fmt.Errorf("make a scratch directory: %w", err)
	}
	defer os.RemoveAll(dir)
	bin := o.taskgate
	if bin == "" {
		fmt.Fprintln(progress, "building taskgate ...")
		if bin, err = child.BuildTaskgate(ctx, dir); err != nil {
			return nil, err
		}
	}
	sim, err := serve.StartProvider(50 * time.Millisecond)
	if err != nil {
		return nil, err
	}
	defer sim.Close()

	gw, err := serve.Start(ctx, serve.Options{Bin: bin, Dir: dir, ProviderURL: sim.URL, Tenants: []string{"a", "b"}, Label: "fairnessbench", Limits: o.limits})
	if err != nil {
		return nil, err
	}
	defer func() {
		if serr := gw.Proc.Stop(20 * time.Second); err == nil && serr != nil {
			err = fmt.Errorf("stop the gateway: %w", serr)
		}
	}()
	rep := &results{Machine: report.ThisMachine(), Limits: o.limits, Target: fairTarget, BIntervalMs: float64(o.bInterval) / float64(time.Millisecond)}
	if rep.Limits == "" {
		rep.Limits = "defaults"
	}

	b, err := fixtures.Dial(ctx, gw.MCPURL(), gw.Keys["b"], fixtures.EraExtension, &http.Client{Transport: &http.Transport{}})
	if err != nil {
		return nil, fmt.Errorf("connect as tenant B: %w", err)
	}
	defer b.Close()
	if err := serve.WaitForTool(ctx, b, fixtures.RunSuiteTool); err != nil {
		return nil, err
	}
	callB := func(prefix string) load.Op {
		return func(ctx context.Context, _, seq int) error {
			opID := fmt.Sprintf("fair-b-%s-%d", prefix, seq)
			task, res, err := taskwire.CallToolAsTask(ctx, b, fixtures.RunSuiteCall(opID, nil), nil)
			if err != nil {
				return fmt.Errorf("tenant B's call %s: %w", opID, err)
			}
			if task == nil {
				return fmt.Errorf("tenant B's call %s answered without a task: %s", opID, fixtures.ResultText(res))
			}
			return nil
		}
	}
	fmt.Fprintf(progress, "tenant B alone for %s ...\n", o.warmup+o.duration)
	quiet, err := load.Run(ctx, load.Options{Workers: 1, Warmup: o.warmup, Duration: o.duration, Grace: 30 * time.Second, Interval: o.bInterval}, callB("quiet"))
	if err != nil {
		return nil, err
	}
	rep.Quiet = window{Calls: quiet.Calls, P50Ms: quiet.PercentileMs(50), P99Ms: quiet.PercentileMs(99)}

	fmt.Fprintf(progress, "tenant B during tenant A's flood (%d calls at most, %d at once, within %s) ...\n", o.floodCalls, o.floodConcurrency, o.floodWithin)
	floodCtx, stopFlood := context.WithTimeout(ctx, o.floodWithin)
	defer stopFlood()
	floodDone := make(chan error, 1)
	var counts *floodCount
	go func() {
		var err error
		counts, err = flood(floodCtx, o, gw)
		floodDone <- err
	}()
	during, err := load.Run(ctx, load.Options{Workers: 1, Warmup: o.warmup, Duration: o.duration, Grace: 30 * time.Second, Interval: o.bInterval}, callB("flood"))
	stopFlood()
	if ferr := <-floodDone; err == nil {
		err = ferr
	}
	if err != nil {
		return nil, err
	}
	rep.Flood = window{Calls: during.Calls, P50Ms: during.PercentileMs(50), P99Ms: during.PercentileMs(99)}
	rep.A = *counts
	if rep.Quiet.P50Ms > 0 {
		rep.Ratio = rep.Flood.P50Ms / rep.Quiet.P50Ms
	}
	rep.Met = rep.Ratio > 0 && rep.Ratio <= fairTarget
	return rep, nil
}

// flood has tenant A call run_suite from o.floodConcurrency sessions, each
// call a new operation, until o.floodCalls were made or ctx ends. A
// refusal by a limit is counted and the next call sent at once.
func flood(ctx context.Context, o *options, gw *serve.Gateway) (*floodCount, error) {
	sessions := make([]*mcp.ClientSession, o.floodConcurrency)
	for i := range sessions {
		cs, err := fixtures.Dial(ctx, gw.MCPURL(), gw.Keys["a"], fixtures.EraExtension, &http.Client{Transport: &http.Transport{}})
		if err != nil {
			return nil, fmt.Errorf("connect as tenant A: %w", err)
		}
		defer cs.Close()
		sessions[i] = cs
	}
	var (
		next, tasks atomic.Int64
		mu          sync.Mutex
		refused     = map[string]int64{}
		firstErr    error
		wg          sync.WaitGroup
	)
	start := time.Now()
	for _, cs := range sessions {
		wg.Go(func() {
			for ctx.Err() == nil {
				n := next.Add(1)
				if n > int64(o.floodCalls) {
					return
				}
				task, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall(fmt.Sprintf("fair-a-%d", n), nil), nil)
				var rpcErr *jsonrpc.Error
				switch {
				case err == nil && task != nil:
					tasks.Add(1)
				case errors.As(err, &rpcErr):
					var data struct {
						Reason string `json:"reason"`
					}
					_ = json.Unmarshal(rpcErr.Data, &data)
					mu.Lock()
					refused[data.Reason]++
					mu.Unlock()
				case ctx.Err() != nil:
					return
				default:
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("tenant A's flood call %d: task %v, %w", n, task, err)
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	total := min(next.Load(), int64(o.floodCalls))
	return &floodCount{Calls: total, Tasks: tasks.Load(), Refused: refused, Seconds: time.Since(start).Seconds()}, firstErr
}

func printTable(w io.Writer, rep *results) {
	fmt.Fprintf(w, "machine: %s\nlimits: %s\ntenant B: a call every %g ms at most\n\n", rep.Machine, rep.Limits, rep.BIntervalMs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "tenant B's consequential calls\tcalls\tp50\tp99\t")
	fmt.Fprintf(tw, "quiet\t%d\t%.2f ms\t%.2f ms\t\n", rep.Quiet.Calls, rep.Quiet.P50Ms, rep.Quiet.P99Ms)
	fmt.Fprintf(tw, "during A's flood\t%d\t%.2f ms\t%.2f ms\t\n", rep.Flood.Calls, rep.Flood.P50Ms, rep.Flood.P99Ms)
	tw.Flush()
	verdict := "ABOVE"
	if rep.Met {
		verdict = "PASS"
	}
	fmt.Fprintf(w, "\np50 during the flood / quiet: %.2fx  target <= %.2fx  %s\n", rep.Ratio, rep.Target, verdict)
	fmt.Fprintf(w, "tenant A: %d calls in %.1f s, %d answered with a task, refused: %v\n", rep.A.Calls, rep.A.Seconds, rep.A.Tasks, rep.A.Refused)
}
