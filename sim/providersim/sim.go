package providersim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/taskwire"
)

// Defaults for [Options].
const (
	DefaultJobDuration = 3 * time.Second
	DefaultEstimate    = Micros(18_000_000) // 18.00 USD
	DefaultFinalCharge = Micros(17_840_000) // 17.84 USD
	// DefaultGridEstimate and DefaultGridFinalCharge price a runner's
	// browser grid charge.
	DefaultGridEstimate    = Micros(2_000_000) // 2.00 USD
	DefaultGridFinalCharge = Micros(1_500_000) // 1.50 USD
	// DefaultCrashExitCode is the exit status of the default [Options.Crash].
	DefaultCrashExitCode = 3
)

// Options configure a [Sim]. The zero value (or a nil *Options) is a
// simulator with the defaults below, no faults and an in-memory record.
type Options struct {
	// Logger receives one line per job event and fault change. If nil,
	// nothing is logged.
	Logger *slog.Logger
	// Clock stamps jobs and charges and decides a job's age for lookup_delay.
	// If nil, time.Now.
	Clock func() time.Time
	// JobDuration is how long a job runs before it ends. If zero,
	// DefaultJobDuration (3s).
	JobDuration time.Duration
	// Estimate is what estimate_suite quotes and what a running job's pending
	// charge holds. If zero, DefaultEstimate (18.00 USD).
	Estimate Micros
	// FinalCharge is a successful job's final charge. If zero,
	// DefaultFinalCharge (17.84 USD).
	FinalCharge Micros
	// GridEstimate is what a running runner's browser grid charge holds,
	// for a run_matrix call with browser_grid, and what estimate_matrix adds
	// per runner for one. If zero, DefaultGridEstimate (2.00 USD).
	GridEstimate Micros
	// GridFinalCharge is the browser grid charge of a runner that
	// succeeded. If zero, DefaultGridFinalCharge (1.50 USD).
	GridFinalCharge Micros
	// Faults are the faults injected from the start; see [Sim.SetFaults].
	Faults Faults
	// StatePath, if set, names a JSON file that holds the record. It is
	// rewritten atomically on every change, and a Sim opened over an existing
	// file continues its record: job numbers go on, and jobs that had not
	// ended resume. Use [Open] with a StatePath.
	StatePath string
	// Crash is called by the crash_after_accept fault right after a new job
	// is recorded. If nil, the process exits with DefaultCrashExitCode.
	Crash func()
}

// A Sim is the simulated hosted_test provider: a job engine with its own
// authoritative record, served as an MCP server. Its methods are safe for
// concurrent use.
type Sim struct {
	logger       *slog.Logger
	crash        func()
	pollInterval time.Duration // suggested to task pollers
	engine       *engine
	server       *mcp.Server
	handler      http.Handler
}

// New returns a simulator whose record lives in memory. It panics if
// opts.StatePath is set (use [Open], which can report a bad state file) or if
// opts hold a negative duration or amount.
func New(opts *Options) *Sim {
	if opts != nil && opts.StatePath != "" {
		panic("providersim.New cannot load Options.StatePath; use providersim.Open")
	}
	s, err := Open(opts)
	if err != nil {
		panic(err)
	}
	return s
}

// Open returns a simulator. With opts.StatePath set it loads the record from
// that file (a missing file is an empty record) and resumes the jobs that had
// not ended.
func Open(opts *Options) (*Sim, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	opts = nil // the caller's options are never kept or changed
	if err := o.withDefaults(); err != nil {
		return nil, err
	}
	var store *stateStore
	var saved *stateFile
	if o.StatePath != "" {
		store = &stateStore{path: o.StatePath}
		var err error
		if saved, err = store.load(); err != nil {
			return nil, err
		}
	}
	s := &Sim{
		logger:       o.Logger,
		crash:        o.Crash,
		pollInterval: pollIntervalFor(o.JobDuration),
		engine:       newEngine(&o, store),
	}
	var err error
	if s.server, err = s.newServer(); err != nil {
		return nil, err
	}
	s.handler = s.newHTTPHandler()
	if saved != nil {
		s.engine.restore(saved)
	}
	s.logger.Info("hosted_test simulator ready", "faults", o.Faults.String(), "job_duration", o.JobDuration, "state_path", o.StatePath)
	return s, nil
}

func (o *Options) withDefaults() error {
	switch {
	case o.JobDuration < 0:
		return fmt.Errorf("providersim: JobDuration %s is negative; use a positive duration or zero for %s", o.JobDuration, DefaultJobDuration)
	case o.Estimate < 0:
		return fmt.Errorf("providersim: Estimate %s is negative", o.Estimate)
	case o.FinalCharge < 0:
		return fmt.Errorf("providersim: FinalCharge %s is negative", o.FinalCharge)
	case o.GridEstimate < 0:
		return fmt.Errorf("providersim: GridEstimate %s is negative", o.GridEstimate)
	case o.GridFinalCharge < 0:
		return fmt.Errorf("providersim: GridFinalCharge %s is negative", o.GridFinalCharge)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.JobDuration == 0 {
		o.JobDuration = DefaultJobDuration
	}
	if o.Estimate == 0 {
		o.Estimate = DefaultEstimate
	}
	if o.FinalCharge == 0 {
		o.FinalCharge = DefaultFinalCharge
	}
	if o.GridEstimate == 0 {
		o.GridEstimate = DefaultGridEstimate
	}
	if o.GridFinalCharge == 0 {
		o.GridFinalCharge = DefaultGridFinalCharge
	}
	if o.Crash == nil {
		o.Crash = func() { os.Exit(DefaultCrashExitCode) }
	}
	return nil
}

// SetFaults replaces the injected faults. Jobs already created keep the
// behaviour they were created with; drop_response_after_accept counts from now.
func (s *Sim) SetFaults(f Faults) { s.engine.setFaults(f) }

// Faults returns the faults now injected; DropResponseAfterAccept is the
// number of calls still to be dropped.
func (s *Sim) Faults() Faults { return s.engine.currentFaults() }

// Jobs returns every job, oldest first.
func (s *Sim) Jobs() []Job { return s.engine.record().Jobs }

// Charges returns every charge of every kind, in the order of their jobs.
func (s *Sim) Charges() []Charge { return s.engine.record().Charges }

// Totals sums up the record.
func (s *Sim) Totals() Totals { return s.engine.record().Totals }

// Record returns the whole record at one instant.
func (s *Sim) Record() Record { return s.engine.record() }

// Server returns the MCP server. Over any go-sdk transport it serves plain
// tools/call in every protocol version; run_suite as a task needs the front
// doors of [Sim.HTTPHandler] or [Sim.ServeStdio], which keep the params.task
// field the go-sdk drops.
func (s *Sim) Server() *mcp.Server { return s.server }

// ServeStdio serves MCP over a pair of streams (a process's stdin and stdout)
// until in ends or ctx is cancelled; a cancelled ctx is a clean stop. Streams
// that are also io.Closers are closed when serving ends, which unblocks a
// pending read.
func (s *Sim) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	err := s.server.Run(ctx, taskwire.NewStdioTransport(in, out))
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("serving hosted_test over stdio: %w", err)
	}
	return nil
}

// Close stops every job goroutine and waits for them to return. Jobs keep the
// state they had (a running job stays running in the record and resumes when a
// Sim is opened over the same state file); calls waiting on a job return an
// error. Close may be called more than once.
func (s *Sim) Close() error {
	s.engine.close()
	return nil
}
