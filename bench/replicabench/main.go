// Command replicabench measures how durable acceptances scale with gateway
// replicas on one PostgreSQL database: 1, 2 and 4 `taskgate serve`
// processes (started with --no-worker, so that no dispatch competes) share
// one ledger, and a fixed number of concurrent MCP clients, spread over the
// replicas, each make consequential calls with a new operation ID every
// call, so that every call is a created acceptance returned as a task. The
// same run measures the database's raw commit rate: one single-row INSERT
// per transaction from as many connections as there are clients.
//
// It also measures the MCP call ceiling (the echo tool with no gateway)
// and, with -passthrough, the echo tool called through one replica.
//
// Everything runs on loopback: the simulated provider on an httptest server
// in this process, the gateways and the echo server as child processes
// (with -inprocess, in this process too), the clients here. Each
// run creates its own schema in the database and drops it afterwards; it
// never touches another schema and never stops the server. Every call's
// answer is checked, and every row a measurement claims is checked in the
// database afterwards. It prints ratios next to the target but exits
// non-zero only when something failed, never for a number below target.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/taskgate/taskgate/bench/internal/command"
	"github.com/taskgate/taskgate/daemon"
)

func main() {
	// This process runs with the GC setting taskgate serve runs with, as
	// the replicas do (they inherit GOGC when it is set): with -inprocess
	// the gateways run here. So does the echo server, this binary again,
	// so that the ceiling is measured under the same setting.
	gogc := daemon.TuneGC(os.Getenv)
	if os.Getenv(echoEnv) != "" {
		os.Exit(serveEcho())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, gogc)
	stop()
	os.Exit(code)
}

// defaultPostgres is the server the benchmark uses unless told otherwise.
const defaultPostgres = "postgres://postgres@127.0.0.1:5432/test"

// options are the command's flags.
type options struct {
	gogc      string // the garbage collector setting in effect
	postgres  string
	taskgate  string
	duration  time.Duration
	warmup    time.Duration
	clients   int
	replicas  []int
	rounds    int
	inProcess bool
	// passThrough adds the echo tool called through one replica.
	passThrough bool
	json        bool
	cpuProfile  string
	trace       string
	verbose     bool
}

func (o *options) validate() error {
	if err := command.CheckWindow(o.duration, o.warmup, o.rounds); err != nil {
		return err
	}
	switch {
	case o.clients < 1:
		return fmt.Errorf("-clients must be at least 1, got %d", o.clients)
	case len(o.replicas) == 0:
		return errors.New("-replicas names no replica count; e.g. 1,2,4")
	case !strings.HasPrefix(o.postgres, "postgres://") && !strings.HasPrefix(o.postgres, "postgresql://"):
		return fmt.Errorf("-postgres must be a postgres:// URL, got %q", o.postgres)
	}
	if o.replicas[0] != 1 {
		return fmt.Errorf("-replicas must start with 1, the count the others are scaled against; got %v", o.replicas)
	}
	if n := slices.Max(o.replicas); n > o.clients {
		return fmt.Errorf("-replicas %d exceeds -clients %d: a replica would get no client", n, o.clients)
	}
	if o.taskgate != "" {
		if st, err := os.Stat(o.taskgate); err != nil || st.IsDir() {
			return fmt.Errorf("-taskgate %s is not a binary: %v", o.taskgate, cmp.Or(err, errors.New("a directory")))
		}
	}
	return nil
}

// parseReplicas reads a comma-separated list of replica counts, in order,
// without repeats.
func parseReplicas(s string) ([]int, error) {
	return command.List(s, func(f string) (int, error) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("-replicas: %q is not a replica count (a whole number, at least 1)", f)
		}
		return n, nil
	})
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, gogc string) int {
	var (
		o        options
		replicas string
	)
	o.gogc = gogc
	return command.Run(ctx, args, stdout, stderr, command.Program[*results]{
		Name: "replicabench",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.postgres, "postgres", defaultPostgres, "PostgreSQL server and database; each run creates a schema of its own there and drops it afterwards")
			fs.StringVar(&o.taskgate, "taskgate", "", "the taskgate binary the replicas run; empty builds ./cmd/taskgate (CGO_ENABLED=0) into a temporary directory; unused with -inprocess")
			fs.DurationVar(&o.duration, "duration", 3*time.Second, "measured time of each measurement")
			fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured warm-up before each measurement, on the same clients")
			fs.IntVar(&o.clients, "clients", 64, "concurrent clients (MCP sessions, spread evenly over the replicas) and raw insert connections")
			fs.StringVar(&replicas, "replicas", "1,2,4", "gateway replica counts to measure, comma-separated, starting with 1")
			fs.IntVar(&o.rounds, "rounds", 1, "run every measurement this many times, interleaved, and report the median")
			fs.BoolVar(&o.passThrough, "passthrough", true, "also measure the MCP ceiling's echo tool called through one replica, as a non-consequential (pass-through) tool")
			fs.BoolVar(&o.inProcess, "inprocess", false, "run the replicas as daemons in this process instead of child processes, so that -cpuprofile covers them (samples carry role=client|gateway|upstream)")
			fs.BoolVar(&o.json, "json", false, "print one JSON document instead of the table")
			fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of this process's whole run to this file (with -inprocess it includes the gateways)")
			fs.StringVar(&o.trace, "trace", "", "write a runtime execution trace of this process's whole run to this file (go tool trace)")
			fs.BoolVar(&o.verbose, "v", false, "pass the gateways' warnings and errors to stderr")
		},
		Check: func() (err error) {
			if o.replicas, err = parseReplicas(replicas); err != nil {
				return err
			}
			return o.validate()
		},
		JSON:       &o.json,
		CPUProfile: &o.cpuProfile,
		Trace:      &o.trace,
		Measure: func(ctx context.Context, progress io.Writer) (*results, error) {
			return measureAll(ctx, &o, progress)
		},
		Table: printTable,
	})
}
