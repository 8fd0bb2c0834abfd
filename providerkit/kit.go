package providerkit

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/money"
)

// Work does what a call of a paid tool asks, once per job. It may run
// again for the same job after the server restarted ([Kit.Resume]), so it
// passes run.Job.ID on to whatever does the work and records each charge
// under an ID of its own. Its result becomes the job's result (as JSON);
// an error fails the job. ctx ends when the job is cancelled or the kit
// closes.
type Work func(ctx context.Context, run *Run) (result any, err error)

// Paid is how a tool's calls become jobs.
type Paid struct {
	// Work runs each job. Required.
	Work Work
	// Estimate is a fixed price per call, declared so that the gateway
	// reserves it against an approval before it sends the call.
	Estimate *money.Amount
	// EstimateFunc prices a call from its arguments; the kit serves it as
	// the tool estimate_TOOL. Set at most one of Estimate and
	// EstimateFunc; with neither, the tool declares no estimate.
	EstimateFunc func(ctx context.Context, arguments json.RawMessage) (money.Amount, error)
	// Currency of the estimate and the charges. Default USD.
	Currency string
}

func (p *Paid) currency() string {
	if p.Estimate != nil {
		return p.Estimate.Currency
	}
	if p.Currency != "" {
		return p.Currency
	}
	return money.DefaultCurrency
}

// Options configure a Kit.
type Options struct {
	Logger *slog.Logger
	// NotFoundSafeAfter is declared to the gateway as the time after a
	// send began from which a lookup's "not found" means the send never
	// reached the server, so sending again cannot start a second job. The
	// kit records a key with its job before any work starts, so what is
	// left is how long a call can be on its way: on loopback or a local
	// network, well under the default. A server whose calls may wait
	// longer (behind a queue, a slow proxy) must declare more. Default
	// 30s; negative declares none, and the gateway then asks a human
	// instead of sending again.
	NotFoundSafeAfter time.Duration
	// Poll is how often a call with the key of a job that runs in another
	// process reads the store until the job ends. Default 500ms.
	Poll time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Kit serves paid tools from a Store. Create it with New; Close it when
// the server stops.
type Kit struct {
	store Store
	log   *slog.Logger
	now   func() time.Time
	poll  time.Duration
	safe  time.Duration

	// base is the context every job's work runs under; Close ends it.
	base  context.Context
	close context.CancelFunc

	mu      sync.Mutex
	work    map[string]Work      // by tool name
	running map[string]*running  // by job ID
	served  map[*mcp.Server]bool // servers that have the contract tools
	wg      sync.WaitGroup
}

// running is a job whose work runs in this process.
type running struct {
	cancel    context.CancelFunc
	done      chan struct{}
	cancelled bool // by cancel_job, not by Close
}

// New returns a kit that keeps its jobs in store.
func New(store Store, o *Options) *Kit {
	if o == nil {
		o = &Options{}
	}
	k := &Kit{
		store: store, log: o.Logger, now: o.Now, poll: o.Poll, safe: o.NotFoundSafeAfter,
		work: map[string]Work{}, running: map[string]*running{}, served: map[*mcp.Server]bool{},
	}
	if k.log == nil {
		k.log = slog.New(slog.DiscardHandler)
	}
	if k.now == nil {
		k.now = time.Now
	}
	if k.poll <= 0 {
		k.poll = 500 * time.Millisecond
	}
	if k.safe == 0 {
		k.safe = 30 * time.Second
	}
	k.base, k.close = context.WithCancel(context.Background())
	return k
}

// AddTool adds t to s as a paid tool whose calls run p.Work once per
// idempotency key, declares its contract in t's _meta, and adds the
// contract tools to s unless they are there. A call without a key is
// refused (-32602): it could not be looked up after a lost response.
//
// The call answers when its job has ended, with structured content
// {"job_id", "status", "result"} (or "error", and isError, for a job that
// failed or was cancelled). AddTool panics, as the go-sdk's does, on a
// tool it cannot serve.
func (k *Kit) AddTool(s *mcp.Server, t *mcp.Tool, p Paid) {
	if p.Work == nil {
		panic(fmt.Sprintf("providerkit: tool %q has no Work", t.Name))
	}
	if p.Estimate != nil && p.EstimateFunc != nil {
		panic(fmt.Sprintf("providerkit: tool %q sets both Estimate and EstimateFunc; set one", t.Name))
	}
	tool := *t
	tool.Meta = maps.Clone(t.Meta)
	if tool.Meta == nil {
		tool.Meta = mcp.Meta{}
	}
	tool.Meta[ContractMeta] = declare(t.Name, &p, k.safe)
	tool.OutputSchema = jobSchema(t.OutputSchema)
	k.mu.Lock()
	k.work[t.Name] = p.Work
	first := !k.served[s]
	k.served[s] = true
	k.mu.Unlock()
	s.AddTool(&tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return k.call(ctx, t.Name, req)
	})
	if p.EstimateFunc != nil {
		k.addEstimate(s, t, &p)
	}
	if first {
		k.addContractTools(s)
	}
}

// call starts or finds the job of the call's key and answers when it ends.
func (k *Kit) call(ctx context.Context, name string, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	key, _ := req.Params.Meta[KeyMeta].(string)
	if key == "" {
		return nil, &jsonrpc.Error{
			Code:    jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("%s starts paid work and needs an idempotency key: send a unique string in _meta[%q], the same one when retrying", name, KeyMeta),
		}
	}
	args := req.Params.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	job, created, err := k.store.Start(ctx, "job_"+rand.Text(), key, name, args, k.now())
	if err != nil {
		return nil, fmt.Errorf("record the job of key %q: %w", key, err)
	}
	if created {
		k.log.Info("job started", "job_id", job.ID, "tool", name)
		k.launch(job)
	}
	if job, err = k.wait(ctx, job.ID); err != nil {
		return nil, err
	}
	return jobResult(job), nil
}

// launch runs job's work in the background unless it runs here already.
func (k *Kit) launch(job *Job) {
	k.mu.Lock()
	defer k.mu.Unlock()
	work := k.work[job.Tool]
	if k.running[job.ID] != nil || work == nil || k.base.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(k.base)
	r := &running{cancel: cancel, done: make(chan struct{})}
	k.running[job.ID] = r
	k.wg.Go(func() {
		defer close(r.done)
		defer cancel()
		result, err := work(ctx, &Run{Job: job, kit: k})
		k.mu.Lock()
		delete(k.running, job.ID)
		cancelled := r.cancelled
		k.mu.Unlock()
		if err != nil && !cancelled && k.base.Err() != nil {
			// The kit is closing: the job has not ended, and the next
			// Resume runs it again.
			return
		}
		status, text, raw := StatusCompleted, "", json.RawMessage(nil)
		switch {
		case cancelled:
			status, text = StatusCancelled, "cancelled by "+CancelJobTool
		case err != nil:
			status, text = StatusFailed, err.Error()
		default:
			if raw, err = json.Marshal(result); err != nil {
				status, text, raw = StatusFailed, fmt.Sprintf("the result cannot be encoded as JSON: %v", err), nil
			}
		}
		if _, err := k.store.End(context.WithoutCancel(ctx), job.ID, status, raw, text, k.now()); err != nil {
			k.log.Error("a job ended but could not be recorded; it runs again at the next Resume", "job_id", job.ID, "error", err)
			return
		}
		k.log.Info("job ended", "job_id", job.ID, "status", status)
	})
}

// wait returns the job once it has ended, or ctx's error.
func (k *Kit) wait(ctx context.Context, id string) (*Job, error) {
	for {
		k.mu.Lock()
		r := k.running[id]
		k.mu.Unlock()
		if r != nil {
			select {
			case <-r.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		job, err := k.store.Job(ctx, id)
		if err != nil || job.Status.Ended() {
			return job, err
		}
		if r == nil {
			// The job runs in another process (or waits for Resume).
			select {
			case <-time.After(k.poll):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
}

// Resume runs again the work of every job that had not ended when the
// store was last used, for the tools added so far. Call it once the tools
// are added, before serving. With several processes on one store, call it
// in one of them: work that runs twice for a job must be safe (see Work).
func (k *Kit) Resume(ctx context.Context) error {
	jobs, err := k.store.Unended(ctx)
	if err != nil {
		return fmt.Errorf("list the jobs that had not ended: %w", err)
	}
	for _, job := range jobs {
		k.mu.Lock()
		_, known := k.work[job.Tool]
		k.mu.Unlock()
		if !known {
			k.log.Warn("a job that had not ended belongs to no tool added; it stays running", "job_id", job.ID, "tool", job.Tool)
			continue
		}
		k.log.Info("job resumed", "job_id", job.ID, "tool", job.Tool)
		k.launch(job)
	}
	return nil
}

// Close stops every job's work without ending the job, so that the next
// Resume runs it again, and waits for the work to return.
func (k *Kit) Close() {
	k.close()
	k.wg.Wait()
}

// Run is one job's work in progress.
type Run struct {
	Job *Job
	kit *Kit
}

// Charge records a charge of the job, or updates the one with c.ID. Use a
// charge ID that names the job and the charge (such as the job ID and
// "compute"), so that work run again after a restart records it once.
func (r *Run) Charge(ctx context.Context, c Charge) error {
	switch {
	case c.ID == "":
		return errors.New("a charge needs an ID, unique to the job and the charge")
	case !c.Status.Valid():
		return fmt.Errorf("charge %s: status %q is not pending, final or refunded", c.ID, c.Status)
	case c.Amount.Micros < 0:
		return fmt.Errorf("charge %s: the amount %s is negative; record a refund as status refunded", c.ID, c.Amount)
	case c.Amount.Currency == "":
		return fmt.Errorf("charge %s: the amount has no currency", c.ID)
	}
	c.JobID = r.Job.ID
	if err := r.kit.store.RecordCharge(ctx, &c, r.kit.now()); err != nil {
		return fmt.Errorf("record charge %s of job %s: %w", c.ID, r.Job.ID, err)
	}
	return nil
}

// cancel asks the job's work to stop, or ends a job whose work does not
// run here. It returns the job as it then is.
func (k *Kit) cancel(ctx context.Context, id string) (*Job, error) {
	k.mu.Lock()
	r := k.running[id]
	if r != nil {
		r.cancelled = true
		r.cancel()
	}
	k.mu.Unlock()
	if r != nil {
		select {
		case <-r.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return k.store.Job(ctx, id)
	}
	return k.store.End(ctx, id, StatusCancelled, nil, "cancelled by "+CancelJobTool, k.now())
}
