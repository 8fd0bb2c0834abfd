// Command e2ebench measures consequential operations end to end: clients
// call the simulated provider's paid tool through `taskgate serve` as
// shipped, each call a new operation, and the run ends when every
// operation has completed. It prints operations per second from the first
// call to the last completion, the CPU each process spent per operation
// (the gateway; this process, which holds the clients and the provider),
// the ledger's commits per operation (SQLite; each one sync of its log to
// disk), and checks that every operation completed with exactly one
// provider job.
//
// Each client is a tenant of its own, so that the default per-tenant
// limits apply as shipped; a call a limit refuses is sent again after the
// refusal's retry_after. It exits non-zero only when a measurement fails
// (an operation that does not complete, a second job), never for a figure
// below its target.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	_ "modernc.org/sqlite"

	"github.com/taskgate/taskgate/bench/internal/child"
	"github.com/taskgate/taskgate/bench/internal/command"
	"github.com/taskgate/taskgate/bench/internal/cpu"
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
	taskgate   string
	ops        int
	clients    int
	job        time.Duration
	within     time.Duration
	limits     string
	dir        string
	json       bool
	cpuProfile string
	keep       bool
	receipts   bool
}

func (o *options) validate() error {
	switch {
	case o.ops < 1:
		return fmt.Errorf("-ops must be at least 1, got %d", o.ops)
	case o.clients < 1:
		return fmt.Errorf("-clients must be at least 1, got %d", o.clients)
	case o.job < 0:
		return fmt.Errorf("-job must not be negative, got %s", o.job)
	case o.within <= 0:
		return fmt.Errorf("-within must be positive, got %s", o.within)
	}
	return command.CheckDir(o.dir, "")
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	return command.Run(ctx, args, stdout, stderr, command.Program[*results]{
		Name: "e2ebench",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.taskgate, "taskgate", "", "the taskgate binary to run (default: build cmd/taskgate)")
			fs.IntVar(&o.ops, "ops", 8000, "consequential operations to run, each a new operation ID")
			fs.IntVar(&o.clients, "clients", 16, "clients calling at once, each a tenant of its own with its own MCP session")
			fs.DurationVar(&o.job, "job", 50*time.Millisecond, "how long each of the provider's jobs runs")
			fs.DurationVar(&o.within, "within", 10*time.Minute, "the run fails if the operations have not all completed after this long")
			fs.StringVar(&o.limits, "limits", "", `YAML mapping added as the configuration's limits, e.g. "{jobs_per_tenant: 8}" (default: the shipped defaults)`)
			fs.StringVar(&o.dir, "dir", os.TempDir(), "directory for the gateway's configuration and ledger (the disk the ledger syncs to)")
			fs.BoolVar(&o.json, "json", false, "print one JSON document instead of the table")
			fs.BoolVar(&o.receipts, "receipts", true, "the gateway issues a signed receipt of every operation, as one with a signing key does (a secrets key file and a signing key made with taskgate's commands); false measures one without")
			fs.BoolVar(&o.keep, "keep", false, "keep the gateway's configuration and ledger afterwards, and say where (taskgate ops list --db sqlite:DIR/gateway.db)")
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
	Ops     int            `json:"operations"`
	Clients int            `json:"clients"`
	JobMs   float64        `json:"provider_job_ms"`
	// Seconds is from the first call to the last operation's completion.
	Seconds float64 `json:"seconds"`
	// CallSeconds is from the first call to the last call's answer.
	CallSeconds float64 `json:"call_seconds"`
	PerSecond   float64 `json:"operations_per_second"`
	// Refused counts calls a limit refused, by reason; each was sent
	// again.
	Refused map[string]int64 `json:"refused"`
	// CPU per operation, in milliseconds.
	GatewayCPUMs float64 `json:"gateway_cpu_ms_per_operation"`
	BenchCPUMs   float64 `json:"clients_and_provider_cpu_ms_per_operation"`
	// Commits is the ledger's commits per operation.
	Commits float64 `json:"ledger_commits_per_operation"`
	// Jobs is how many jobs the provider started.
	Jobs int `json:"provider_jobs"`
	// Receipts says whether the gateway issued receipts, and Issued how
	// many receipt versions it did: one per operation.
	Receipts bool `json:"receipts"`
	Issued   int  `json:"receipts_issued"`
}

// targetPerSecond is the throughput the gateway aims at on the 2-core
// build machine, with the provider and the clients on the same cores.
const targetPerSecond = 400

func measure(ctx context.Context, o *options, progress io.Writer) (_ *results, err error) {
	dir, err := os.MkdirTemp(o.dir, "e2ebench-")
	if err != nil {
		return nil, fmt.Errorf("make a scratch directory: %w", err)
	}
	if o.keep {
		defer fmt.Fprintf(progress, "the gateway's configuration and ledger are in %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	bin := o.taskgate
	if bin == "" {
		fmt.Fprintln(progress, "building taskgate ...")
		if bin, err = child.BuildTaskgate(ctx, dir); err != nil {
			return nil, err
		}
	}
	sim, err := serve.StartProvider(o.job)
	if err != nil {
		return nil, err
	}
	defer sim.Close()

	tenants := make([]string, o.clients)
	for i := range tenants {
		tenants[i] = fmt.Sprintf("t%02d", i)
	}
	gw, err := serve.Start(ctx, serve.Options{Bin: bin, Dir: dir, ProviderURL: sim.URL, Tenants: tenants, Label: "e2ebench", Limits: o.limits, Receipts: o.receipts})
	if err != nil {
		return nil, err
	}
	defer func() {
		if serr := gw.Proc.Stop(20 * time.Second); err == nil && serr != nil {
			err = fmt.Errorf("stop the gateway: %w", serr)
		}
	}()
	sessions := make([]*mcp.ClientSession, o.clients)
	for i, tenant := range tenants {
		cs, err := fixtures.Dial(ctx, gw.MCPURL(), gw.Keys[tenant], fixtures.EraExtension, &http.Client{Transport: &http.Transport{}})
		if err != nil {
			return nil, fmt.Errorf("connect as tenant %s: %w", tenant, err)
		}
		defer cs.Close()
		sessions[i] = cs
	}
	if err := serve.WaitForTool(ctx, sessions[0], fixtures.RunSuiteTool); err != nil {
		return nil, err
	}
	ledger, err := sql.Open("sqlite", "file:"+gw.Ledger+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, fmt.Errorf("open the gateway's ledger to read: %w", err)
	}
	defer ledger.Close()

	rep := &results{Machine: report.ThisMachine(), Limits: o.limits, Ops: o.ops, Clients: o.clients, JobMs: float64(o.job) / float64(time.Millisecond), Receipts: o.receipts}
	if rep.Limits == "" {
		rep.Limits = "defaults"
	}
	commits0, err := gw.Metric(ctx, "taskgate_ledger_commits_total")
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithTimeout(ctx, o.within)
	defer cancel()
	fmt.Fprintf(progress, "%d operations from %d clients, provider jobs of %s ...\n", o.ops, o.clients, o.job)
	start, self0, gw0 := time.Now(), cpu.Self(), cpu.Of(gw.Proc.Pid())
	refused, err := call(runCtx, o, sessions)
	if err != nil {
		return nil, err
	}
	rep.CallSeconds = time.Since(start).Seconds()
	rep.Refused = refused
	if err := awaitCompleted(runCtx, ledger, o.ops, o.receipts); err != nil {
		return nil, err
	}
	elapsed := time.Since(start)
	self, gwCPU := cpu.Self()-self0, cpu.Of(gw.Proc.Pid())-gw0
	commits, err := gw.Metric(ctx, "taskgate_ledger_commits_total")
	if err != nil {
		return nil, err
	}
	rep.Seconds = elapsed.Seconds()
	rep.PerSecond = float64(o.ops) / rep.Seconds
	rep.GatewayCPUMs = gwCPU.Seconds() * 1000 / float64(o.ops)
	rep.BenchCPUMs = self.Seconds() * 1000 / float64(o.ops)
	rep.Commits = (commits - commits0) / float64(o.ops)

	jobs := sim.Jobs()
	rep.Jobs = len(jobs)
	keys := map[string]int{}
	for _, j := range jobs {
		keys[j.IdempotencyKey]++
	}
	if len(jobs) != o.ops || len(keys) != o.ops {
		return nil, fmt.Errorf("%d operations completed, and the provider started %d jobs for %d keys; want one job for each", o.ops, len(jobs), len(keys))
	}
	if err := ledger.QueryRowContext(ctx, `SELECT count(*) FROM receipt_versions`).Scan(&rep.Issued); err != nil {
		return nil, fmt.Errorf("count the receipts issued: %w", err)
	}
	want := 0
	if o.receipts {
		want = o.ops
	}
	if rep.Issued != want {
		return nil, fmt.Errorf("the gateway issued %d receipt versions for %d operations; want %d", rep.Issued, o.ops, want)
	}
	return rep, nil
}

// call makes o.ops consequential calls from the sessions, each a new
// operation, until each was answered with a task. A call a limit refuses
// is sent again after its retry_after.
func call(ctx context.Context, o *options, sessions []*mcp.ClientSession) (map[string]int64, error) {
	var (
		next     atomic.Int64
		mu       sync.Mutex
		refused  = map[string]int64{}
		firstErr error
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	for c, cs := range sessions {
		wg.Go(func() {
			for ctx.Err() == nil {
				n := next.Add(1)
				if n > int64(o.ops) {
					return
				}
				opID := fmt.Sprintf("e2e-%02d-%06d", c, n)
				for {
					task, res, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall(opID, nil), nil)
					if err == nil && task != nil {
						break
					}
					reason, wait := refusal(err)
					if reason == "" {
						fail(fmt.Errorf("call %s: %w (%s)", opID, errors.Join(err, ctx.Err()), fixtures.ResultText(res)))
						return
					}
					mu.Lock()
					refused[reason]++
					mu.Unlock()
					select {
					case <-ctx.Done():
						fail(fmt.Errorf("call %s: %w", opID, ctx.Err()))
						return
					case <-time.After(wait):
					}
				}
			}
		})
	}
	wg.Wait()
	return refused, firstErr
}

// refusal is the reason and retry_after of a limit's refusal; no reason
// for any other error.
func refusal(err error) (string, time.Duration) {
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) {
		return "", 0
	}
	var data struct {
		Reason     string  `json:"reason"`
		RetryAfter float64 `json:"retry_after"`
	}
	_ = json.Unmarshal(rpcErr.Data, &data)
	if data.RetryAfter <= 0 {
		return "", 0
	}
	return data.Reason, time.Duration(data.RetryAfter * float64(time.Second))
}

// awaitCompleted reads the ledger until n operations have completed and
// been reconciled, and with receipts until each has its receipt issued.
// An operation that ends any other way fails the run.
func awaitCompleted(ctx context.Context, ledger *sql.DB, n int, receipts bool) error {
	done := `SELECT count(DISTINCT operation_ref) FROM events WHERE kind = 'reconciled'`
	if receipts {
		done = `SELECT count(DISTINCT operation_ref) FROM receipt_versions`
	}
	for {
		rows, err := ledger.QueryContext(ctx, `SELECT state, count(*) FROM operations GROUP BY state`)
		if err != nil {
			return fmt.Errorf("read the operations' states: %w", err)
		}
		states := map[string]int{}
		for rows.Next() {
			var state string
			var count int
			if err := rows.Scan(&state, &count); err != nil {
				rows.Close()
				return fmt.Errorf("read the operations' states: %w", err)
			}
			states[state] = count
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read the operations' states: %w", err)
		}
		for _, bad := range []string{"failed", "cancelled", "review", "input_required"} {
			if states[bad] > 0 {
				return fmt.Errorf("%d operations are %s (states: %v); want every one completed", states[bad], bad, states)
			}
		}
		if states["completed"] >= n {
			var finished int
			if err := ledger.QueryRowContext(ctx, done).Scan(&finished); err != nil {
				return fmt.Errorf("read how many operations were reconciled: %w", err)
			}
			if finished >= n {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d operations to complete (states: %v): %w", n, states, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func printTable(w io.Writer, rep *results) {
	fmt.Fprintf(w, "machine: %s\nlimits: %s\n%d operations from %d clients (a tenant each), provider jobs of %g ms\n\n", rep.Machine, rep.Limits, rep.Ops, rep.Clients, rep.JobMs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "calls answered with a task\t%.1f s\t\n", rep.CallSeconds)
	finished := "every operation completed and reconciled"
	if rep.Receipts {
		finished = "every operation completed, its receipt issued"
	}
	fmt.Fprintf(tw, "%s\t%.1f s\t\n", finished, rep.Seconds)
	met := rep.PerSecond >= targetPerSecond
	fmt.Fprintf(tw, "operations per second\t%.0f\t%s\n", rep.PerSecond, report.Target(fmt.Sprintf(">= %d", targetPerSecond), &met))
	fmt.Fprintf(tw, "gateway CPU per operation\t%.2f ms\t\n", rep.GatewayCPUMs)
	fmt.Fprintf(tw, "clients' and provider's CPU per operation\t%.2f ms\t\n", rep.BenchCPUMs)
	fmt.Fprintf(tw, "ledger commits per operation\t%.1f\t\n", rep.Commits)
	fmt.Fprintf(tw, "provider jobs\t%d\tone per operation\n", rep.Jobs)
	issued := "none: -receipts=false"
	if rep.Receipts {
		issued = "one per operation"
	}
	fmt.Fprintf(tw, "receipts issued\t%d\t%s\n", rep.Issued, issued)
	tw.Flush()
	if len(rep.Refused) > 0 {
		var parts []string
		for reason, n := range rep.Refused {
			parts = append(parts, fmt.Sprintf("%s %d", reason, n))
		}
		fmt.Fprintf(w, "refused and sent again: %s\n", strings.Join(parts, ", "))
	}
}
