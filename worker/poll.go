package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/internal/crashpoint"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/provider"
	"github.com/taskgate/taskgate/taskwire"
)

// errStillRunning is how one look at a remote job says "not yet".
var errStillRunning = errors.New("the remote job is still running")

// pollBudget is how long one poll job follows a remote job before it gives
// its worker slot back to the other operations being followed. Short waits
// happen inside the job: River releases a snoozed job only on its
// scheduler's next pass, seconds later.
const pollBudget = riverSchedulerLag

// poll follows the bound remote job until it ends, looking every
// UpstreamPoll for up to pollBudget, then snoozes.
func (w *Worker) poll(ctx context.Context, l *lease) error {
	deadline := w.clock().Add(pollBudget)
	for {
		err := w.pollOnce(ctx, l)
		if !errors.Is(err, errStillRunning) {
			return err
		}
		wait := min(w.cfg.Worker.UpstreamPoll, deadline.Sub(w.clock()))
		if wait <= 0 {
			return river.JobSnooze(w.cfg.Worker.UpstreamPoll)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.stopping:
			// Hand the job back at once; the next start picks it up.
			return river.JobSnooze(0)
		case <-time.After(wait):
		}
	}
}

// pollOnce looks at the bound remote job once.
func (w *Worker) pollOnce(ctx context.Context, l *lease) error {
	t, err := w.resolve(ctx, l)
	if t == nil {
		return err
	}
	op := l.op
	jobs, err := w.store.RemoteJobList(ctx, op.ID)
	if err != nil {
		return err
	}
	var bound *ledger.RemoteJob
	var intended []*ledger.RemoteJob
	for _, j := range jobs {
		if j.Intended {
			bound = j
			intended = append(intended, j)
		}
	}
	switch {
	case bound == nil:
		return w.review(ctx, l, ledger.ReasonUpstreamOutcomeUnknown, "the operation is running but no remote job is bound")
	case bound.Kind == ledger.JobKindUpstreamTask && bound.UpstreamTaskID != "":
		return w.pollTask(ctx, l, t, bound)
	case l.op.IntendedRemoteJobs > 1 && len(intended) > 1:
		return w.pollRoute(ctx, l, t, intended)
	}
	return w.pollJob(ctx, l, t, bound)
}

// pollRoute looks at every remote job of a call that fans out, and ends
// the operation once all of them have ended.
func (w *Worker) pollRoute(ctx context.Context, l *lease, t *target, jobs []*ledger.RemoteJob) error {
	op := l.op
	looks := make([]*provider.FetchResult, len(jobs))
	switch {
	case t.contract.CanFetch():
		for i, j := range jobs {
			f, err := t.contract.Fetch(ctx, t.up, j.RemoteJobID, op.ProviderKey(), l.args)
			if err != nil {
				w.logger(op).Warn("poll failed; trying again", "remote_job_id", j.RemoteJobID, "err", err)
				return errStillRunning
			}
			looks[i] = f
		}
	case t.contract.CanLookup():
		lr := t.contract.Lookup(ctx, t.up, op.ProviderKey(), l.args)
		answers := map[string]provider.Answer{}
		for _, ref := range lr.Jobs {
			answers[ref.ID] = ref.Answer
		}
		for i, j := range jobs {
			a, ok := answers[j.RemoteJobID]
			if !ok {
				w.logger(op).Warn("the lookup does not list a bound job yet; trying again", "remote_job_id", j.RemoteJobID, "detail", lr.Detail)
				return errStillRunning
			}
			looks[i] = &provider.FetchResult{Answer: a}
		}
	default:
		return w.review(ctx, l, ledger.ReasonUpstreamOutcomeUnknown, fmt.Sprintf(
			"%d remote jobs cannot be followed: the provider contract can neither fetch a job nor look the operation up; resolve it with --fail once the provider's own record shows how they ended", len(jobs)))
	}
	crashpoint.Reach(crashpoint.WhilePolling)
	for _, f := range looks {
		if !f.Answer.JobStatus().Terminal() {
			return errStillRunning
		}
	}
	return w.finishRoute(ctx, l, t, jobs, looks)
}

// finishRoute ends a call that fans out once every job has ended: completed
// when all completed, with a result that lists each job's (under the
// contract's remote_jobs_field); otherwise failed, or cancelled when every
// job was, naming the jobs that did not complete.
func (w *Worker) finishRoute(ctx context.Context, l *lease, t *target, jobs []*ledger.RemoteJob, looks []*provider.FetchResult) error {
	op := l.op
	var ups []*ledger.RemoteJobUpsert
	var items []any
	var text []mcp.Content
	var notDone []string
	cancelled := 0
	for i, j := range jobs {
		f := looks[i]
		u := &ledger.RemoteJobUpsert{Upstream: op.Upstream, Endpoint: t.up.Endpoint(), RemoteJobID: j.RemoteJobID, Status: f.Answer.JobStatus()}
		if f.Result != nil {
			raw, err := json.Marshal(f.Result)
			if err != nil {
				return err
			}
			u.Result = raw
			items = append(items, f.Result.StructuredContent)
			text = append(text, f.Result.Content...)
		}
		ups = append(ups, u)
		switch f.Answer {
		case provider.Completed:
		case provider.Cancelled:
			cancelled++
			notDone = append(notDone, j.RemoteJobID+" "+string(f.Answer))
		default:
			notDone = append(notDone, j.RemoteJobID+" "+string(f.Answer))
		}
	}
	if len(notDone) > 0 {
		msg := fmt.Sprintf("the provider reports %d of %d remote jobs not completed: %s", len(notDone), len(jobs), strings.Join(notDone, ", "))
		to := ledger.StateFailed
		if cancelled == len(jobs) {
			to = ledger.StateCancelled
		}
		return w.settle(ctx, l, &ledger.TransitionParams{
			From: []ledger.State{ledger.StateRunning}, To: to, Error: rpcError(-32603, msg), StatusMessage: &msg,
			RemoteJobs: ups,
			Events:     []ledger.EventParams{{Kind: ledger.EventFailed, Data: ledger.FailedData{Message: msg}}},
			Enqueue:    []river.InsertManyParams{job(ReconcileArgs{Operation: l.opRef}, 0)},
		})
	}
	res := &mcp.CallToolResult{Content: text}
	if items != nil {
		res.StructuredContent = map[string]any{cmp.Or(t.contract.Policy.Contract.RemoteJobsField, "remote_jobs"): items}
	}
	if len(text) == 0 {
		ids := make([]string, len(jobs))
		for i, j := range jobs {
			ids[i] = j.RemoteJobID
		}
		res.Content = []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("remote jobs %s completed at %s; the provider contract offers no way to fetch their results", strings.Join(ids, ", "), op.Upstream)}}
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return w.settle(ctx, l, &ledger.TransitionParams{
		From: []ledger.State{ledger.StateRunning}, To: ledger.StateCompleted, Result: raw, StatusMessage: new(""),
		RemoteJobs: ups,
		Creator:    &ledger.AttemptKnowledge{RemoteEffect: ledger.Yes},
		Events:     []ledger.EventParams{{Kind: ledger.EventResultStored, Data: ledger.ResultStoredData{IsError: new(false), RemoteJobID: jobs[0].RemoteJobID, Via: "fetch"}}},
		Enqueue:    []river.InsertManyParams{job(ReconcileArgs{Operation: l.opRef}, 0)},
	})
}

// pollJob looks at a provider job through the provider contract.
func (w *Worker) pollJob(ctx context.Context, l *lease, t *target, bound *ledger.RemoteJob) error {
	op := l.op
	if !t.contract.CanFetch() && !t.contract.CanLookup() {
		return w.review(ctx, l, ledger.ReasonUpstreamOutcomeUnknown, fmt.Sprintf(
			"job %s cannot be followed: the provider contract can neither fetch a job nor look the operation up; resolve it with --fail once the provider's own record shows how it ended", bound.RemoteJobID))
	}
	f, err := t.contract.Fetch(ctx, t.up, bound.RemoteJobID, op.ProviderKey(), l.args)
	if err != nil {
		w.logger(op).Warn("poll failed; trying again", "remote_job_id", bound.RemoteJobID, "err", err)
		return errStillRunning
	}
	crashpoint.Reach(crashpoint.WhilePolling)
	switch f.Answer {
	case provider.Completed:
		return w.fetchAndFinish(ctx, l, t, bound.RemoteJobID, nil)
	case provider.Failed, provider.Cancelled:
		return w.finishFailed(ctx, l, t, bound.RemoteJobID, f.Answer.JobStatus(), fmt.Sprintf("the provider reports job %s %s", bound.RemoteJobID, f.Answer), nil)
	default:
		return errStillRunning
	}
}

// pollTask follows an upstream MCP task.
func (w *Worker) pollTask(ctx context.Context, l *lease, t *target, bound *ledger.RemoteJob) error {
	op := l.op
	task, err := t.up.GetTask(ctx, bound.UpstreamTaskID)
	if rpcErr := (*jsonrpc.Error)(nil); errors.As(err, &rpcErr) {
		// The upstream answered that it does not know the task (unknown,
		// or expired): asking it again changes nothing. The provider's
		// own record may still say how the job went.
		w.logger(op).Warn("the upstream no longer knows the task; following the job through the provider contract",
			"upstream_task_id", bound.UpstreamTaskID, "err", err)
		if !t.contract.CanFetch() && !t.contract.CanLookup() {
			return w.review(ctx, l, ledger.ReasonUpstreamOutcomeUnknown, fmt.Sprintf(
				"the upstream no longer knows task %s (%s) and the provider contract can neither fetch a job nor look the operation up; resolve it once the provider's own record shows how it ended",
				bound.UpstreamTaskID, rpcErr.Message))
		}
		return w.pollJob(ctx, l, t, bound)
	}
	if err != nil {
		w.logger(op).Warn("tasks/get failed; trying again", "upstream_task_id", bound.UpstreamTaskID, "err", err)
		return errStillRunning
	}
	if !task.Status.IsTerminal() {
		crashpoint.Reach(crashpoint.WhilePolling)
		if task.StatusMessage != "" && task.StatusMessage != op.StatusMessage {
			if _, err := l.transition(ctx, &ledger.TransitionParams{StatusMessage: new(task.StatusMessage)}); err != nil {
				return err
			}
		}
		return errStillRunning
	}
	switch {
	case task.Status == taskwire.StatusCompleted,
		// 2025-11-25 reports a tool result with isError:true as a failed
		// task without an error: the result is the outcome.
		task.Status == taskwire.StatusFailed && task.Error == nil && t.up.OffersTasks() == taskwire.EraLegacy:
		res, err := t.up.TaskResult(ctx, task.ID)
		if err != nil {
			var rpcErr *jsonrpc.Error
			if errors.As(err, &rpcErr) {
				return w.finishFailed(ctx, l, t, bound.RemoteJobID, ledger.JobFailed, rpcErr.Message, rpcError(rpcErr.Code, rpcErr.Message))
			}
			return fmt.Errorf("read the result of upstream task %s: %w", task.ID, err)
		}
		return w.finishTask(ctx, l, t, bound, res)
	case task.Status == taskwire.StatusFailed:
		var raw json.RawMessage
		msg := statusOr(task.StatusMessage, "the upstream task failed")
		if task.Error != nil {
			raw, _ = json.Marshal(task.Error)
			msg = task.Error.Message
		}
		return w.finishFailed(ctx, l, t, bound.RemoteJobID, ledger.JobFailed, msg, raw)
	default: // cancelled upstream
		return w.finishFailed(ctx, l, t, bound.RemoteJobID, ledger.JobCancelled, "the upstream cancelled the task", nil)
	}
}

// finishTask records a completed upstream task's result; the provider's job
// ID, when the result names one, replaces the task ID as the job's key.
func (w *Worker) finishTask(ctx context.Context, l *lease, t *target, bound *ledger.RemoteJob, res *mcp.CallToolResult) error {
	raw, err := json.Marshal(res)
	if err != nil {
		return err
	}
	jobID := bound.RemoteJobID
	ids := t.contract.RemoteJobIDs(res)
	if len(ids) > 0 {
		jobID = ids[0]
	}
	status, effect := ledger.JobCompleted, ledger.Yes
	if res.IsError {
		status, effect = ledger.JobFailed, ledger.Unknown
	}
	ups := []*ledger.RemoteJobUpsert{{
		Upstream: l.op.Upstream, RemoteJobID: jobID, RenameFrom: bound.RemoteJobID, Status: status, Result: raw,
	}}
	events := []ledger.EventParams{{Kind: ledger.EventResultStored, Data: ledger.ResultStoredData{IsError: new(res.IsError), RemoteJobID: jobID}}}
	if fansOut(l.op, ids) {
		// The task ran the whole call: its first job takes the task's
		// place, and the others are bound beside it.
		ups[0].Result = nil
		if res.IsError {
			ups[0].Status = ledger.JobUnknown
		}
		rest := make([]boundJob, 0, len(ids))
		for _, id := range ids[1:] {
			rest = append(rest, boundJob{id: id, status: ups[0].Status})
		}
		more, bound := bindJobs(l, t, append([]boundJob{{id: jobID}}, rest...), nil, "")
		ups = append(ups, more[1:]...)
		events = append(events, bound[1:]...)
	}
	return w.settle(ctx, l, &ledger.TransitionParams{
		From: []ledger.State{ledger.StateRunning}, To: ledger.StateCompleted, Result: raw, StatusMessage: new(""),
		RemoteJobs: ups,
		Creator:    &ledger.AttemptKnowledge{RemoteEffect: effect},
		Events:     events,
		Enqueue:    []river.InsertManyParams{job(ReconcileArgs{Operation: l.opRef}, 0)},
	})
}

// finishFailed ends the operation as failed after its remote job failed.
func (w *Worker) finishFailed(ctx context.Context, l *lease, t *target, jobID string, status ledger.JobStatus, msg string, rpcErr json.RawMessage) error {
	if rpcErr == nil {
		rpcErr = rpcError(-32603, msg)
	}
	to := ledger.StateFailed
	if status == ledger.JobCancelled {
		to = ledger.StateCancelled
	}
	return w.settle(ctx, l, &ledger.TransitionParams{
		From: []ledger.State{ledger.StateRunning, ledger.StateSending}, To: to, Error: rpcErr, StatusMessage: &msg,
		RemoteJobs: []*ledger.RemoteJobUpsert{{Upstream: l.op.Upstream, Endpoint: t.up.Endpoint(), RemoteJobID: jobID, Status: status}},
		Events:     []ledger.EventParams{{Kind: ledger.EventFailed, Data: ledger.FailedData{Message: msg, RemoteJobID: jobID}}},
		Enqueue:    []river.InsertManyParams{job(ReconcileArgs{Operation: l.opRef}, 0)},
	})
}
