// Command proxybench measures what standing taskgate between an MCP client
// and its upstream costs: latency (p50, p99) and throughput of pass-through
// tools/call through the gateway against calling the same upstream
// directly, and the same figures for a consequential call's acceptance path
// (an operation accepted in the SQLite ledger and returned as a task).
//
// Everything runs in this process over real HTTP on loopback: the simulated
// provider on an httptest server, the real daemon on a fresh SQLite ledger
// in a temporary directory, and real go-sdk clients. Direct and proxied
// clients are built the same way and differ only in their endpoint. Every
// call's answer is checked, and every acceptance it counts is checked in the
// ledger afterwards. It prints results next to the targets but exits
// non-zero only when something failed, never for a number below target. It
// must never touch a ledger or provider it did not create.
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
	"github.com/taskgate/taskgate/internal/daemon"
	"github.com/taskgate/taskgate/internal/sim/fixtures"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The gateway runs here as taskgate serve runs it, GC setting included.
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, daemon.TuneGC(os.Getenv))
	stop()
	os.Exit(code)
}

// options are the command's flags.
type options struct {
	gogc       string // the garbage collector setting in effect
	duration   time.Duration
	warmup     time.Duration
	sessions   int
	eras       []fixtures.Era
	rounds     int
	pass       bool
	accept     bool
	json       bool
	dir        string
	cpuProfile string
	memProfile string
	trace      string
	verbose    bool
	// jobDuration is how long the provider's remote jobs run, and
	// upstreamPoll how often the worker looks at a running one.
	jobDuration  time.Duration
	upstreamPoll time.Duration
}

// Protocol versions the clients speak, as -eras names them.
const (
	versionExtension = "2026-07-28"
	versionLegacy    = "2025-11-25"
)

// eraOf returns how a client of protocol version name speaks: 2026-07-28
// with the Tasks extension, or 2025-11-25 in a session.
func eraOf(name string) (fixtures.Era, bool) {
	switch name {
	case versionExtension:
		return fixtures.EraExtension, true
	case versionLegacy:
		return fixtures.EraLegacy, true
	}
	return "", false
}

// eraVersion is the protocol version a client of era negotiates.
func eraVersion(era fixtures.Era) string {
	if era == fixtures.EraExtension {
		return versionExtension
	}
	return versionLegacy
}

func (o *options) validate() error {
	if err := command.CheckWindow(o.duration, o.warmup, o.rounds); err != nil {
		return err
	}
	switch {
	case o.jobDuration <= 0 || o.upstreamPoll <= 0:
		return fmt.Errorf("-job-duration and -upstream-poll must be positive, got %s and %s", o.jobDuration, o.upstreamPoll)
	case o.sessions < 2:
		return fmt.Errorf("-sessions must be at least 2 (1 session is always measured), got %d", o.sessions)
	case !o.pass && !o.accept:
		return errors.New("-pass=false and -accept=false leave nothing to measure")
	case len(o.eras) == 0:
		return errors.New("-eras names no protocol era; use 2026-07-28, 2025-11-25 or both, comma-separated")
	}
	return command.CheckDir(o.dir, "")
}

// parseEras reads a comma-separated list of protocol eras, in order,
// without repeats.
func parseEras(s string) ([]fixtures.Era, error) {
	return command.List(s, func(name string) (fixtures.Era, error) {
		era, ok := eraOf(name)
		if !ok {
			return era, fmt.Errorf("-eras: unknown protocol era %q; use 2026-07-28, 2025-11-25 or both, comma-separated", name)
		}
		return era, nil
	})
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, gogc string) int {
	var (
		o    options
		eras string
	)
	o.gogc = gogc
	return command.Run(ctx, args, stdout, stderr, command.Program[*results]{
		Name: "proxybench",
		Flags: func(fs *flag.FlagSet) {
			fs.DurationVar(&o.duration, "duration", 3*time.Second, "measured time of each measurement")
			fs.DurationVar(&o.warmup, "warmup", 500*time.Millisecond, "unmeasured warm-up before each measurement, on the same sessions")
			fs.IntVar(&o.sessions, "sessions", 8, "client sessions of the concurrent measurements")
			fs.StringVar(&eras, "eras", "2026-07-28,2025-11-25", "protocol eras of the pass-through measurements, comma-separated")
			fs.IntVar(&o.rounds, "rounds", 1, "run every pass-through measurement this many times, interleaved, and report the median")
			fs.BoolVar(&o.pass, "pass", true, "measure pass-through calls, direct and through the gateway")
			fs.BoolVar(&o.accept, "accept", true, "measure the acceptance path of a consequential call")
			fs.BoolVar(&o.json, "json", false, "print one JSON document instead of the table")
			fs.StringVar(&o.dir, "dir", os.TempDir(), "directory for the gateway's temporary SQLite ledger")
			fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file; samples carry the label role=client, gateway or upstream")
			fs.StringVar(&o.memProfile, "memprofile", "", "write an allocation profile of the whole run to this file")
			fs.DurationVar(&o.jobDuration, "job-duration", 10*time.Minute, "how long each remote job the worker dispatches runs at the provider")
			fs.DurationVar(&o.upstreamPoll, "upstream-poll", time.Second, "the worker's upstream_poll: how often it looks at a running remote job")
			fs.BoolVar(&o.verbose, "v", false, "log the gateway's and the provider's warnings and errors to stderr")
			fs.StringVar(&o.trace, "trace", "", "write a runtime execution trace of the whole run to this file (go tool trace)")
		},
		Check: func() (err error) {
			if o.eras, err = parseEras(eras); err != nil {
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
		DurationSec: o.duration.Seconds(),
		WarmupSec:   o.warmup.Seconds(),
		Sessions:    o.sessions,
		Rounds:      o.rounds,
		GOGC:        o.gogc,
		GOMEMLIMIT:  cmp.Or(os.Getenv("GOMEMLIMIT"), "none"),
		Accept:      o.accept,
	}
	if o.accept {
		m.JobDurationSec, m.UpstreamPollSec = o.jobDuration.Seconds(), o.upstreamPoll.Seconds()
	}
	return m
}
