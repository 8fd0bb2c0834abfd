// Command proxybench measures what standing taskgate between an MCP client
// and its upstream costs, and a consequential call's acceptance path.
//
// Pass-through: for every pairing of client (the go-sdk default client,
// which speaks 2026-07-28 where the peer does, and a 2025-11-25 session
// client), upstream (a go-sdk server with one echo tool, over Streamable
// HTTP with sessions, stateless, or over stdio) and elicitation (declared
// by the client or not), the same client calls the echo tool directly and
// through taskgate, at one session and at -sessions sessions: calls/s, p50
// and p99, the ratio and the added p50, held to their targets. The gateway
// is `taskgate serve`, a child process on a fresh SQLite ledger in front of
// all three upstreams at once, so that its allocation per call (from its
// /metrics) and its peak RSS are its own. Every upstream is a process of
// its own too, this binary again with TASKGATE_PROXYBENCH_ECHO naming the
// upstream, as an MCP server is its clients': so direct calls cross
// processes just as calls through taskgate do. Each HTTP upstream is one
// process on loopback that direct clients and the gateway call alike; a
// stdio upstream is started per direct session, and once by the gateway.
//
// Acceptance: consequential calls of the simulated provider's run_suite
// through the real daemon in this process, each accepted in a fresh SQLite
// ledger and returned as a task.
//
// Every call's answer is checked, every session's negotiated protocol
// version is checked against the one its pairing must get, and every
// acceptance it counts is checked in the ledger afterwards. It prints
// results next to the targets but exits non-zero only when something
// failed, never for a number below target. It must never touch a ledger,
// provider or process it did not create, and it stops every process it
// starts however the run ends.
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
	"syscall"
	"time"

	"github.com/taskgate/taskgate/bench/internal/command"
	"github.com/taskgate/taskgate/bench/internal/report"
	"github.com/taskgate/taskgate/daemon"
)

func main() {
	// Run again with echoEnv set, this binary is an echo upstream and
	// nothing else.
	if kind := os.Getenv(echoEnv); kind != "" {
		os.Exit(serveEcho(kind))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The acceptance gateway runs here as taskgate serve runs it, GC
	// setting included.
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, daemon.TuneGC(os.Getenv))
	stop()
	os.Exit(code)
}

// options are the command's flags.
type options struct {
	gogc     string // the garbage collector setting in effect
	duration time.Duration
	warmup   time.Duration
	sessions int
	rounds   int
	// clients, upstreams and elicitation select the pass-through
	// pairings; taskgate is the binary the gateway process runs.
	clients     []clientKind
	upstreams   []upstreamKind
	elicitation []bool
	taskgate    string
	pass        bool
	accept      bool
	json        bool
	dir         string
	cpuProfile  string
	memProfile  string
	trace       string
	verbose     bool
	// jobDuration is how long the provider's remote jobs run, and
	// upstreamPoll how often the worker looks at a running one.
	jobDuration  time.Duration
	upstreamPoll time.Duration
	// traces measures a second gateway that exports a span of every call
	// over OTLP/HTTP, beside the one that exports none.
	traces bool
	// idle is how long the gateway's CPU is measured while it serves no
	// call, before the pass-through measurements; 0 skips it.
	idle time.Duration
	// peer is another proxy's binary measured beside taskgate (its
	// configuration is TBXark/mcp-proxy's); empty measures none.
	peer string
}

// Protocol versions the clients speak, as -clients names them.
const (
	versionExtension = "2026-07-28"
	versionLegacy    = "2025-11-25"
)

func (o *options) validate() error {
	if err := command.CheckWindow(o.duration, o.warmup, o.rounds); err != nil {
		return err
	}
	switch {
	case o.idle < 0:
		return fmt.Errorf("-idle cannot be negative, got %s", o.idle)
	case o.jobDuration <= 0 || o.upstreamPoll <= 0:
		return fmt.Errorf("-job-duration and -upstream-poll must be positive, got %s and %s", o.jobDuration, o.upstreamPoll)
	case o.sessions < 2:
		return fmt.Errorf("-sessions must be at least 2 (1 session is always measured), got %d", o.sessions)
	case !o.pass && !o.accept:
		return errors.New("-pass=false and -accept=false leave nothing to measure")
	case o.pass && len(o.clients) == 0:
		return errors.New("-clients names no client; use 2026-07-28, 2025-11-25 or both, comma-separated")
	case o.pass && len(o.upstreams) == 0:
		return errors.New("-upstreams names no upstream; use sessions, stateless, stdio or several, comma-separated")
	}
	for _, b := range []struct{ flag, path string }{{"-taskgate", o.taskgate}, {"-peer", o.peer}} {
		if b.path == "" {
			continue
		}
		if st, err := os.Stat(b.path); err != nil || st.IsDir() {
			return fmt.Errorf("%s %s is not a binary: %v", b.flag, b.path, cmp.Or(err, errors.New("a directory")))
		}
	}
	if o.peer != "" && !o.pass {
		return errors.New("-peer measures pass-through calls; it cannot go with -pass=false")
	}
	return command.CheckDir(o.dir, "")
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, gogc string) int {
	var (
		o                               options
		clients, upstreams, elicitation string
	)
	o.gogc = gogc
	return command.Run(ctx, args, stdout, stderr, command.Program[*results]{
		Name: "proxybench",
		Flags: func(fs *flag.FlagSet) {
			// 12 pairings, each measured four times, keep every window short.
			fs.DurationVar(&o.duration, "duration", 2*time.Second, "measured time of each measurement")
			fs.DurationVar(&o.warmup, "warmup", 300*time.Millisecond, "unmeasured warm-up before each measurement, on the same sessions")
			fs.IntVar(&o.sessions, "sessions", 8, "client sessions of the concurrent measurements")
			fs.StringVar(&clients, "clients", "2026-07-28,2025-11-25", "pass-through clients, comma-separated: 2026-07-28 (the go-sdk default client) and 2025-11-25 (a pinned session client)")
			fs.StringVar(&upstreams, "upstreams", "sessions,stateless,stdio", "pass-through echo upstreams, comma-separated: sessions (Streamable HTTP with sessions), stateless, stdio")
			fs.StringVar(&elicitation, "elicitation", "both", "pass-through clients that declare elicitation: both, yes or no")
			fs.StringVar(&o.taskgate, "taskgate", "", "the taskgate binary the pass-through gateway process runs; empty builds ./cmd/taskgate (CGO_ENABLED=0) into a temporary directory")
			fs.IntVar(&o.rounds, "rounds", 1, "run every measurement this many times (pass-through steps interleaved across pairings, acceptance by session count) and report the median")
			fs.BoolVar(&o.pass, "pass", true, "measure pass-through calls, direct and through the gateway")
			fs.BoolVar(&o.accept, "accept", true, "measure the acceptance path of a consequential call")
			fs.BoolVar(&o.json, "json", false, "print one JSON document instead of the table")
			fs.StringVar(&o.dir, "dir", os.TempDir(), "directory for the temporary files: the gateways' SQLite ledgers, the pass-through gateway's configuration and the taskgate it builds")
			fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of this process's whole run to this file (the pass-through gateway and echo upstreams are other processes); samples carry the label role=client, gateway or upstream")
			fs.StringVar(&o.memProfile, "memprofile", "", "write an allocation profile of this process's whole run to this file (the pass-through gateway and echo upstreams are other processes)")
			fs.DurationVar(&o.jobDuration, "job-duration", 10*time.Minute, "how long each remote job the worker dispatches runs at the provider")
			fs.DurationVar(&o.upstreamPoll, "upstream-poll", time.Second, "the worker's upstream_poll: how often it looks at a running remote job")
			fs.DurationVar(&o.idle, "idle", 30*time.Second, "measure the pass-through gateway's CPU for this long while it serves no call, before the calls; 0 skips it")
			fs.StringVar(&o.peer, "peer", "", "also measure pass-through through this peer proxy binary (TBXark/mcp-proxy; docs/benchmarks.md says how to build it), in front of the same upstreams, in the same rounds")
			fs.BoolVar(&o.traces, "traces", false, "also measure pass-through through a second gateway that exports every call's spans (OTLP/HTTP, sampling 1) to a receiver in this process")
			fs.BoolVar(&o.verbose, "v", false, "log the gateways', the provider's and the echo servers' warnings and errors to stderr")
			fs.StringVar(&o.trace, "trace", "", "write a runtime execution trace of this process's whole run to this file (go tool trace; the pass-through gateway and echo upstreams are other processes)")
		},
		Check: func() (err error) {
			if o.clients, err = parseClients(clients); err != nil {
				return err
			}
			if o.upstreams, err = parseUpstreams(upstreams); err != nil {
				return err
			}
			if o.elicitation, err = parseElicitation(elicitation); err != nil {
				return err
			}
			return o.validate()
		},
		JSON:       &o.json,
		CPUProfile: &o.cpuProfile,
		Trace:      &o.trace,
		MemProfile: &o.memProfile,
		Measure: func(ctx context.Context, progress io.Writer) (*results, error) {
			return measureAll(ctx, &o, progress)
		},
		Table: printTable,
	})
}

func machineFacts(o *options) machine {
	m := machine{
		Machine:     report.ThisMachine(),
		DurationSec: o.duration.Seconds(), IdleSec: o.idle.Seconds(),
		WarmupSec:  o.warmup.Seconds(),
		Sessions:   o.sessions,
		Rounds:     o.rounds,
		GOGC:       o.gogc,
		GOMEMLIMIT: cmp.Or(os.Getenv("GOMEMLIMIT"), "none"),
		Accept:     o.accept,
	}
	if o.accept {
		m.JobDurationSec, m.UpstreamPollSec = o.jobDuration.Seconds(), o.upstreamPoll.Seconds()
	}
	return m
}
