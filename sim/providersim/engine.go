package providersim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// The job engine: the provider's authoritative record and the goroutines that
// move jobs through their states. It knows nothing about MCP; the tools in
// tools.go are one way in, and any other front end (a task host, say) calls
// the same methods.

// firstJobNumber is the number of the first job a fresh record hands out.
const firstJobNumber = 9912

// firstMatrixNumber is the number of the first matrix a fresh record hands
// out.
const firstMatrixNumber = 1

// Test counts a finished suite reports.
const (
	suiteTests        = 412
	failedSuiteFailed = 3
)

// errClosed is returned for work asked of a closed simulator.
var errClosed = errors.New("the hosted_test simulator is shut down; start a new one")

// plan is what a job will do, fixed when it is created so that faults changed
// later do not rewrite jobs already under way.
type plan struct {
	DueAt    time.Time `json:"due_at"`
	Fail     bool      `json:"fail,omitempty"`
	Invoice  bool      `json:"invoice"`
	Estimate Micros    `json:"estimate_usd"`
	Final    Micros    `json:"final_usd"`
	// BrowserGrid says the job also carries a browser grid charge, at
	// GridEstimate while it runs and GridFinal once it succeeded. The three
	// are absent from files written before the browser grid existed.
	BrowserGrid  bool   `json:"browser_grid,omitempty"`
	GridEstimate Micros `json:"grid_estimate_usd,omitempty"`
	GridFinal    Micros `json:"grid_final_usd,omitempty"`
}

// jobState is one job with its plan, charges and signals.
type jobState struct {
	number int
	job    Job
	plan   plan
	// charges are empty until the job runs with an invoice; then the job's
	// own charge comes first and its browser grid charge, if any, second.
	charges []Charge
	done    chan struct{} // closed when the job reaches a terminal state
	stop    chan struct{} // closed when the job is cancelled
}

// ownKind is the kind of the charge that bills the job itself.
func (js *jobState) ownKind() ChargeKind {
	if js.job.Matrix != "" {
		return ChargeKindRunner
	}
	return ChargeKindSuite
}

// openCharges returns the pending charges of a job that starts running:
// its own and, when its plan says so, the browser grid's.
func (js *jobState) openCharges(now time.Time) []Charge {
	own := Charge{
		ID:        fmt.Sprintf("charge-%d", js.number),
		JobID:     js.job.ID,
		Kind:      js.ownKind(),
		Amount:    js.plan.Estimate,
		Currency:  Currency,
		Status:    ChargePending,
		CreatedAt: now,
		UpdatedAt: now,
	}
	if !js.plan.BrowserGrid {
		return []Charge{own}
	}
	grid := own
	grid.ID, grid.Kind, grid.Amount = fmt.Sprintf("grid-charge-%d", js.number), ChargeKindBrowserGrid, js.plan.GridEstimate
	return []Charge{own, grid}
}

// finalAmount is what a charge of the given kind amounts to once the job
// succeeded.
func (p plan) finalAmount(kind ChargeKind) Micros {
	if kind == ChargeKindBrowserGrid {
		return p.GridFinal
	}
	return p.Final
}

// startRequest is one request to run a suite.
type startRequest struct {
	Suite, Commit string
	Token         string
	Key           string
	KeySource     KeySource
	Protocol      string
}

// matrixRequest is one request to run a suite on several runners at once.
type matrixRequest struct {
	startRequest
	// Runners is how many runners the call asked for; the faults
	// extra_runner and missing_runner change how many start.
	Runners int
	// BrowserGrid gives every runner a browser grid charge besides its own.
	BrowserGrid bool
}

// startOutcome says what the engine did with a startRequest.
type startOutcome struct {
	Job     Job
	Created bool // false: the key already had this job
	Drop    bool // drop_response_after_accept: never answer this call
	Crash   bool // crash_after_accept: call Options.Crash now
}

// matrixOutcome says what the engine did with a matrixRequest.
type matrixOutcome struct {
	// MatrixID is the new matrix, or, for a key that already had jobs, the
	// matrix of the oldest of them that belongs to one (empty when none does).
	MatrixID string
	// Suite is the suite the runners run.
	Suite string
	// Jobs are the new matrix's runners, or every job the key already had;
	// oldest first, and empty for a new matrix that started no runner.
	Jobs  []Job
	Drop  bool // drop_response_after_accept: never answer this call
	Crash bool // crash_after_accept: call Options.Crash now
}

// cancelOutcome is what cancelling a job did.
type cancelOutcome struct {
	Job            Job
	EffectReversed bool
	Message        string
}

type engine struct {
	logger       *slog.Logger
	clock        func() time.Time
	jobDuration  time.Duration
	estimate     Micros
	finalCharge  Micros
	gridEstimate Micros
	gridFinal    Micros
	store        *stateStore // nil: the record lives only in memory

	closing chan struct{} // closed by close: job goroutines and waiters return
	wg      sync.WaitGroup

	mu         sync.Mutex
	closed     bool
	nextNumber int
	nextMatrix int
	jobs       []*jobState // oldest first
	byID       map[string]*jobState
	byKey      map[string][]*jobState // oldest first
	faults     Faults
}

func newEngine(o *Options, store *stateStore) *engine {
	return &engine{
		logger:       o.Logger,
		clock:        o.Clock,
		jobDuration:  o.JobDuration,
		estimate:     o.Estimate,
		finalCharge:  o.FinalCharge,
		gridEstimate: o.GridEstimate,
		gridFinal:    o.GridFinalCharge,
		store:        store,
		closing:      make(chan struct{}),
		nextNumber:   firstJobNumber,
		nextMatrix:   firstMatrixNumber,
		byID:         make(map[string]*jobState),
		byKey:        make(map[string][]*jobState),
		faults:       o.Faults,
	}
}

// restore loads a saved record and resumes the jobs that had not ended.
func (e *engine) restore(st *stateFile) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.nextNumber = max(st.NextJobNumber, firstJobNumber)
	// A file written before matrices existed has no matrix number.
	e.nextMatrix = max(st.NextMatrixNumber, firstMatrixNumber)
	charges := make(map[string][]Charge, len(st.Jobs))
	for _, c := range st.Charges {
		charges[c.JobID] = append(charges[c.JobID], c)
	}
	for _, sj := range st.Jobs {
		js := &jobState{
			number:  sj.Number,
			job:     sj.Job,
			plan:    sj.Plan,
			charges: charges[sj.ID],
			done:    make(chan struct{}),
			stop:    make(chan struct{}),
		}
		e.add(js)
		if js.job.Status.Terminal() {
			close(js.done)
			continue
		}
		e.logger.Info("resuming job from saved record", "job_id", js.job.ID, "status", js.job.Status)
		e.wg.Add(1)
		go e.run(js)
	}
}

func (e *engine) add(js *jobState) {
	e.jobs = append(e.jobs, js)
	e.byID[js.job.ID] = js
	if k := js.job.IdempotencyKey; k != "" {
		e.byKey[k] = append(e.byKey[k], js)
	}
}

// start accepts a run: it returns the key's existing job, or records a new job
// (durably, when there is a state file) and starts it.
func (e *engine) start(r startRequest) (startOutcome, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return startOutcome{}, errClosed
	}
	var out startOutcome
	if existing := e.byKey[r.Key]; r.Key != "" && len(existing) > 0 && !e.faults.IgnoreIdempotencyKey {
		out.Job = existing[0].job
		e.logger.Info("run_suite attached to existing job", "job_id", out.Job.ID, "idempotency_key", r.Key, "key_source", r.KeySource)
	} else {
		created, err := e.createLocked(r, "", 1, false)
		if err != nil {
			return startOutcome{}, err
		}
		js := created[0]
		out.Job, out.Created = js.job, true
		out.Crash = e.faults.CrashAfterAccept
		e.wg.Add(1)
		go e.run(js)
	}
	if e.faults.DropResponseAfterAccept > 0 {
		e.faults.DropResponseAfterAccept--
		out.Drop = true
	}
	return out, nil
}

// startMatrix accepts a run on several runners: it returns every job the key
// already has, or records a new matrix with all its runners in one durable
// step and starts them. Drop and crash act on the call as a whole.
func (e *engine) startMatrix(r matrixRequest) (matrixOutcome, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return matrixOutcome{}, errClosed
	}
	var out matrixOutcome
	if existing := e.byKey[r.Key]; r.Key != "" && len(existing) > 0 && !e.faults.IgnoreIdempotencyKey {
		out.Suite = existing[0].job.Suite
		for _, js := range existing {
			out.Jobs = append(out.Jobs, js.job)
			if out.MatrixID == "" {
				out.MatrixID = js.job.Matrix
			}
		}
		e.logger.Info("run_matrix attached to existing jobs", "matrix_id", out.MatrixID, "jobs", len(out.Jobs), "idempotency_key", r.Key, "key_source", r.KeySource)
	} else {
		matrix := fmt.Sprintf("hosted-matrix-%d", e.nextMatrix)
		runners := e.faults.matrixRunners(r.Runners)
		e.nextMatrix++
		created, err := e.createLocked(r.startRequest, matrix, runners, r.BrowserGrid)
		if err != nil {
			e.nextMatrix--
			return matrixOutcome{}, err
		}
		out.MatrixID, out.Suite = matrix, r.Suite
		// With no runner recorded there is no accepted job to crash after.
		out.Crash = e.faults.CrashAfterAccept && len(created) > 0
		for _, js := range created {
			out.Jobs = append(out.Jobs, js.job)
			e.wg.Add(1)
			go e.run(js)
		}
		e.logger.Info("matrix created", "matrix_id", matrix, "runners_asked", r.Runners, "runners", runners, "idempotency_key", r.Key)
	}
	if e.faults.DropResponseAfterAccept > 0 {
		e.faults.DropResponseAfterAccept--
		out.Drop = true
	}
	return out, nil
}

// createLocked records count new queued jobs for r in one save, so that a
// crash leaves all of them or none. With a matrix they are its runners,
// numbered from 1, each with a browser grid charge when grid is set; without,
// count is 1 and grid false. On a failed save nothing is kept, as nothing was
// acknowledged. The caller holds e.mu.
func (e *engine) createLocked(r startRequest, matrix string, count int, grid bool) ([]*jobState, error) {
	now := e.clock()
	created := make([]*jobState, 0, count)
	for i := range count {
		number := e.nextNumber
		js := &jobState{
			number: number,
			job: Job{
				ID:             fmt.Sprintf("hosted-suite-%d", number),
				IdempotencyKey: r.Key,
				KeySource:      r.KeySource,
				Protocol:       r.Protocol,
				Suite:          r.Suite,
				Commit:         r.Commit,
				Token:          r.Token,
				Status:         StatusQueued,
				CreatedAt:      now,
				UpdatedAt:      now,
			},
			plan: plan{
				DueAt:    now.Add(e.faults.jobDuration(e.jobDuration)),
				Fail:     e.faults.FailJobs,
				Invoice:  !e.faults.NoInvoice,
				Estimate: e.estimate,
				Final:    e.finalCharge,
			},
			done: make(chan struct{}),
			stop: make(chan struct{}),
		}
		if matrix != "" {
			js.job.Matrix, js.job.Runner = matrix, i+1
		}
		if grid {
			js.plan.BrowserGrid, js.plan.GridEstimate, js.plan.GridFinal = true, e.gridEstimate, e.gridFinal
		}
		// overcharge bills the job itself; the browser grid's amount is the
		// grid's own.
		if e.faults.Overcharge > 0 {
			js.plan.Final = e.faults.Overcharge
		}
		e.nextNumber++
		e.add(js)
		created = append(created, js)
	}
	if err := e.saveLocked(); err != nil {
		e.forgetLocked(created)
		if matrix != "" {
			return nil, fmt.Errorf("could not record matrix %s, so none of its %d runners was started: %w", matrix, count, err)
		}
		return nil, fmt.Errorf("could not record the new job, so it was not started: %w", err)
	}
	for _, js := range created {
		attrs := []any{"job_id", js.job.ID, "suite", r.Suite, "idempotency_key", r.Key, "key_source", r.KeySource, "protocol_version", r.Protocol}
		if matrix != "" {
			attrs = append(attrs, "matrix_id", matrix, "runner", js.job.Runner)
		}
		e.logger.Info("job created", attrs...)
	}
	return created, nil
}

// forgetLocked removes the jobs just added by createLocked, newest last, as
// if they had never been created. The caller holds e.mu.
func (e *engine) forgetLocked(created []*jobState) {
	e.nextNumber -= len(created)
	e.jobs = e.jobs[:len(e.jobs)-len(created)]
	for _, js := range created {
		delete(e.byID, js.job.ID)
		if k := js.job.IdempotencyKey; k != "" {
			e.byKey[k] = e.byKey[k][:len(e.byKey[k])-1]
			if len(e.byKey[k]) == 0 {
				delete(e.byKey, k)
			}
		}
	}
}

// run moves one job from queued to running and, when it is due, to its end.
// It returns early when the job is cancelled or the engine closes; a job left
// running by close stays running in the record (and resumes from a state file).
func (e *engine) run(js *jobState) {
	defer e.wg.Done()
	e.mu.Lock()
	if js.job.Status == StatusQueued {
		now := e.clock()
		js.job.Status, js.job.UpdatedAt = StatusRunning, now
		if js.plan.Invoice && len(js.charges) == 0 {
			js.charges = js.openCharges(now)
		}
		e.saveOrLog("job running")
		e.logger.Info("job running", "job_id", js.job.ID)
	}
	wait := js.plan.DueAt.Sub(e.clock())
	e.mu.Unlock()

	timer := time.NewTimer(max(wait, 0))
	defer timer.Stop()
	select {
	case <-timer.C:
		e.finish(js)
	case <-js.stop:
	case <-e.closing:
	}
}

// finish ends a job that ran its course.
func (e *engine) finish(js *jobState) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if js.job.Status.Terminal() {
		return
	}
	now := e.clock()
	js.job.UpdatedAt = now
	if js.plan.Fail {
		js.job.Status = StatusFailed
		js.job.Passed, js.job.Failed = suiteTests-failedSuiteFailed, failedSuiteFailed
		e.refundLocked(js, now)
	} else {
		js.job.Status = StatusSucceeded
		js.job.Passed = suiteTests
		for i := range js.charges {
			c := &js.charges[i]
			c.Amount, c.Status, c.UpdatedAt = js.plan.finalAmount(c.Kind), ChargeFinal, now
		}
	}
	close(js.done)
	e.saveOrLog("job ended")
	e.logger.Info("job ended", "job_id", js.job.ID, "status", js.job.Status)
}

// refundLocked refunds every charge of a job that ended without a result.
func (e *engine) refundLocked(js *jobState, now time.Time) {
	for i := range js.charges {
		c := &js.charges[i]
		c.Amount, c.Status, c.UpdatedAt = 0, ChargeRefunded, now
	}
}

// cancel ends a queued or running job, refunding its pending charges. A job
// that has already ended is left exactly as it is.
func (e *engine) cancel(id string) (cancelOutcome, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	js, ok := e.byID[id]
	if !ok {
		return cancelOutcome{}, unknownJobError(id)
	}
	switch js.job.Status {
	case StatusSucceeded:
		return cancelOutcome{Job: js.job, Message: "job already completed; the effect was not reversed"}, nil
	case StatusFailed:
		return cancelOutcome{Job: js.job, Message: "job already failed; nothing was delivered and its charge was refunded"}, nil
	case StatusCancelled:
		return cancelOutcome{Job: js.job, EffectReversed: true, Message: "job was already cancelled; nothing was delivered and its charge was refunded"}, nil
	}
	now := e.clock()
	js.job.Status, js.job.UpdatedAt = StatusCancelled, now
	e.refundLocked(js, now)
	close(js.stop)
	close(js.done)
	e.saveOrLog("job cancelled")
	e.logger.Info("job cancelled", "job_id", id)
	return cancelOutcome{Job: js.job, EffectReversed: true, Message: "job cancelled before it delivered a result; nothing was delivered and its pending charge was refunded"}, nil
}

// wait blocks until the job ends, ctx ends or the engine closes, and returns
// the job with its charges.
func (e *engine) wait(ctx context.Context, id string) (Job, []Charge, error) {
	e.mu.Lock()
	js, ok := e.byID[id]
	e.mu.Unlock()
	if !ok {
		return Job{}, nil, unknownJobError(id)
	}
	select {
	case <-js.done:
	case <-ctx.Done():
		return Job{}, nil, fmt.Errorf("stopped waiting for %s: %w", id, ctx.Err())
	case <-e.closing:
		return Job{}, nil, errClosed
	}
	job, charges, _ := e.job(id)
	return job, charges, nil
}

// job returns one job and a copy of its charges, own first.
func (e *engine) job(id string) (Job, []Charge, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	js, ok := e.byID[id]
	if !ok {
		return Job{}, nil, false
	}
	return js.job, slices.Clone(js.charges), true
}

// lookup returns every job for an idempotency key, oldest first, as
// lookup_operation sees them: without the jobs a lagging index hides.
func (e *engine) lookup(key string) ([]Job, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.faults.LookupIndeterminate {
		return nil, fmt.Errorf("operation index unavailable: cannot tell whether idempotency key %q has a job; try again later", key)
	}
	now := e.clock()
	var out []Job
	for _, js := range e.byKey[key] {
		if now.Sub(js.job.CreatedAt) < e.faults.LookupDelay {
			continue
		}
		out = append(out, js.job)
	}
	return out, nil
}

// chargesFor returns every charge of one job, or of all jobs of a key when
// jobID is empty, in the order of their jobs.
func (e *engine) chargesFor(jobID, key string) ([]Charge, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var jobs []*jobState
	if jobID != "" {
		js, ok := e.byID[jobID]
		if !ok {
			return nil, unknownJobError(jobID)
		}
		jobs = []*jobState{js}
	} else {
		jobs = e.byKey[key]
	}
	var out []Charge
	for _, js := range jobs {
		out = append(out, js.charges...)
	}
	return out, nil
}

// record returns a copy of the whole record.
func (e *engine) record() Record {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := Record{Jobs: make([]Job, 0, len(e.jobs)), Charges: []Charge{}}
	for _, js := range e.jobs {
		r.Jobs = append(r.Jobs, js.job)
		r.Charges = append(r.Charges, js.charges...)
	}
	r.Totals = totals(r)
	return r
}

// totals sums up a record's jobs and charges.
func totals(r Record) Totals {
	t := Totals{JobsStarted: len(r.Jobs)}
	for _, c := range r.Charges {
		if c.Status == ChargeFinal {
			t.FinalCharges++
			t.FinalChargeUSD += c.Amount
		}
	}
	return t
}

func (e *engine) setFaults(f Faults) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults = f
	e.logger.Info("faults set", "faults", f.String())
}

func (e *engine) currentFaults() Faults {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.faults
}

// close stops every job goroutine and waits for them; jobs keep the state they
// had. Calls blocked waiting on a job return errClosed.
func (e *engine) close() {
	e.mu.Lock()
	if !e.closed {
		e.closed = true
		close(e.closing)
	}
	e.mu.Unlock()
	e.wg.Wait()
}

// saveLocked writes the record to the state file, if there is one. The caller
// holds e.mu, so saves happen in the order of the changes they record.
func (e *engine) saveLocked() error {
	if e.store == nil {
		return nil
	}
	st := &stateFile{Version: stateVersion, NextJobNumber: e.nextNumber, NextMatrixNumber: e.nextMatrix, Jobs: []storedJob{}, Charges: []Charge{}}
	for _, js := range e.jobs {
		st.Jobs = append(st.Jobs, storedJob{Job: js.job, Number: js.number, Plan: js.plan})
		st.Charges = append(st.Charges, js.charges...)
	}
	return e.store.save(st)
}

// saveOrLog saves after a change nobody is waiting to hear about; a failure
// is logged because the in-memory record is still right.
func (e *engine) saveOrLog(what string) {
	if err := e.saveLocked(); err != nil {
		e.logger.Error("could not save the record after "+what, "error", err)
	}
}

func unknownJobError(id string) error {
	return fmt.Errorf("no job %q on this provider; job IDs look like hosted-suite-9912", id)
}
