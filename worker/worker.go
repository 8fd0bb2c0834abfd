// Package worker runs taskgate's background work on River: dispatching an
// accepted operation to its upstream, following the remote job until it
// ends, reconciling jobs and charges, carrying cancellations to the
// provider, and releasing expired operation IDs.
//
// Every handoff is recoverable. A worker claims an operation's lease in the
// ledger before touching it and heartbeats while it works; "send started"
// is committed before the upstream call and the remote job is bound after
// it. A worker that finds "send started" without a binding looks the
// operation up at the provider before anything else, and acts per the
// lookup table: attach, fetch, record the failure, wait and ask again,
// re-send once the contract says not_found is safe, or require review.
// An upstream's question during the call is recorded on the operation
// (input_required) for the gateway to put to the client; the answer comes
// back through the ledger, as the next send of the same operation or, for
// a question asked within the call, to the call that waits for it. A
// question of the upstream's own task is recorded the same way while the
// task is followed, and its answer goes to the task: with tasks/update
// (2026-07-28), or as the answer to the elicitation the task sent on
// tasks/result (2025-11-25).
// When a worker dies, its lease lapses and the sweeper re-enqueues the
// operation's job; a reconcile job it left running is rescued by the job
// queue of any replica once it has run past twice its timeout.
//
// Secret arguments are sealed in the ledger. The worker opens them with
// the secrets key ring in memory, only to pass them to the provider; a
// value that does not open sends the operation to review with nothing
// sent. It never writes or logs an opened value. It erases them, through
// the store, once [ledger.SecretsErasable] says no re-send can need them.
//
// Reconciliation gathers facts (the ledger's jobs and what the provider
// says of them), lets package reconcile assess them and records the
// outcome. The package never answers MCP clients and never decides spend
// policy or reconciliation rules itself: package policy and package
// reconcile do; it records what providers say and what those rules make of
// it.
package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/internal/crashpoint"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/limits"
	"github.com/taskgate/taskgate/provider"
	"github.com/taskgate/taskgate/secrets"
	"github.com/taskgate/taskgate/taskwire"
	"github.com/taskgate/taskgate/telemetry"
)

// ErrNotSent marks an upstream call that certainly never left the gateway
// (the upstream was not connected): it may simply be tried again.
var ErrNotSent = errors.New("the call was not sent")

// Upstream is what the worker needs of one upstream MCP client.
type Upstream interface {
	provider.Caller
	Endpoint() string
	// Credential names the credential the upstream's requests carry, a
	// fingerprint that shows nothing of it.
	Credential() string
	// OffersTasks is the task era the upstream offers, EraNone if none.
	OffersTasks() taskwire.Era
	// Send makes the consequential call, as a task when asTask is set and
	// the upstream agrees; header carries the operation ID when the
	// contract passes it as an HTTP header; elicit, when set, answers the
	// elicitation/create requests a 2025-11-25 upstream sends during the
	// call. An error wrapping ErrNotSent means the call never left the
	// gateway.
	Send(ctx context.Context, params *mcp.CallToolParams, header http.Header, asTask bool, ttl *time.Duration, elicit Elicit) (*taskwire.Task, *mcp.CallToolResult, error)
	// ToolTaskSupport is a tool's 2025-11-25 execution.taskSupport, as the
	// upstream lists it.
	ToolTaskSupport(ctx context.Context, tool string) (taskwire.TaskSupport, error)
	GetTask(ctx context.Context, taskID string) (*taskwire.Task, error)
	// TaskResult reads an upstream task's result; on a 2025-11-25
	// upstream it blocks until the task ends, and elicit, when set,
	// answers the question the task asks meanwhile. It returns only once
	// every elicit it started has returned.
	TaskResult(ctx context.Context, taskID string, elicit Elicit) (*mcp.CallToolResult, error)
	CancelTask(ctx context.Context, taskID string) error
	// UpdateTask answers the input requests of a 2026-07-28 upstream task.
	UpdateTask(ctx context.Context, taskID string, responses map[string]json.RawMessage) error
}

// Elicit answers an upstream's elicitation/create within a call.
type Elicit = func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error)

// Upstreams resolves upstream names.
type Upstreams interface {
	// Upstream is the named upstream as tenant reaches it: every request
	// the worker makes for an operation goes with its tenant's credential.
	Upstream(name, tenant string) (Upstream, bool)
}

// Options configure a Worker.
type Options struct {
	Store     ledger.Store
	Upstreams Upstreams
	Catalog   *provider.Catalog
	// Config supplies timings (worker section, task TTL, retention).
	Config *config.Config
	Logger *slog.Logger
	// Clock returns the current time; nil means time.Now.
	Clock func() time.Time
	// ID names this process in leases; default host-pid-random.
	ID string
	// Secrets opens the operations' sealed secret arguments before they
	// are sent; nil when none are sealed (secrets.store: plaintext).
	Secrets *secrets.Ring
	// Limits, when set, bounds each tenant's jobs running at once
	// (limits.jobs_per_tenant); nil runs every job as it comes.
	Limits *limits.Keeper
	// Tracing makes a span of every step on an operation, in the trace of
	// the attempt that created it; nil makes none.
	Tracing *telemetry.Tracing
}

// Worker runs the jobs.
type Worker struct {
	store     ledger.Store
	upstreams Upstreams
	catalog   *provider.Catalog
	cfg       *config.Config
	log       *slog.Logger
	clock     func() time.Time
	id        string
	river     ledger.JobClient
	retry     retryPolicy
	secrets   *secrets.Ring
	limits    *limits.Keeper
	tracing   *telemetry.Tracing

	stopSweep context.CancelFunc
	wg        sync.WaitGroup
	// stopping closes when Stop begins, so that jobs waiting between
	// looks at a remote job hand it back at once.
	stopping  chan struct{}
	closeOnce sync.Once
}

// New builds a Worker; Start runs it.
func New(opts *Options) (*Worker, error) {
	if opts == nil || opts.Store == nil || opts.Upstreams == nil || opts.Catalog == nil || opts.Config == nil {
		return nil, errors.New("worker: Store, Upstreams, Catalog and Config are required")
	}
	w := &Worker{
		store: opts.Store, upstreams: opts.Upstreams, catalog: opts.Catalog, cfg: opts.Config,
		log: opts.Logger, clock: opts.Clock, id: opts.ID, stopping: make(chan struct{}),
		retry: newRetryPolicy(opts.Config.Worker.Lease), secrets: opts.Secrets, limits: opts.Limits, tracing: opts.Tracing,
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	if w.clock == nil {
		w.clock = time.Now
	}
	if w.id == "" {
		host, _ := os.Hostname()
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		w.id = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &dispatchWorker{w: w})
	river.AddWorker(workers, &pollWorker{w: w})
	river.AddWorker(workers, &reconcileWorker{w: w})
	river.AddWorker(workers, &cancelWorker{w: w})
	river.AddWorker(workers, &expireWorker{w: w})
	river.AddWorker(workers, &archiveWorker{w: w})
	wc := w.cfg.Worker
	rc, err := w.store.NewJobClient(&river.Config{
		ID:      w.id,
		Logger:  w.log,
		Workers: workers,
		// Sends, polls and the rest run on queues of their own, so that
		// many long-running remote jobs being followed never hold up new
		// operations' sends.
		Queues: map[string]river.QueueConfig{
			QueueDispatch:      {MaxWorkers: wc.Workers},
			QueuePoll:          {MaxWorkers: wc.Workers},
			river.QueueDefault: {MaxWorkers: max(2, wc.Workers/2)},
		},
		FetchPollInterval: wc.FetchPoll,
		// Each fetch is a write transaction on the ledger; a longer
		// cooldown takes more jobs per fetch under load, for at most that
		// long more before a queued step starts. In bench/e2e (whose
		// fetch_poll of 20ms bounds the cooldown) 20ms instead of 10ms
		// took commits per operation from 9.0–9.2 to 8.6–8.7. River
		// refuses a cooldown longer than the fetch poll.
		FetchCooldown: min(wc.FetchPoll, 50*time.Millisecond),
		// Work is bounded by upstream timeouts and leases, not by River;
		// only reconciliation has a timeout (see reconcileTimeout).
		JobTimeout:           -1,
		RescueStuckJobsAfter: rescueAfter(w.cfg),
		// River's own cleaner deletes finished job rows; the ledger holds
		// what they did. A discarded job (retries exhausted) stays a week
		// for whoever looks into why.
		CompletedJobRetentionPeriod: wc.JobRetention,
		CancelledJobRetentionPeriod: wc.JobRetention,
		DiscardedJobRetentionPeriod: discardedJobRetention,
		RetryPolicy:                 w.retry,
		PeriodicJobs: append([]*river.PeriodicJob{
			river.NewPeriodicJob(river.PeriodicInterval(expireEvery(w.cfg.Retention.OperationIDs)),
				func() (river.JobArgs, *river.InsertOpts) { return ExpireArgs{}, nil },
				&river.PeriodicJobOpts{RunOnStart: true}),
		}, archiveJobs(w.cfg)...),
	})
	if err != nil {
		return nil, fmt.Errorf("start job queue: %w", err)
	}
	w.river = rc
	return w, nil
}

// discardedJobRetention is how long the job queue keeps a job whose
// retries ran out.
const discardedJobRetention = 7 * 24 * time.Hour

// reconcileTimeout bounds one run of a reconcile job. Reconcile jobs are
// unique per operation: while one counts as running, none other is queued,
// so one whose process died must be rescued by the job queue, and River
// rescues only jobs with a timeout. A run waits on upstream calls, each
// bounded by its upstream's timeout; four times the longest of those and
// the lease cuts only a run that lost its way, and the cut run is retried.
// Sends and polls keep no timeout: they renew the operation's lease, and
// the lease sweep queues them again when their process dies.
func reconcileTimeout(cfg *config.Config) time.Duration {
	longest := cfg.Worker.Lease
	for _, u := range cfg.Upstreams {
		longest = max(longest, u.Timeout)
	}
	return 4 * longest
}

// rescueAfter is how long a job with a timeout may stay running before the
// job queue takes it for stuck, its process gone, and runs it again: twice
// the reconcile timeout, so that a live run is cut before it is rescued.
func rescueAfter(cfg *config.Config) time.Duration { return 2 * reconcileTimeout(cfg) }

func expireEvery(retention time.Duration) time.Duration {
	return min(max(retention/10, time.Second), time.Hour)
}

// ID is the worker's lease identity.
func (w *Worker) ID() string { return w.id }

// Start runs the job queue and the lease sweeper until Stop; ctx bounds
// only the start itself.
func (w *Worker) Start(ctx context.Context) error {
	if err := w.river.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("start job queue: %w", err)
	}
	sweepCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.stopSweep = cancel
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.sweepLoop(sweepCtx)
	}()
	return nil
}

// Stop stops taking work, waits for running jobs up to ctx's deadline and
// then cancels them. Leases of cancelled work lapse and are recovered.
func (w *Worker) Stop(ctx context.Context) error {
	w.closeOnce.Do(func() { close(w.stopping) })
	if w.stopSweep != nil {
		w.stopSweep()
	}
	w.wg.Wait()
	err := w.river.Stop(ctx)
	if err != nil && ctx.Err() != nil {
		return w.river.StopAndCancel(context.WithoutCancel(ctx))
	}
	return err
}

// retryPolicy retries failed jobs quickly at first and at most every 30
// units: work is bounded by leases and upstream timeouts, and River's
// default (attempt^4 seconds) would leave an operation idle for hours. The
// unit is a thirtieth of the lease, at most a second: 2s, 4s, 8s, 16s, 30s
// with the default 30s lease.
type retryPolicy struct{ unit time.Duration }

func newRetryPolicy(lease time.Duration) retryPolicy {
	return retryPolicy{unit: min(max(lease/30, time.Millisecond), time.Second)}
}

// NextRetry implements river.ClientRetryPolicy.
func (r retryPolicy) NextRetry(job *rivertype.JobRow) time.Time {
	return time.Now().Add(r.delay(job.Attempt))
}

// delay is how long River waits after the attempt-th run failed.
func (r retryPolicy) delay(attempt int) time.Duration {
	return min(r.unit<<min(max(attempt, 1), 5), 30*r.unit)
}

// maxJobFailures is how many times in a row one job may fail on an
// operation before the operation waits for a human: errors that persist
// (a provider answering what its contract cannot read, a broken ledger)
// are not retried forever.
const maxJobFailures = 5

// Queues of the worker's jobs.
const (
	QueueDispatch = "taskgate_dispatch"
	QueuePoll     = "taskgate_poll"
)

// Job arguments. Each names the operation by its ledger row ID.

// DispatchArgs sends an accepted operation, or recovers one whose send
// started without a binding.
type DispatchArgs struct {
	Operation int64 `json:"operation"`
}

// Kind implements river.JobArgs.
func (DispatchArgs) Kind() string { return "taskgate_dispatch" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (DispatchArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: QueueDispatch} }

// PollArgs follows a running remote job.
type PollArgs struct {
	Operation int64 `json:"operation"`
}

// Kind implements river.JobArgs.
func (PollArgs) Kind() string { return "taskgate_poll" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (PollArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: QueuePoll} }

// ReconcileArgs reconciles an operation's remote jobs and charges.
type ReconcileArgs struct {
	Operation int64 `json:"operation"`
}

// Kind implements river.JobArgs.
func (ReconcileArgs) Kind() string { return "taskgate_reconcile" }

// InsertOpts implements river.JobArgsWithInsertOpts: one reconciler per
// operation at a time. While one waits or runs, another adds nothing: the
// waiting one reads the ledger afresh when it runs, and the running one
// runs again while anything is open.
func (ReconcileArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
		rivertype.JobStateRetryable, rivertype.JobStateScheduled,
	}}}
}

// CancelArgs carries a cancellation to the provider: of one job, or of
// every unfinished job of the operation when Job is empty.
type CancelArgs struct {
	Operation int64  `json:"operation"`
	Job       string `json:"job,omitempty"`
}

// Kind implements river.JobArgs.
func (CancelArgs) Kind() string { return "taskgate_cancel" }

// ExpireArgs releases operation IDs whose retention has passed.
type ExpireArgs struct{}

// Kind implements river.JobArgs.
func (ExpireArgs) Kind() string { return "taskgate_expire" }

// Dispatch is the job an acceptance enqueues with a created operation.
func Dispatch(op *ledger.Operation) []river.InsertManyParams {
	return []river.InsertManyParams{{Args: DispatchArgs{Operation: op.ID}}}
}

func job(args river.JobArgs, after time.Duration) river.InsertManyParams {
	p := river.InsertManyParams{Args: args}
	if after > 0 {
		p.InsertOpts = &river.InsertOpts{ScheduledAt: time.Now().Add(after)}
	}
	return p
}

type dispatchWorker struct {
	river.WorkerDefaults[DispatchArgs]
	w *Worker
}

func (d *dispatchWorker) Work(ctx context.Context, j *river.Job[DispatchArgs]) error {
	return d.w.withLease(ctx, j.Args.Operation, j.JobRow, d.w.dispatch)
}

type pollWorker struct {
	river.WorkerDefaults[PollArgs]
	w *Worker
}

func (p *pollWorker) Work(ctx context.Context, j *river.Job[PollArgs]) error {
	return p.w.withLease(ctx, j.Args.Operation, j.JobRow, p.w.dispatch)
}

type reconcileWorker struct {
	river.WorkerDefaults[ReconcileArgs]
	w *Worker
}

// Timeout implements river.Worker; see reconcileTimeout.
func (r *reconcileWorker) Timeout(*river.Job[ReconcileArgs]) time.Duration {
	return reconcileTimeout(r.w.cfg)
}

func (r *reconcileWorker) Work(ctx context.Context, j *river.Job[ReconcileArgs]) error {
	crashpoint.Reach(crashpoint.WhileReconciling)
	open, err := r.w.Reconcile(ctx, j.Args.Operation)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// A run cut by reconcileTimeout (a slow provider) tries again
		// later: a snooze, unlike a failure, never uses up the job's
		// attempts, so the operation is never left unreconciled for good.
		r.w.log.Warn("a reconciliation ran out of time; it runs again later", "operation", j.Args.Operation, "timeout", reconcileTimeout(r.w.cfg), "err", err)
		return river.JobSnooze(r.w.cfg.Worker.Reconcile)
	}
	if err != nil {
		return err
	}
	if open {
		return river.JobSnooze(r.w.cfg.Worker.Reconcile)
	}
	return nil
}

type cancelWorker struct {
	river.WorkerDefaults[CancelArgs]
	w *Worker
}

func (c *cancelWorker) Work(ctx context.Context, j *river.Job[CancelArgs]) error {
	return c.w.cancelRemote(ctx, j.Args.Operation, j.Args.Job, j.Attempt)
}

type expireWorker struct {
	river.WorkerDefaults[ExpireArgs]
	w *Worker
}

func (e *expireWorker) Work(ctx context.Context, _ *river.Job[ExpireArgs]) error {
	return e.w.expire(ctx)
}

// withLease claims the operation for one job, heartbeats while fn works,
// and lets the lease go when fn returns without handing it on. A job that
// fails keeps the operation queued until River runs it again, so that the
// sweeper does not start a second one; after maxJobFailures failures in a
// row the operation waits for a human.
func (w *Worker) withLease(ctx context.Context, opRef int64, job *rivertype.JobRow, fn func(context.Context, *lease) error) error {
	turn, err := w.takeTurn(ctx, opRef)
	if err != nil {
		return err
	}
	defer turn.pause()
	owner := fmt.Sprintf("%s/%d", w.id, job.ID)
	l := &lease{w: w, owner: owner, opRef: opRef, turn: turn}
	until := w.clock().Add(w.cfg.Worker.Lease)
	op, err := w.store.LeaseClaim(ctx, opRef, owner, until)
	switch {
	case errors.Is(err, ledger.ErrLeaseHeld):
		// Another worker is on it; this job is a stale duplicate.
		return nil
	case errors.Is(err, ledger.ErrNotFound):
		return river.JobCancel(err)
	case err != nil:
		return err
	}
	l.op = op
	ctx, span := w.step(ctx, op, stepName(op.State))
	defer span.End()
	jobCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.heartbeat(jobCtx, l, until, cancel)
	}()
	if l.args, err = w.arguments(op); err != nil {
		err = w.undecryptable(jobCtx, l, err)
	} else {
		err = fn(jobCtx, l)
	}
	cancel(nil)
	<-done
	if errors.Is(err, ledger.ErrStateChanged) {
		// The operation moved on under this job (a cancellation, say);
		// what it learnt was kept. Nothing is left for it to do if the
		// operation ended.
		if cur, gerr := w.store.OperationGet(context.WithoutCancel(ctx), &ledger.OperationGetParams{ID: opRef}); gerr == nil && cur.State.Terminal() {
			err = nil
		}
	}
	if l.handedOn {
		return err
	}
	var snooze *rivertype.JobSnoozeError
	var cancelled *rivertype.JobCancelError
	switch {
	case err == nil, errors.As(err, &cancelled):
		l.release(ctx, "", time.Time{})
	case errors.As(err, &snooze):
		// Keep the lease past a snooze so that the sweeper does not queue
		// a second job while this one waits.
		l.release(ctx, ledger.LeaseQueued, w.clock().Add(snooze.Duration+w.releaseLag()+w.cfg.Worker.Lease))
	case job.Attempt >= maxJobFailures && ctx.Err() == nil && !errors.Is(err, ErrNotSent):
		msg := fmt.Sprintf("the worker failed %d times in a row on this operation (last: %v); nothing more is done until a human resolves it", job.Attempt, err)
		if rerr := w.review(context.WithoutCancel(ctx), l, ledger.ReasonWorkerFailures, msg); rerr != nil {
			w.logger(l.op).Warn("send an operation to review after repeated failures", "err", rerr)
			l.release(ctx, "", time.Time{})
			return err
		}
		return nil
	default:
		// River runs the job again after its retry delay: the operation
		// stays queued for it meanwhile.
		l.release(ctx, ledger.LeaseQueued, w.clock().Add(w.retry.delay(job.Attempt)+w.releaseLag()+w.cfg.Worker.Lease))
	}
	return err
}

// heartbeat extends l's lease every third of the lease until ctx ends. It
// cancels the job only when the lease is lost to another worker, or when it
// could not be extended before it ran out: a passing ledger error must not
// abort a send in flight.
func (w *Worker) heartbeat(ctx context.Context, l *lease, until time.Time, cancel context.CancelCauseFunc) {
	every := w.cfg.Worker.Lease / 3
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		next := w.clock().Add(w.cfg.Worker.Lease)
		err := w.store.LeaseExtend(context.WithoutCancel(ctx), l.opRef, l.owner, next)
		switch {
		case err == nil:
			until = next
			t.Reset(every)
		case errors.Is(err, ledger.ErrLeaseHeld):
			cancel(fmt.Errorf("lost the lease on operation %d: %w", l.opRef, err))
			return
		default:
			left := until.Sub(w.clock())
			if left <= w.cfg.Worker.Lease/6 {
				cancel(fmt.Errorf("could not extend the lease on operation %d before it ran out: %w", l.opRef, err))
				return
			}
			w.log.Warn("extend an operation lease; trying again", "operation_ref", l.opRef, "err", err)
			t.Reset(min(every, left/3))
		}
	}
}

// riverSchedulerLag is how late River may release a scheduled or snoozed
// job: its scheduler moves them to the queue on a fixed interval.
const riverSchedulerLag = 5 * time.Second

// releaseLag is how late a scheduled or snoozed job may start: River's
// scheduler releases it, and a fetch poll finds it (nothing wakes the
// producers for it on SQLite).
func (w *Worker) releaseLag() time.Duration { return riverSchedulerLag + w.cfg.Worker.FetchPoll }

// lease is one job's hold on an operation.
type lease struct {
	w     *Worker
	owner string
	opRef int64
	op    *ledger.Operation
	// args are the operation's arguments as the provider receives them:
	// its sealed secret values opened. They never change while an
	// operation may be sent, and are never written back.
	args     json.RawMessage
	handedOn bool
	// turn is the job's place among its tenant's jobs running.
	turn *turn
}

// release hands the lease to owner until until ("" releases it), unless
// it was lost meanwhile.
func (l *lease) release(ctx context.Context, owner string, until time.Time) {
	if _, err := l.w.store.Transition(context.WithoutCancel(ctx), &ledger.TransitionParams{
		OperationRef: l.opRef, Owner: l.owner, Lease: &ledger.Lease{Owner: owner, Until: until},
	}); err != nil && !errors.Is(err, ledger.ErrLeaseHeld) {
		l.w.log.Warn("release operation lease", "operation_ref", l.opRef, "err", err)
	}
}

// transition applies p as the lease holder. When p enqueues the next job
// or ends the operation, the lease is handed on with it.
func (l *lease) transition(ctx context.Context, p *ledger.TransitionParams) (*ledger.Operation, error) {
	p.OperationRef = l.opRef
	p.Owner = l.owner
	if p.Lease == nil && (len(p.Enqueue) > 0 || p.To.Terminal() || p.To == ledger.StateReview) {
		next := &ledger.Lease{}
		if len(p.Enqueue) > 0 {
			next = &ledger.Lease{Owner: ledger.LeaseQueued, Until: l.w.clock().Add(l.w.cfg.Worker.Lease + maxDelay(p.Enqueue))}
			if maxDelay(p.Enqueue) > 0 {
				next.Until = next.Until.Add(riverSchedulerLag)
			}
		}
		p.Lease = next
	}
	op, err := l.w.store.Transition(ctx, p)
	if err != nil {
		return nil, err
	}
	if p.Lease != nil {
		l.handedOn = true
	}
	l.op = op
	return op, nil
}

func maxDelay(jobs []river.InsertManyParams) time.Duration {
	var d time.Duration
	for _, j := range jobs {
		if j.InsertOpts != nil && !j.InsertOpts.ScheduledAt.IsZero() {
			d = max(d, time.Until(j.InsertOpts.ScheduledAt))
		}
	}
	return d
}

// logger returns a logger that names the operation and tenant.
func (w *Worker) logger(op *ledger.Operation) *slog.Logger {
	return w.log.With("operation_id", op.OperationID, "tenant", op.Tenant, "task_id", op.TaskID)
}
